#include "calibration/attention_kernel_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "calibration/roofline_kernel_cost.h"
#include "sim/units.h"

namespace upsim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

bool fraction_ok(double f) {
  return f > 0.0 && f <= 1.0;
}

/// peak_efficiency of the header: log2 interpolation between head_dim 64, 128 and 256, clamped.
double peak_efficiency(double at_64, double at_128, double at_256, int64_t head_dim) {
  const double t = std::clamp(std::log2(as_double(head_dim) / 64.0), 0.0, 2.0);
  return t <= 1.0 ? at_64 + t * (at_128 - at_64) : at_128 + (t - 1.0) * (at_256 - at_128);
}

}  // namespace

void check_attention_params(const AttentionParams& p) {
  if (p.block_m <= 0) {
    throw std::invalid_argument(
        fmt::format("attention: block_m must be positive, got {}", p.block_m));
  }
  for (double f :
       {p.forward_efficiency_64, p.forward_efficiency_128, p.forward_efficiency_256,
        p.backward_efficiency_64, p.backward_efficiency_128, p.backward_efficiency_256}) {
    if (!fraction_ok(f)) {
      throw std::invalid_argument(
          fmt::format("attention: efficiencies must be in (0, 1], got {}", f));
    }
  }
  if (!(p.half_efficiency_span >= 0.0)) {
    throw std::invalid_argument(fmt::format(
        "attention: half_efficiency_span must not be negative, got {}", p.half_efficiency_span));
  }
  if (p.backward_launches < 1) {
    throw std::invalid_argument(fmt::format(
        "attention: backward_launches must be at least 1, got {}", p.backward_launches));
  }
}

int64_t kernel_head_dim(AttentionKernel implementation, int64_t head_dim) {
  if (head_dim > 256) return head_dim;
  switch (implementation) {
    case AttentionKernel::kFlash2:
      return head_dim <= 192 ? (head_dim + 31) / 32 * 32 : 256;
    case AttentionKernel::kFlash3:
      for (const int64_t instantiated : {64, 96, 128, 192, 256}) {
        if (head_dim <= instantiated) return instantiated;
      }
      return 256;
    case AttentionKernel::kCudnn:
      return head_dim;
    case AttentionKernel::kFlash1:
      for (const int64_t instantiated : {32, 64, 128}) {
        if (head_dim <= instantiated) return instantiated;
      }
      return head_dim;
    case AttentionKernel::kTriton: {
      int64_t block = 16;
      while (block < head_dim)
        block *= 2;
      return block;
    }
  }
  return head_dim;
}

AttentionEstimate estimate_attention(const KernelDesc& kernel, const DeviceProfile& device,
                                     const AchievableFractions& achievable,
                                     const AttentionParams& params) {
  if (kernel.cls != KernelClass::kAttention) {
    throw std::invalid_argument(
        fmt::format("attention model: got a {} kernel", kernel_class_name(kernel.cls)));
  }
  const AttentionShape& a = kernel.attention;
  if (!a.fused) {
    throw std::invalid_argument(
        "attention model: an unfused attention is priced as its GEMM and softmax kernels");
  }
  if (a.batch <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.seq_q <= 0 || a.seq_kv <= 0 ||
      a.head_dim <= 0) {
    throw std::invalid_argument(fmt::format(
        "attention model: dimensions must be positive, got batch {} heads {} kv_heads {} "
        "seq_q {} seq_kv {} head_dim {}",
        a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_kv, a.head_dim));
  }
  if (a.heads % a.kv_heads != 0) {
    throw std::invalid_argument(fmt::format(
        "attention model: heads ({}) must be a multiple of kv_heads ({})", a.heads, a.kv_heads));
  }
  const double peak = device.peak(kernel.dtype).flops_per_second();
  if (peak <= 0.0) {
    throw std::invalid_argument(
        fmt::format("attention model: a {} attention needs a {} peak, but device `{}` has none",
                    dtype_name(kernel.dtype), dtype_name(kernel.dtype), device.name));
  }
  const double hbm = device.hbm_bandwidth.bytes_per_second();
  if (hbm <= 0.0 || device.sm_count <= 0) {
    throw std::invalid_argument(fmt::format(
        "attention model: device `{}` needs an HBM bandwidth and an SM count", device.name));
  }

  AttentionEstimate est;
  const KernelWork work = attention_work(kernel);
  est.flops = work.flops;
  est.bytes = work.bytes;
  const int64_t rows = a.backward ? a.seq_kv : a.seq_q;
  est.blocks = a.batch * a.heads * ceil_div(rows, params.block_m);
  est.waves = ceil_div(est.blocks, device.sm_count);
  est.wave_efficiency = as_double(est.blocks) / (as_double(est.waves) * device.sm_count);
  const double span = a.mean_keys_per_query();
  const int64_t kernel_dim = kernel_head_dim(a.implementation, a.head_dim);
  const double top =
      a.backward ? peak_efficiency(params.backward_efficiency_64, params.backward_efficiency_128,
                                   params.backward_efficiency_256, kernel_dim)
                 : peak_efficiency(params.forward_efficiency_64, params.forward_efficiency_128,
                                   params.forward_efficiency_256, kernel_dim);
  est.efficiency = top * span / (span + params.half_efficiency_span);
  const double padded_flops = est.flops * as_double(kernel_dim) / as_double(a.head_dim);
  est.compute_seconds = padded_flops / (peak * est.efficiency * est.wave_efficiency);
  est.memory_seconds = est.bytes / (hbm * achievable.memory);
  est.launches = a.backward ? params.backward_launches : 1;
  est.seconds = std::max(est.compute_seconds, est.memory_seconds);
  return est;
}

double attention_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const AttentionParams& params,
                         Duration kernel_overhead) {
  const AttentionEstimate est = estimate_attention(kernel, device, achievable, params);
  return est.seconds + as_double(est.launches - 1) * kernel_overhead.seconds();
}

}  // namespace upsim

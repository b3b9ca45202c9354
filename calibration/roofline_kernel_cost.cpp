#include "calibration/roofline_kernel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "calibration/gemm_kernel_model.h"

namespace upsim {
namespace {

void check_params(const RooflineParams& p) {
  if (!(p.compute_fraction > 0.0 && p.compute_fraction <= 1.0)) {
    throw std::invalid_argument(
        fmt::format("roofline: compute_fraction must be in (0, 1], got {}", p.compute_fraction));
  }
  if (!(p.memory_fraction > 0.0 && p.memory_fraction <= 1.0)) {
    throw std::invalid_argument(
        fmt::format("roofline: memory_fraction must be in (0, 1], got {}", p.memory_fraction));
  }
  if (p.kernel_overhead < Duration::zero()) {
    throw std::invalid_argument("roofline: kernel_overhead must not be negative");
  }
  if (p.embedding_index_bytes != 4 && p.embedding_index_bytes != 8) {
    throw std::invalid_argument(fmt::format(
        "roofline: embedding_index_bytes must be 4 or 8, got {}", p.embedding_index_bytes));
  }
}

/// Arithmetic rate for `kernel` on `device`; see the header contract for the fp32 fallback.
FlopRate arithmetic_peak(const KernelDesc& kernel, const DeviceProfile& device) {
  const FlopRate own = device.peak(kernel.dtype);
  if (own.flops_per_second() > 0.0) return own;
  if (kernel.cls == KernelClass::kGemm) {
    throw std::invalid_argument(
        fmt::format("roofline: a {} GEMM needs a {} peak, but device `{}` "
                    "has none",
                    dtype_name(kernel.dtype), dtype_name(kernel.dtype), device.name));
  }
  const FlopRate fp32 = device.peak(DType::kFp32);
  if (fp32.flops_per_second() <= 0.0) {
    throw std::invalid_argument(
        fmt::format("roofline: device `{}` has neither a {} nor an fp32 peak", device.name,
                    dtype_name(kernel.dtype)));
  }
  return fp32;
}

}  // namespace

KernelWork attention_work(const KernelDesc& kernel) {
  // Dao, "FlashAttention-2" (arXiv 2307.08691), section 4.1: the forward is two matmuls,
  // 4 s_q s_kv d flops per head (half under a causal mask, s_q w under a sliding window of w
  // keys: AttentionShape::mean_keys_per_query); the backward five, 2.5x the
  // forward. Traffic: q, k, v and o once each (the scores stay on chip); the backward also reads
  // o and do and writes dq, dk, dv.
  const AttentionShape& a = kernel.attention;
  const double elem = as_double(dtype_bytes(kernel.dtype));
  const double b = as_double(a.batch);
  const double q_elems = b * as_double(a.heads) * as_double(a.seq_q) * as_double(a.head_dim);
  const double kv_elems = b * as_double(a.kv_heads) * as_double(a.seq_kv) * as_double(a.head_dim);
  // Keys per query: all, half under a causal mask, about the window under a sliding window.
  const double flops = 4.0 * q_elems * a.mean_keys_per_query();
  if (!a.backward) return {flops, elem * (2.0 * q_elems + 2.0 * kv_elems)};
  return {2.5 * flops, elem * (4.0 * q_elems + 4.0 * kv_elems)};
}

KernelWork roofline_work(const KernelDesc& kernel, int64_t index_bytes) {
  const double elem = as_double(dtype_bytes(kernel.dtype));
  switch (kernel.cls) {
    case KernelClass::kGemm: {
      const double n = as_double(kernel.n);
      const double k = as_double(kernel.k);
      if (kernel.grouped.routed > 0) {
        // Rows as routed (no tiles: the roofline has no tile quantisation).
        const GroupedGemmWork w = grouped_gemm_work(kernel, 1);
        return {2.0 * w.rows * n * k, elem * (w.rows * k + w.weights * k * n + w.rows * n)};
      }
      const double batch = as_double(kernel.batch);
      const double m = as_double(kernel.m);
      return {2.0 * batch * m * n * k, elem * batch * (m * k + k * n + m * n)};
    }
    case KernelClass::kMemoryBound:
      return {kernel.flops, kernel.bytes_read + kernel.bytes_written};
    case KernelClass::kEmbeddingForward:
    case KernelClass::kEmbeddingBackward: {
      const EmbeddingShape& e = kernel.embedding;
      const double bags = as_double(e.batch) * as_double(e.tables);
      const double lookups = bags * e.pooling;
      const double row_bytes = as_double(e.dim) * elem;
      const double index_traffic = lookups * as_double(index_bytes);
      const double elements = lookups * as_double(e.dim);
      if (kernel.cls == KernelClass::kEmbeddingForward) {
        return {elements, lookups * row_bytes + index_traffic + bags * row_bytes};
      }
      if (e.update == EmbeddingUpdate::kScatterAdd) {
        // index_add_: every lookup's value row read, its table row read and written.
        return {elements, 3.0 * lookups * row_bytes + index_traffic};
      }
      return {2.0 * elements, bags * row_bytes + 2.0 * lookups * row_bytes + index_traffic};
    }
    case KernelClass::kAttention:
      return attention_work(kernel);
  }
  return {};
}

RooflineKernelCost::RooflineKernelCost(RooflineParams params) : params_(params) {
  check_params(params_);
}

Duration RooflineKernelCost::kernel_duration(const KernelDesc& kernel,
                                             const DeviceProfile& device) const {
  const KernelWork work = roofline_work(kernel, params_.embedding_index_bytes);
  if (work.flops < 0.0 || work.bytes < 0.0) {
    throw std::invalid_argument(
        fmt::format("roofline: negative work for a {} kernel ({} flops, "
                    "{} bytes)",
                    kernel_class_name(kernel.cls), work.flops, work.bytes));
  }
  double seconds = 0.0;
  if (work.flops > 0.0 || kernel.cls == KernelClass::kGemm) {
    const double rate = arithmetic_peak(kernel, device).flops_per_second();
    seconds = std::max(seconds, work.flops / (rate * params_.compute_fraction));
  }
  if (work.bytes > 0.0) {
    const double bandwidth = device.hbm_bandwidth.bytes_per_second();
    if (bandwidth <= 0.0) {
      throw std::invalid_argument(
          fmt::format("roofline: device `{}` has no HBM bandwidth", device.name));
    }
    seconds = std::max(seconds, work.bytes / (bandwidth * params_.memory_fraction));
  }
  return Duration::from_seconds_f(seconds) + params_.kernel_overhead;
}

std::optional<std::string> RooflineKernelCost::borrowed_calibration(
    const KernelDesc& kernel, const DeviceProfile& device) const {
  if (kernel.cls == KernelClass::kGemm) return std::nullopt;
  if (device.peak(kernel.dtype).flops_per_second() > 0.0) return std::nullopt;
  if (!(roofline_work(kernel, params_.embedding_index_bytes).flops > 0.0)) return std::nullopt;
  return fmt::format("{} {}: no {} peak on {}, arithmetic priced at the fp32 peak",
                     kernel_class_name(kernel.cls), dtype_name(kernel.dtype),
                     dtype_name(kernel.dtype), device.name);
}

RooflineKernelCost load_roofline(const ConfigNode& node, const AchievableFractions& achievable) {
  node.get_choice_or("model", {"roofline"}, "roofline");
  RooflineParams params;
  params.compute_fraction = node.get_double_or("compute_fraction", achievable.compute);
  params.memory_fraction = node.get_double_or("memory_fraction", achievable.memory);
  params.kernel_overhead = node.get_duration_or("kernel_overhead", params.kernel_overhead);
  params.embedding_index_bytes =
      node.get_int_or("embedding_index_bytes", params.embedding_index_bytes);
  try {
    return RooflineKernelCost(params);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

}  // namespace upsim

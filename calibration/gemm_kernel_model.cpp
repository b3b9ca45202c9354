#include "calibration/gemm_kernel_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "calibration/grouped_gemm_rows.h"

namespace upsim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// K depth of one threadblock step: CUTLASS's default sm80 fp16 tensor-op threadblock shape is
/// 128 x 256 x 64 (cutlass/gemm/device/default_gemm_configuration.h); a split-K part gets at
/// least one step.
constexpr int64_t kMinSplitDepth = 64;
/// fp8: the same 128-byte K row per stage holds 128 elements (CUTLASS's Hopper fp8 GEMMs use
/// tile K = 128, examples/54_hopper_fp8_warp_specialized_gemm).
constexpr int64_t kMinSplitDepthFp8 = 128;
/// Bytes per output element of an fp8 GEMM (written in bf16 / fp16).
constexpr double kFp8OutputBytes = 2.0;

/// Smallest MMA dimension of the tensor cores (m16n8k16, Ampere and Hopper).
constexpr int64_t kMinTile = 16;

/// The tile edge used for a problem edge of `dim` elements (see the header).
int64_t effective_tile(int64_t tile, int64_t dim) {
  const auto ceil_pow2 = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(dim)));
  return std::min(tile, std::max(kMinTile, ceil_pow2));
}

}  // namespace

GroupedGemmWork grouped_gemm_work(const KernelDesc& kernel, int64_t tile_m) {
  const double batch = as_double(kernel.batch);
  if (kernel.grouped.routed <= 0) {
    return {batch * as_double(ceil_div(kernel.m, tile_m)), batch * as_double(kernel.m), batch};
  }
  const GroupedRowExpectation e = expect_grouped_rows(kernel.grouped, kernel.batch, tile_m);
  return {batch * e.row_tiles_per_group, batch * e.rows_per_group, e.nonempty_groups};
}

void check_gemm_params(const GemmParams& p) {
  if (p.tile_m <= 0 || p.tile_n <= 0) {
    throw std::invalid_argument(
        fmt::format("gemm: tile must be positive, got {} x {}", p.tile_m, p.tile_n));
  }
  if (!(p.k_overhead >= 0.0)) {
    throw std::invalid_argument(
        fmt::format("gemm: k_overhead must not be negative, got {}", p.k_overhead));
  }
  if (!(p.compute_scale > 0.0) || !(p.memory_scale > 0.0)) {
    throw std::invalid_argument(fmt::format("gemm: scales must be positive, got {} and {}",
                                            p.compute_scale, p.memory_scale));
  }
}

GemmEstimate estimate_gemm(const KernelDesc& kernel, const DeviceProfile& device,
                           const AchievableFractions& achievable, const GemmParams& params) {
  if (kernel.cls != KernelClass::kGemm) {
    throw std::invalid_argument(
        fmt::format("gemm model: got a {} kernel", kernel_class_name(kernel.cls)));
  }
  if (kernel.batch <= 0 || kernel.m <= 0 || kernel.n <= 0 || kernel.k <= 0) {
    throw std::invalid_argument(
        fmt::format("gemm model: dimensions must be positive, got batch {} m {} n {} k {}",
                    kernel.batch, kernel.m, kernel.n, kernel.k));
  }
  const double peak = device.peak(kernel.dtype).flops_per_second();
  if (peak <= 0.0) {
    throw std::invalid_argument(
        fmt::format("gemm model: a {} GEMM needs a {} peak, but device `{}` has none",
                    dtype_name(kernel.dtype), dtype_name(kernel.dtype), device.name));
  }
  const double hbm = device.hbm_bandwidth.bytes_per_second();
  if (hbm <= 0.0 || device.sm_count <= 0) {
    throw std::invalid_argument(
        fmt::format("gemm model: device `{}` needs an HBM bandwidth and an SM count", device.name));
  }

  GemmEstimate est;
  const int64_t tm = effective_tile(params.tile_m, kernel.m);
  const int64_t tn = effective_tile(params.tile_n, kernel.n);
  const int64_t tiles_n = ceil_div(kernel.n, tn);
  const GroupedGemmWork work = grouped_gemm_work(kernel, tm);
  est.tiles = std::max<int64_t>(1, std::llround(work.row_tiles * as_double(tiles_n)));
  est.tile_efficiency =
      work.rows * as_double(kernel.n) / (work.row_tiles * as_double(tm) * as_double(tiles_n * tn));
  const int64_t sms = device.sm_count;
  if (est.tiles < sms) {
    const int64_t depth = kernel.dtype == DType::kFp8 ? kMinSplitDepthFp8 : kMinSplitDepth;
    est.split_k = std::min(sms / est.tiles, std::max<int64_t>(1, kernel.k / depth));
  }
  const int64_t parts = est.tiles * est.split_k;
  est.waves = ceil_div(parts, sms);
  est.wave_efficiency = as_double(parts) / (as_double(est.waves) * as_double(sms));

  // Never above the dtype's datasheet peak: a scale fitted where a class runs nearer its peak
  // than the profile's (bf16) achievable fraction (fp32 SIMT GEMMs reach about 97%) stops there.
  // An fp8 GEMM also stays at or below the GPU's best measured fp8 matmul (MAMF) when the
  // profile states it (a fit's asymptote can lie beyond the shapes it saw).
  const double ceiling = kernel.dtype == DType::kFp8 && achievable.fp8_compute > 0.0
                             ? peak * achievable.fp8_compute
                             : peak;
  const double rate = std::min(ceiling, peak * achievable.compute * params.compute_scale);
  const double tile_flops = 2.0 * as_double(tm) * as_double(tn) *
                            (as_double(kernel.k) / as_double(est.split_k) + params.k_overhead);
  est.compute_seconds = as_double(est.waves) * tile_flops * as_double(sms) / rate;

  const double elem = as_double(dtype_bytes(kernel.dtype));
  const double n = as_double(kernel.n);
  const double k = as_double(kernel.k);
  const double out_elem = kernel.dtype == DType::kFp8 ? kFp8OutputBytes : elem;
  // A batched GEMM's b (e m k + e k n + o m n), in that order of operations (goldens are exact).
  const double bytes =
      kernel.grouped.routed > 0
          ? elem * (work.rows * k + work.weights * k * n) + out_elem * work.rows * n
          : as_double(kernel.batch) *
                (elem * (as_double(kernel.m) * k + k * n) + out_elem * as_double(kernel.m) * n);
  est.memory_seconds = bytes / (hbm * achievable.memory * params.memory_scale);
  est.seconds = std::max(est.compute_seconds, est.memory_seconds);
  return est;
}

}  // namespace upsim

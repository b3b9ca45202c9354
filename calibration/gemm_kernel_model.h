// GEMM / bmm / linear kernels: wave and tile quantisation over a roofline, with an efficiency
// calibrated from measured sweeps (calibration/fitting/fit_kernel_calibration.h).
//
// Model (all quantities per kernel; b = batch, e = dtype_bytes(dtype)):
//   tm, tn     = min(tile_m, max(16, bit_ceil(m))), same for n: skinny problems get narrow tiles
//                (cuBLAS picks narrow tiles and GEMV kernels for them; 16 is the smallest MMA
//                dimension, m16n8k16 on Ampere and Hopper tensor cores)
//   tiles      = b x ceil(m / tm) x ceil(n / tn)               output tiles
//   split      = 1 if tiles >= sm_count, else min(floor(sm_count / tiles), max(1, k / kb)):
//                split-K spreads a GEMM with fewer tiles than SMs over the idle SMs, each split
//                at least one kb-deep K block: kb = 64 (CUTLASS's default threadblock shape for
//                sm80 half-precision tensor ops is 128 x 256 x 64, cutlass/gemm/device/
//                default_gemm_configuration.h), 128 for fp8 (the same 128-byte K row of a
//                shared-memory stage holds 128 fp8 elements; CUTLASS's Hopper fp8 GEMMs use
//                tile K = 128, examples/54_hopper_fp8_warp_specialized_gemm)
//   waves      = ceil(tiles x split / sm_count)                tiles an SM computes in turn
//   rate       = min(ceiling, peak(dtype) x achievable.compute x compute_scale)  [FLOP/s]
//   ceiling    = peak(fp8) x achievable.fp8_compute for fp8 when the profile states it (the
//                GPU's best measured fp8 matmul), else peak(dtype): no GEMM outruns either
//   compute    = waves x 2 x tm x tn x (k / split + k_overhead) / (rate / sm_count)
//   bytes      = b (e m k + e k n + o m n), o = e except fp8, whose output is 2 bytes (bf16 /
//                fp16: torch._scaled_mm and Transformer Engine write fp8 GEMMs' results in 16
//                bits); split-K partial sums, split x m n x 4 bytes, are left out: split-K
//                serves m n << k (m + n), where they stay in L2
//   memory     = bytes / (hbm_bandwidth x achievable.memory x memory_scale)
//   core time  = max(compute, memory)
// A grouped GEMM whose groups hold unequal rows (KernelDesc::grouped: rows routed to the groups,
// grouped_gemm_rows.h) tiles each group on its own: its row tiles, rows and weights read are the
// expectations over the routing (grouped_gemm_work), with tm chosen for the mean group; tiles =
// round(row tiles x ceil(n / tn)), and in bytes b m becomes the expected rows and the weights'
// b the groups expected to hold a row.
// CTAs sharing an SM share its rate, so the waves that count are per SM: an SM with one tile
// in the last wave finishes it as fast as a full SM finishes its share.
// A partial last wave, a partial edge tile and the per-tile prologue/epilogue (k_overhead, in
// K-elements) all cost time as on the GPU; large shapes approach rate.
//
// Contract:
//  - Pure: a function of (kernel, device, achievable fractions, parameters).
//  - `achievable` are the hardware profile's measured fractions (mamf best matmul / datasheet
//    peak, best streaming kernel / datasheet HBM). compute_scale and memory_scale are fitted on
//    one device relative to that device's fractions and transfer to other devices as ratios:
//    a device is assumed to stand to its own mamf best as the fitted device stands to its own.
//  - A GEMM whose dtype has no peak on the device throws std::invalid_argument; so do
//    non-positive dimensions.
#pragma once

#include <cstdint>

#include "calibration/hardware_profile.h"
#include "sim/cost_models.h"

namespace upsim {

/// Parameters of the GEMM model (name, unit, default, source).
struct GemmParams {
  /// tile_m, tile_n (elements, default 128 x 128): output tile of one CTA. Fitted by grid search
  /// over {64, 128, 256}^2 (fit_kernel_calibration.cpp).
  int64_t tile_m = 128;
  int64_t tile_n = 128;
  /// k_overhead (K-elements, default 0): per-tile prologue and epilogue, as extra K. Fitted.
  double k_overhead = 0.0;
  /// compute_scale (dimensionless, default 1): asymptotic GEMM rate / (peak x achievable.compute).
  double compute_scale = 1.0;
  /// memory_scale (dimensionless, default 1): GEMM operand streaming rate / (hbm x
  /// achievable.memory).
  double memory_scale = 1.0;
};

/// The terms of one GEMM estimate, for explanations and tests.
struct GemmEstimate {
  int64_t tiles = 0;
  int64_t split_k = 1;
  int64_t waves = 0;
  /// tiles / (waves x sm_count): the fraction of the SMs busy, over all waves.
  double wave_efficiency = 0.0;
  /// m n / (padded m x padded n): useful fraction of the computed tiles.
  double tile_efficiency = 0.0;
  double compute_seconds = 0.0;
  double memory_seconds = 0.0;
  /// max(compute_seconds, memory_seconds), without any per-kernel fixed time.
  double seconds = 0.0;
};

/// What a GEMM computes and reads, summed over its batch or groups: row tiles of `tile_m` rows,
/// rows (of k elements read, n written) and k x n weights read. A batched GEMM: b ceil(m /
/// tile_m), b m and b; a grouped GEMM with routed rows: their expectations (grouped_gemm_rows.h).
struct GroupedGemmWork {
  double row_tiles = 0.0;
  double rows = 0.0;
  double weights = 0.0;
};
GroupedGemmWork grouped_gemm_work(const KernelDesc& kernel, int64_t tile_m);

/// Throws std::invalid_argument for non-positive tiles, negative k_overhead or non-positive
/// scales.
void check_gemm_params(const GemmParams& params);

/// See the header comment. `kernel.cls` must be kGemm.
GemmEstimate estimate_gemm(const KernelDesc& kernel, const DeviceProfile& device,
                           const AchievableFractions& achievable, const GemmParams& params);

}  // namespace upsim

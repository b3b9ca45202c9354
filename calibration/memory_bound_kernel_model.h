// Memory-bound kernels (elementwise, row-wise reductions, copies, optimizer updates): the bytes
// a kernel moves over an achieved HBM bandwidth that is calibrated per op family. An optimizer
// update whose descriptor names its OptimizerShape is priced by optimizer_kernel_model.h (its
// own traffic and launch count) on the `optimizer` op's curve.
//
// Model (b_r = bytes_read, b_w = bytes_written, e = dtype_bytes(dtype)):
//   passes     = long_row_read_passes  if long_row_bytes > 0 and row_elements x e > long_row_bytes
//                1                     otherwise
//   bandwidth  = hbm_bandwidth x achievable.memory x bandwidth_scale
//   core time  = (b_r x passes + b_w) / bandwidth
// `flops` is ignored: a family's fitted bandwidth already includes its arithmetic, and the
// per-element counts of Lin et al., TPDS 2024 would be wrong here (gelu at 175 flops/element would
// need 390.3 G elements/s x 175 = 68 TFLOP/s on the A100 gelu sweep, 3.5x the fp32 peak).
// The calibrated model adds its fixed per-kernel time (kernel_overhead) on top, so the achieved
// bandwidth of a kernel of S bytes is S / (kernel_overhead + S / bandwidth): a size-dependent
// curve that saturates at `bandwidth` (see calibrated_kernel_cost.h).
//
// `passes` is the one shape effect the A100 sweeps show clearly: PyTorch's row-wise kernels keep
// a row on chip while it fits and read it again for each pass once it does not (layernorm
// 4096 x 16384 fp16 takes 1.6x the time of 16384 x 4096, the same bytes;
// test/data/llmcompass/layernorm_A100.csv).
//
// Contract: pure; bandwidth_scale is relative to the hardware profile's achievable memory
// fraction, so a curve fitted on one device transfers to another as a ratio.
#pragma once

#include <cstdint>

#include "calibration/hardware_profile.h"
#include "sim/cost_models.h"

namespace upsim {

/// One op family's achieved-bandwidth curve (name, unit, default, source: fitted, see
/// configs/calibration/a100_llmcompass.yaml).
struct MemoryCurve {
  /// bandwidth_scale (dimensionless, default 1): achieved / (hbm x achievable.memory).
  double bandwidth_scale = 1.0;
  /// long_row_bytes (bytes, default 0 = none): input rows longer than this are re-read.
  int64_t long_row_bytes = 0;
  /// long_row_read_passes (dimensionless >= 1, default 1): reads of each input byte then.
  double long_row_read_passes = 1.0;
};

/// Throws std::invalid_argument for a non-positive scale, a negative threshold or passes < 1.
void check_memory_curve(const MemoryCurve& curve);

/// Core time in seconds (no fixed per-kernel time) of a kMemoryBound kernel; see above. Throws
/// std::invalid_argument for negative bytes, or a device without HBM bandwidth.
double memory_bound_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                            const AchievableFractions& achievable, const MemoryCurve& curve);

}  // namespace upsim

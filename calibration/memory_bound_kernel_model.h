// Memory-bound kernels (elementwise, row-wise reductions, copies, optimizer updates): the bytes
// a kernel moves over an achieved HBM bandwidth that is calibrated per op family. An optimizer
// update whose descriptor names its OptimizerShape is priced by optimizer_kernel_model.h (its
// own traffic and launch count) on the `optimizer` op's curve.
//
// Model (b_r = bytes_read, b_w = bytes_written, e = dtype_bytes(dtype)):
//   r          = row_elements x e                       bytes of one input row
//   passes     = 1                     if long_row_bytes = 0 or r <= long_row_bytes
//                long_row_read_passes  if r >= full_reread_row_bytes (a step when
//                                      full_reread_row_bytes <= long_row_bytes)
//                1 + (long_row_read_passes - 1) x log2(r / long_row_bytes)
//                    / log2(full_reread_row_bytes / long_row_bytes)      in between
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
// test/data/llmcompass/layernorm_A100.csv). The re-reads do not all go to HBM at once: a
// looped reduction (torch.compile / Inductor's non-persistent reduction: one loop for the
// statistics, one to normalise) re-reads a row shortly after reading it, and the re-read hits
// in L2 while the rows in flight on all SMs fit there. As rows grow, fewer of them fit and more
// of the re-read misses, so passes ramp from 1 to long_row_read_passes between long_row_bytes
// (every re-read hits) and full_reread_row_bytes (none does); the ramp is linear in log2 of the
// row size, the axis on which the sweeps space their rows. Both ends and the pass count are
// fitted on the sweeps (fit_kernel_calibration.h); A100 layernorm: implied passes 0.94, 1.15,
// 2.49, 2.97 at 8, 16, 32, 64 KiB rows of its 4096-row block.
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
  /// full_reread_row_bytes (bytes, default 0 = a step at long_row_bytes): input rows of at least
  /// this many bytes take all long_row_read_passes; passes ramp in log2(row bytes) up to it.
  int64_t full_reread_row_bytes = 0;
};

/// Throws std::invalid_argument for a non-positive scale, a negative threshold or passes < 1.
/// full_reread_row_bytes <= long_row_bytes is a step (the ramp has no width).
void check_memory_curve(const MemoryCurve& curve);

/// Core time in seconds (no fixed per-kernel time) of a kMemoryBound kernel; see above. Throws
/// std::invalid_argument for negative bytes, or a device without HBM bandwidth.
/// Reads of each input byte for input rows of `row_bytes` (see the header comment).
double read_passes(const MemoryCurve& curve, int64_t row_bytes);

double memory_bound_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                            const AchievableFractions& achievable, const MemoryCurve& curve);

}  // namespace upsim

// `upsim calibrate kernels` for fused attention: one `attention:` section per implementation
// measured (AttentionKernel), fitted on that implementation's training rows.
//
// What is fitted: the peak efficiencies at head_dim 64, 128 and 256, forward and backward, and
// the half_efficiency_span the two directions share (attention_kernel_model.h); block_m (128)
// and backward_launches (3) keep their cited defaults. An efficiency whose head_dim no training
// row of its direction brackets (head_dim 64: a row below 128; 128: a row strictly between 64
// and 256; 256: a row above 128) is not fitted but set to its direction's nearest fitted one; a
// direction without any training row keeps the AttentionParams defaults (FlashAttention-2 on
// A100), and the section's source says so.
// A forward-plus-backward row (KernelMeasurement::forward_and_backward) is priced as its two
// kernels and constrains both directions; a head dim that only such rows measure cannot
// separate them, so its backward efficiency is tied to its forward one at the AttentionParams
// defaults' ratio (FlashAttention-2 on A100: 0.50 / 0.60 at head_dim 64, 0.63 / 0.73 at 128 and
// 256; an ASSUMPTION for other kernels, which the section's source states), and the forward one
// is capped where that ratio reaches the best pair rate measured.
// Objective: sum over training rows of ln(predicted / measured)^2, predicted as
// kernel_validation.h predicts a row (kernel_duration: the core time plus kernel_overhead;
// attention rows have no harness). Compass search (compass_search.h) from the defaults, with
// half_efficiency_span started at 64, 256 and 1024 keys; the best of the three wins.
// Efficiencies stay in [0.05, 1] and at most the best rate a training row of their direction
// reached (as a fraction of its dtype's peak: no kernel is priced faster than the fastest one
// measured), the span in [0, 16384] keys; results keep 4 significant digits. Deterministic.
#pragma once

#include <vector>

#include "calibration/fitting/kernel_measurements.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"

namespace upsim {

/// The section of the implementation of `rows` (all kAttention, one implementation, training
/// rows only), measured on `hardware`, priced with `kernel_overhead` added to every kernel.
/// provenance: the rows' own (KernelMeasurement::provenance; "measured" when they state none,
/// none when they differ);
/// source: the files the rows came from. Throws CalibrationDataError for no rows or rows of
/// several implementations.
AttentionCalibration fit_attention(const std::vector<const KernelMeasurement*>& rows,
                                   const HardwareProfile& hardware, Duration kernel_overhead);

}  // namespace upsim

// `upsim calibrate` for kernels: fits the calibrated kernel model's parameters to measured
// kernels (kernel_measurements.h) by deterministic least squares on log time.
//
// What is fitted (training points only; held-out points are never seen):
//  - GEMM (op `gemm`), per rate class (fp16 and bf16 together: same tensor cores, same peak;
//    every other dtype alone). The class with the most harness-timed training rows is primary:
//    tile_m x tile_n in {64, 128, 256}^2 but 256 x 256 by grid search; for each, memory_scale,
//    k_overhead and the sweep's harness (floor, offset, compute_speedup) by compass search.
//    With harness-timed rows only, its compute_scale stays 1: the asymptotic rate is the
//    profile's sustained achievable fraction (mamf, measured in bf16), and a wall-clock sweep
//    that runs faster than that is described by its harness's compute_speedup
//    (kernel_calibration.h, HarnessOverhead). Rows of kernel time in the same class (`# harness:
//    none`: kernel_measurements.h, a trace's kernel durations, a benchmark's GPU time per call)
//    are priced as the model's kernel duration (core + kernel_overhead) and measure the rate
//    itself: compute_scale is then fitted too, and compute_speedup is relative to it. Every
//    other class shares the primary's harness for its timed rows and fits its own tile (grid),
//    compute_scale (its rate relative to peak x achievable.compute), memory_scale and
//    k_overhead. The result is the GEMM entry of each measured dtype (fp16 and bf16 stand in
//    for each other); `default` (every unmeasured dtype) is the primary's tile and
//    memory_scale with k_overhead 0 (the prologue/epilogue was measured in K-steps of the
//    primary dtype) and compute_scale 1 (the profile's rate). With no harness-timed row the
//    largest class is primary and no `measurement: gemm` is written.
//  - Rows measured on another GPU than the fit's (KernelMeasurement::measured_on: another
//    memory or form factor of the same chip, `calibrate kernels --measured-on`) are priced on
//    that GPU's profile (its peaks, bandwidth and achievable fractions), so the fitted scales,
//    relative to the profile, describe the fit's GPU.
//  - Memory-bound curves: each curve named by the ops' map (default_curve_of_op(), or a table's
//    `# curve:` declaration) that has measured ops gets
//    bandwidth_scale, and, where its ops are row-wise, long_row_bytes (grid over 1 KiB .. 128 KiB
//    in powers of two, or none; the smallest of equally good thresholds wins), the end of the
//    re-read ramp full_reread_row_bytes (a larger power of two up to the longest training row,
//    or a step; of equally good shapes the widest ramp wins: without a training row between
//    two measured row sizes it interpolates between them rather than put a cliff at one) and
//    long_row_read_passes; each measured op gets its harness (floor, offset), except an op whose
//    tables declare `# harness: none` (kernel_measurements.h), priced as its kernel duration.
//  - kernel_overhead is the hardware profile's (what runs on that GPU add to every kernel,
//    load_calibrated), else the cited default; every kernel-time row is priced with it.
//  - Embedding parameters keep their cited defaults (no sweep measures them).
//  - Fused attention: one `attention:` section per implementation with training rows
//    (fit_attention.h); implementations not measured get none (kernel_calibration.h says how
//    they are priced).
//  - No sweep measures fp8 either: the file has no fp8 entry, and the model prices fp8 GEMMs
//    with the bf16 fit at the profile's measured fp8 rate (calibrated_kernel_cost.h).
// Objective: sum over training points of ln(predicted / measured)^2, predicted as in
// kernel_validation.h. Compass search: from fixed starting points, try +-step along each
// parameter, take the first improvement, halve the steps when none improves, stop below a
// relative step of 1e-7. No randomness: the same measurements give the same file, byte for byte.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "calibration/fitting/kernel_measurements.h"
#include "calibration/fitting/kernel_validation.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"

namespace upsim {

struct CalibrationResult {
  KernelCalibration calibration;
  /// validate_kernels of the fitted model on the same measurements (train and held out).
  std::vector<KernelValidationRow> validation;
};

/// Fits on the training rows of `measurements`, taken on `hardware` (its profile's achievable
/// fractions anchor the scales). `source` is recorded in the file. Throws CalibrationDataError
/// when there are no training rows, or an op has training rows but no model family.
CalibrationResult fit_kernel_calibration(const std::vector<KernelMeasurement>& measurements,
                                         const HardwareProfile& hardware, std::string source);

/// The comment block written above a fitted calibration: provenance, split, fit errors.
std::string calibration_header(const CalibrationResult& result);

/// The calibration file's text: kernel_calibration_yaml(result.calibration,
/// calibration_header(result)). The caller writes it (tools/: atomically, regular files only).
std::string calibration_file_text(const CalibrationResult& result);

}  // namespace upsim

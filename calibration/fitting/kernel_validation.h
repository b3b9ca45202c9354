// `upsim validate kernels`: the calibrated kernel model against measured kernels, per op, as the
// seed paper reports error (ARCHITECTURE.md "Accuracy is measured"): e = predicted / measured - 1,
// summarised as the geometric mean of |e| (each |e| floored at 1e-6 so that an exact match
// does not send the mean to zero), separately on the training and the held-out points.
//
// What is compared: a measurement whose op has a `measurement` entry in the calibration (the
// sweep's harness, kernel_calibration.h), and whose table does not declare `# harness: none`
// (KernelMeasurement::harness_none), is predicted as max(floor, offset + core time), a
// GEMM's compute term divided by the harness's compute_speedup; any
// other as the model's kernel_duration (core time + kernel_overhead; an embedding op's whole
// time), e.g. kernel durations from a Kineto trace.
#pragma once

#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/kernel_measurements.h"
#include "sim/cost_models.h"

namespace upsim {

struct KernelValidationRow {
  std::string op;  ///< the op, or "<op>/<dtype>" (see validate_kernels)
  size_t train_points = 0;
  size_t held_out_points = 0;
  /// Geometric means of |e|; 0 when there are no points of that kind.
  double train_geomean = 0.0;
  double held_out_geomean = 0.0;
  /// Largest |e| on the held-out points.
  double held_out_max = 0.0;
  /// Where the points come from: their tables' provenance (KernelMeasurement::provenance),
  /// "mixed" when they differ, "-" when no table states one.
  std::string provenance;
};

/// Throws CalibrationDataError naming the row's origin when `device` cannot price it: a GEMM or
/// fused attention whose dtype has no peak on the device (measurements of another GPU, or a
/// wrong --hardware).
void require_priceable(const KernelMeasurement& measurement, const DeviceProfile& device);

/// Predicted value of `measurement` in seconds (see the header comment), on the GPU it was
/// measured on (KernelMeasurement::measured_on) when that is not `device`.
double predicted_measurement_seconds(const CalibratedKernelCost& model,
                                     const KernelMeasurement& measurement,
                                     const DeviceProfile& device);

/// One row per op, in order of first appearance in `measurements`; an op measured in several
/// dtypes gets one row per dtype, labelled "<op>/<dtype>" (e.g. gemm/tf32).
std::vector<KernelValidationRow> validate_kernels(
    const std::vector<KernelMeasurement>& measurements, const CalibratedKernelCost& model,
    const DeviceProfile& device);

/// Geometric mean of max(|e|, 1e-6); 0 for an empty list.
double geomean_abs_error(const std::vector<double>& errors);

/// A fixed-width table: op, data (provenance), points (train / held out), geomean |e| train,
/// held out, max held out (percent, two decimals). Deterministic.
std::string format_kernel_validation(const std::vector<KernelValidationRow>& rows);

/// Every point: origin, split, shape, measured and predicted (us), e (percent). For verbose
/// output and for explaining a bad row.
std::string format_kernel_points(const std::vector<KernelMeasurement>& measurements,
                                 const CalibratedKernelCost& model, const DeviceProfile& device);

}  // namespace upsim

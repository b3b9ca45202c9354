// CalibratedKernelCost: the calibrated kernel model. It dispatches on KernelClass to the GEMM
// model (gemm_kernel_model.h), the per-family memory-bound model (memory_bound_kernel_model.h;
// an optimizer update with a known OptimizerShape goes to optimizer_kernel_model.h on the
// `optimizer` op's curve, and a descriptor of L launches gets L kernel_overheads) and the
// data-distribution-aware embedding-bag model (embedding_bag_model.h), with parameters
// from a calibration file (kernel_calibration.h) and the device's achievable fractions from its
// hardware profile:
//
//   duration = core_seconds(kernel, device) + calibration.kernel_overhead   GEMM, memory-bound
//              core_seconds(kernel, device)                                embedding ops: the
//              model's time is the op's whole GPU time, one kernel_floor per FBGEMM kernel
//              (embedding_bag_model.h), so the fixed per-kernel time is not added again
//
// Contract:
//  - Pure and const; parameters fixed at construction (DESIGN.md "Cost models").
//  - Built for one hardware profile: `achievable` are that profile's fractions, and the fitted
//    scales are relative to them (so a calibration fitted on one GPU prices another; see
//    gemm_kernel_model.h).
//  - Errors of the sub-models (a GEMM dtype the device has no unit for, negative work, a bad
//    histogram) are std::invalid_argument naming the kernel class and the reason.
#pragma once

#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"

namespace upsim {

class CalibratedKernelCost final : public KernelCostModel {
 public:
  CalibratedKernelCost(KernelCalibration calibration, AchievableFractions achievable);

  Duration kernel_duration(const KernelDesc& kernel, const DeviceProfile& device) const override;

  /// The kernel's time in seconds without kernel_overhead (what a sweep's harness adds to); for
  /// an embedding op, its whole time (= kernel_duration).
  double core_seconds(const KernelDesc& kernel, const DeviceProfile& device) const;

  const KernelCalibration& calibration() const { return calibration_; }
  const AchievableFractions& achievable() const { return achievable_; }

 private:
  KernelCalibration calibration_;
  AchievableFractions achievable_;
};

/// Builds the model from a section `{model: calibrated, calibration: calibration/x.yaml}`:
/// `calibration` is a path relative to the file holding it (inlined with load_reference) or an
/// inline map in the schema of load_kernel_calibration; optional `kernel_overhead` overrides
/// the file's. The fractions come from `hardware.achievable`.
CalibratedKernelCost load_calibrated(const ConfigNode& node, const HardwareProfile& hardware);

}  // namespace upsim

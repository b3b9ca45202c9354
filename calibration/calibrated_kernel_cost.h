// CalibratedKernelCost: the calibrated kernel model. It dispatches on KernelClass to the GEMM
// model (gemm_kernel_model.h), the per-family memory-bound model (memory_bound_kernel_model.h;
// an optimizer update with a known OptimizerShape goes to optimizer_kernel_model.h on the
// `optimizer` op's curve, and a descriptor of L launches gets L kernel_overheads) and the
// data-distribution-aware embedding-bag model (embedding_bag_model.h; a memory-bound kernel
// with a fused pointwise part, KernelDesc::fused_pointwise_read / _written, prices that part on
// the `binary` op's curve and the rest on its own op's, in one kernel), with parameters
// from a calibration file (kernel_calibration.h) and the device's achievable fractions from its
// hardware profile. Fused attention is attention_kernel_model.h with the file's `attention:`
// parameters (the FlashAttention-2 A100 defaults when it has none).
//
//   (kernel_overhead: the hardware profile's per-GPU value, see load_calibrated)
//   duration = core_seconds(kernel, device) + calibration.kernel_overhead   GEMM, memory-bound,
//                                                                          attention
//              core_seconds(kernel, device)                                embedding ops: the
//              model's time is the op's whole GPU time, one kernel_floor per FBGEMM kernel
//              (embedding_bag_model.h), so the fixed per-kernel time is not added again
//
// Contract:
//  - Pure and const; parameters fixed at construction (ARCHITECTURE.md "Cost models").
//  - Built for one hardware profile: `achievable` are that profile's fractions, and the fitted
//    scales are relative to them (so a calibration fitted on one GPU prices another; see
//    gemm_kernel_model.h).
//  - A GEMM dtype without its own fit takes `default`, except fp8: without an fp8 fit it takes
//    the bf16 fit (else fp16, else default) at the device's measured fp8 rate, peak(fp8) x
//    achievable.fp8_compute, i.e. the bf16 fit's rate x the measured fp8 / bf16 MAMF ratio;
//    a profile without a measured fp8 fraction uses achievable.compute (the datasheet peak
//    ratio). The fit's per-tile prologue / epilogue keeps its time: k_overhead (K-elements) is
//    multiplied by that rate ratio. fp8 tiles step K by 128 and write 16-bit outputs
//    (gemm_kernel_model.h). A device without an fp8 peak (A100) cannot price fp8:
//    std::invalid_argument.
//  - borrowed_calibration names every parameter borrowed for a kernel, joined by "; ": the
//    calibration fitted on another GPU than `device`, a GEMM dtype without its own fit, a
//    memory op without a measured curve, attention without an `attention:` section, the
//    calibration file's kernel_overhead for a hardware profile without its own.
//  - A what-if on the SM count (a device whose sm_count differs from `lookup_sm_count`, the
//    stated chip's) prices arithmetic on its SMs (GEMM and attention waves over the scaled
//    peaks), but embedding lookups as on the stated chip: the embedding model shares the L2
//    among the tables its warps have in flight (sm_count x warps_per_sm / batch) and has no
//    term for the DRAM requests fewer warps keep in flight (Little's law), so on fewer SMs it
//    would keep more rows resident and charge nothing for the lost parallelism, pricing a chip
//    with SMs disabled faster. Lookups are therefore never faster on fewer SMs, nor slower on
//    more (the bandwidth they reach is the saturated HBM's either way).
//  - Errors of the sub-models (a GEMM dtype the device has no unit for, negative work, a bad
//    histogram) are std::invalid_argument naming the kernel class and the reason.
#pragma once

#include <optional>
#include <string>

#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"

namespace upsim {

class CalibratedKernelCost final : public KernelCostModel {
 public:
  /// `kernel_overhead_note`, when not empty, says where calibration.kernel_overhead was borrowed
  /// from (load_calibrated: a hardware profile without its own); borrowed_calibration repeats it
  /// for every kernel the overhead is added to.
  /// `lookup_sm_count` (0: each device's own) is the SM count embedding lookups are priced at
  /// (see the contract; load_calibrated passes the hardware profile's stated one).
  CalibratedKernelCost(KernelCalibration calibration, AchievableFractions achievable,
                       std::string kernel_overhead_note = {}, int32_t lookup_sm_count = 0);

  Duration kernel_duration(const KernelDesc& kernel, const DeviceProfile& device) const override;
  std::optional<std::string> borrowed_calibration(const KernelDesc& kernel,
                                                  const DeviceProfile& device) const override;
  /// The GEMM model's tiles x split-K slices (gemm_kernel_model.h); 0 for other kernels.
  int64_t gemm_ctas(const KernelDesc& kernel, const DeviceProfile& device) const override;

  /// The kernel's time in seconds without kernel_overhead (what a sweep's harness adds to); for
  /// an embedding op, its whole time (= kernel_duration).
  double core_seconds(const KernelDesc& kernel, const DeviceProfile& device) const;

  /// The GEMM estimate with the parameters and fractions the model uses for kernel.dtype (see
  /// the contract for fp8). `kernel.cls` must be kGemm.
  GemmEstimate gemm_estimate(const KernelDesc& kernel, const DeviceProfile& device) const;

  const KernelCalibration& calibration() const { return calibration_; }
  const AchievableFractions& achievable() const { return achievable_; }

 private:
  /// A memory-bound kernel's core time: its op's curve, and for the bytes of a fused pointwise
  /// part (KernelDesc::fused_pointwise_read / _written) the binary op's curve.
  double memory_bound_core_seconds(const KernelDesc& kernel, const DeviceProfile& device) const;

  KernelCalibration calibration_;
  AchievableFractions achievable_;
  std::string kernel_overhead_note_;
  int32_t lookup_sm_count_ = 0;
};

/// Builds the model from a section `{model: calibrated, calibration: calibration/x.yaml}`:
/// `calibration` is a path relative to the file holding it (inlined with load_reference) or an
/// inline map in the schema of load_kernel_calibration; an optional `attention:` map
/// (read_attention_params) overrides the file's attention section. The fractions come from
/// `hardware.achievable`. The per-kernel overhead, first found of: the section's
/// `kernel_overhead` (a what-if), the hardware profile's `kernel_overhead` (measured per GPU),
/// the calibration file's (its fitted GPU's, written by `upsim calibrate`; then
/// borrowed_calibration says so).
CalibratedKernelCost load_calibrated(const ConfigNode& node, const HardwareProfile& hardware);

}  // namespace upsim

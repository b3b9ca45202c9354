#include "calibration/calibrated_kernel_cost.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "calibration/optimizer_kernel_model.h"
#include "calibration/roofline_kernel_cost.h"

namespace upsim {

CalibratedKernelCost::CalibratedKernelCost(KernelCalibration calibration,
                                           AchievableFractions achievable)
    : calibration_(std::move(calibration)), achievable_(achievable) {
  if (calibration_.kernel_overhead < Duration::zero()) {
    throw std::invalid_argument("calibrated: kernel_overhead must not be negative");
  }
  if (!(achievable_.compute > 0.0 && achievable_.compute <= 1.0) ||
      !(achievable_.memory > 0.0 && achievable_.memory <= 1.0)) {
    throw std::invalid_argument("calibrated: achievable fractions must be in (0, 1]");
  }
  check_gemm_params(calibration_.gemm);
  for (const auto& own : calibration_.gemm_by_dtype) {
    if (own) check_gemm_params(*own);
  }
  for (const auto& [name, curve] : calibration_.curves) {
    check_memory_curve(curve);
  }
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    (void)calibration_.curve_for(static_cast<MemoryOp>(i));
  }
  check_embedding_params(calibration_.embedding);
}

double CalibratedKernelCost::core_seconds(const KernelDesc& kernel,
                                          const DeviceProfile& device) const {
  switch (kernel.cls) {
    case KernelClass::kGemm:
      return estimate_gemm(kernel, device, achievable_, calibration_.gemm_for(kernel.dtype))
          .seconds;
    case KernelClass::kMemoryBound:
      if (kernel.memory_op == MemoryOp::kOptimizer &&
          kernel.optimizer.kind != OptimizerKind::kUnspecified) {
        const int64_t launches = optimizer_traffic(kernel.optimizer, kernel.dtype).launches;
        return optimizer_seconds(kernel, device, achievable_,
                                 calibration_.curve_for(kernel.memory_op)) +
               static_cast<double>(std::max<int64_t>(launches - 1, 0)) *
                   calibration_.kernel_overhead.seconds();
      }
      return memory_bound_seconds(kernel, device, achievable_,
                                  calibration_.curve_for(kernel.memory_op));
    case KernelClass::kEmbeddingForward:
    case KernelClass::kEmbeddingBackward:
      return embedding_seconds(kernel, device, achievable_, calibration_.embedding);
    case KernelClass::kAttention: {
      // Placeholder until the attention model lands: the roofline at the achievable fractions.
      const KernelWork w = attention_work(kernel);
      const double compute =
          w.flops / (device.peak(kernel.dtype).flops_per_second() * achievable_.compute);
      const double memory =
          w.bytes / (device.hbm_bandwidth.bytes_per_second() * achievable_.memory);
      return std::max(compute, memory);
    }
  }
  throw std::invalid_argument("calibrated: unknown kernel class");
}

Duration CalibratedKernelCost::kernel_duration(const KernelDesc& kernel,
                                               const DeviceProfile& device) const {
  const Duration core = Duration::from_seconds_f(core_seconds(kernel, device));
  if (kernel.cls == KernelClass::kEmbeddingForward ||
      kernel.cls == KernelClass::kEmbeddingBackward) {
    return core;
  }
  return core + calibration_.kernel_overhead;
}

CalibratedKernelCost load_calibrated(const ConfigNode& node, const HardwareProfile& hardware) {
  node.get_choice("model", {"calibrated"});
  const ConfigNode file = node.child("calibration").is_map() ? node.child("calibration")
                                                             : node.load_reference("calibration");
  KernelCalibration calibration = load_kernel_calibration(file);
  calibration.kernel_overhead =
      node.get_duration_or("kernel_overhead", calibration.kernel_overhead);
  try {
    return CalibratedKernelCost(std::move(calibration), hardware.achievable);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

}  // namespace upsim

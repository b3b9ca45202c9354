#include "calibration/model_registry.h"

#include "calibration/alpha_beta_collective_cost.h"
#include "calibration/calibrated_kernel_cost.h"
#include "calibration/host_overhead_cpu_cost.h"
#include "calibration/roofline_kernel_cost.h"
#include "calibration/seed_curve_collective_cost.h"

namespace upsim {

std::unique_ptr<KernelCostModel> make_kernel_cost_model(const ConfigNode& node,
                                                        const HardwareProfile& hardware) {
  const std::string name = node.get_choice("model", kKernelModelNames);
  if (name == "roofline") {
    return std::make_unique<RooflineKernelCost>(load_roofline(node, hardware.achievable));
  }
  if (name == "calibrated") {
    return std::make_unique<CalibratedKernelCost>(load_calibrated(node, hardware));
  }
  node.child("model").fail("kernel model `" + name + "` has no builder");
}

std::unique_ptr<CpuCostModel> make_cpu_cost_model(const ConfigNode& node) {
  const std::string name = node.get_choice("model", kCpuModelNames);
  if (name == "host_overheads") {
    const ConfigNode overheads = node.child("overheads");
    if (overheads.is_map()) {
      return std::make_unique<HostOverheadCpuCost>(load_host_overheads(overheads));
    }
    return std::make_unique<HostOverheadCpuCost>(
        load_host_overheads(node.load_reference("overheads")));
  }
  node.child("model").fail("cpu model `" + name + "` has no builder");
}

std::unique_ptr<CollectiveCostModel> make_collective_cost_model(const ConfigNode& node,
                                                                const HardwareProfile& hardware) {
  const std::string name = node.get_choice("model", kCollectiveModelNames);
  if (name == "alpha_beta") {
    return std::make_unique<AlphaBetaCollectiveCost>(load_alpha_beta(node, hardware));
  }
  if (name == "seed_curve") {
    return std::make_unique<SeedCurveCollectiveCost>(load_seed_curve(node, hardware));
  }
  node.child("model").fail("collective model `" + name + "` has no builder");
}

}  // namespace upsim

#include "calibration/model_registry.h"

#include <fmt/format.h>

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

std::vector<InactiveUse> kernel_model_unread_uses(const ConfigNode& node,
                                                  const HardwareProfile& hardware) {
  const std::string name = node.get_choice("model", kKernelModelNames);
  std::vector<InactiveUse> out;
  const auto add = [&](std::string_view use, std::string reason) {
    out.push_back(InactiveUse{std::string(use), std::move(reason), true});
  };
  if (name == "roofline") {
    add(kHardwareL2Use,
        "kernel model `roofline` has no cache model (the L2 feeds the calibrated model's "
        "embedding lookups)");
    add(kHardwareFp8Use,
        "kernel model `roofline` prices fp8 at the fp8 peak x compute_fraction (the measured fp8 "
        "fraction feeds the calibrated model's fp8 GEMMs)");
    add(kHardwareKernelOverheadUse,
        "kernel model `roofline` adds its own kernel_overhead (platform.kernels.kernel_overhead, "
        "default 5 us), not the hardware profile's");
    return out;
  }
  add(kCalibrationValidationUse,
      "a run reads a calibration file's fitted parameters; the values under its `measurement` "
      "and `fit` describe the fit for `upsim validate kernels`");
  const bool section_overhead = node.has("kernel_overhead");
  if (section_overhead) {
    add(kHardwareKernelOverheadUse,
        "platform.kernels.kernel_overhead replaces the hardware profile's kernel_overhead");
  }
  if (section_overhead || hardware.kernel_overhead) {
    add(kCalibrationKernelOverheadUse,
        fmt::format("kernel model `calibrated` adds the {} kernel_overhead, not the calibration "
                    "file's fallback",
                    section_overhead ? "scenario's (platform.kernels)" : "hardware profile's"));
  }
  if (node.has("attention")) {
    add(kCalibrationAttentionUse,
        "platform.kernels.attention replaces the calibration file's attention section");
  }
  return out;
}

std::vector<InactiveUse> collective_model_unread_uses(const ConfigNode& node) {
  const std::string name = node.get_choice("model", kCollectiveModelNames);
  std::vector<InactiveUse> out;
  if (name == "alpha_beta" && node.has("host_link")) {
    out.push_back(InactiveUse{std::string(kHardwareHostLinkUse),
                              "platform.interconnect.host_link sets the host link of "
                              "`alpha_beta`, not the hardware profile's pcie_generation",
                              true});
  }
  return out;
}

std::string_view collective_model_basis(std::string_view name) {
  if (name == "seed_curve") {
    return "the seed paper's fitted size -> bandwidth curves (platform.interconnect)";
  }
  return "one link kind's latency and bandwidth (platform.interconnect.link)";
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> platform_model_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"kernels.model", "how GPU kernels are priced: roofline or calibrated"},
      {"kernels.calibration", "the calibrated model's fitted parameters (a file)"},
      {"kernels.gemm_schedule",
       "how GEMM tiles are scheduled over the SMs: auto, per_tile, static_persistent or "
       "dynamic_persistent"},
      {"kernels.gemm_sm_carveout", "SMs a GEMM leaves to concurrent communication kernels"},
      {"host.model", "how host (CPU) time is priced: host_overheads (the seed's T1-T5)"},
      {"host.overheads", "the host overheads T1-T5 (a file)"},
      {"interconnect.model",
       "how collectives are priced: alpha_beta (one link kind), seed_curve or flow (over the "
       "topology's links)"},
      {"interconnect.link", "alpha_beta: the link kind every collective crosses"},
      {"interconnect.bandwidth",
       "alpha_beta: per-GPU, per-direction bandwidth; default: the link kind's"},
      {"interconnect.latency", "alpha_beta: latency of one ring step; default: the link kind's"},
      {"interconnect.efficiency", "alpha_beta: share of the bandwidth collectives reach"},
      {"interconnect.tuning", "flow: the NCCL-like algorithms' and protocols' parameters (a file)"},
      {"interconnect.compute_interference",
       "flow: communication kernels take SMs and HBM bandwidth from concurrent compute"},
      {"kernels.kernel_overhead", "time added to every kernel, replacing the hardware profile's"},
      {"kernels.compute_fraction",
       "roofline: share of the compute peaks kernels reach; default: the profile's"},
      {"kernels.memory_fraction",
       "roofline: share of the HBM bandwidth kernels reach; default: the profile's"},
      {"kernels.embedding_index_bytes", "roofline: bytes of one embedding index"},
      {"interconnect.host_link",
       "alpha_beta: the PCIe kind of host-device copies; default: the profile's"},
  };
  return kMeanings;
}

}  // namespace upsim

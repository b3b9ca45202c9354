// Building calibration models by name from a scenario's model sections. tools/ (the composition
// root) calls these; there is no static self-registration.
//
// Contract: each section is a map with a `model` key naming the model; an unknown name is a
// ConfigError at `model` that lists the valid names. The remaining keys belong to the chosen
// model's loader. Adding a model = adding its name to the list below and one branch here.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/cost_models.h"

namespace upsim {

inline constexpr std::array<std::string_view, 2> kKernelModelNames{"roofline", "calibrated"};
inline constexpr std::array<std::string_view, 1> kCpuModelNames{"host_overheads"};
inline constexpr std::array<std::string_view, 2> kCollectiveModelNames{"alpha_beta", "seed_curve"};

/// `{model: roofline, ...}` (see load_roofline); fractions default to `hardware.achievable`.
/// `{model: calibrated, calibration: calibration/a100_llmcompass.yaml}` (see load_calibrated).
std::unique_ptr<KernelCostModel> make_kernel_cost_model(const ConfigNode& node,
                                                        const HardwareProfile& hardware);

/// `{model: host_overheads, overheads: host/v100_pytorch_kineto.yaml}`: `overheads` is a path
/// relative to the file holding it (loaded with load_reference) or an inline map with the
/// schema of load_host_overheads.
std::unique_ptr<CpuCostModel> make_cpu_cost_model(const ConfigNode& node);

/// `{model: alpha_beta, link: nvlink3, ...}` (see load_alpha_beta).
std::unique_ptr<CollectiveCostModel> make_collective_cost_model(const ConfigNode& node,
                                                                const HardwareProfile& hardware);

/// The uses (ConfigNode::read_for) of the hardware profile (hardware_profile.h) and of the
/// calibration file (kernel_calibration.h) that the kernel model of `node` (a section read by
/// make_kernel_cost_model) does not read, each with the reason, only_if_set: the files state
/// them for other models, as fallbacks or for validation, so they are news only when a what-if
/// changes them.
std::vector<InactiveUse> kernel_model_unread_uses(const ConfigNode& node,
                                                  const HardwareProfile& hardware);

/// The same for the collective model of `node` (read by make_collective_cost_model).
std::vector<InactiveUse> collective_model_unread_uses(const ConfigNode& node);

/// What the collective model `name` (kCollectiveModelNames) prices collectives with, for a
/// message saying that it does not read a fabric: "the seed paper's fitted size -> bandwidth
/// curves (platform.interconnect)".
std::string_view collective_model_basis(std::string_view name);

/// What each key of the platform's kernels, host and interconnect sections means, one line each
/// (sim/config/key_meaning.h), relative to `platform`.
std::span<const KeyMeaning> platform_model_key_meanings();

}  // namespace upsim

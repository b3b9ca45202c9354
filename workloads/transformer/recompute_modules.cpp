#include "workloads/transformer/recompute_modules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <string_view>
#include <vector>

namespace upsim {

namespace {

constexpr std::string_view kKey = "recompute_modules";
/// The modelled modules, by their Megatron-Core name, in the key's order.
struct Module {
  std::string_view name;
  bool RecomputeModules::*flag;
};
constexpr std::array<Module, 7> kModelled = {
    {{"core_attn", &RecomputeModules::core_attn},
     {"layernorm", &RecomputeModules::layernorm},
     {"mla_up_proj", &RecomputeModules::mla_up_proj},
     {"mlp", &RecomputeModules::mlp},
     {"moe_act", &RecomputeModules::moe_act},
     {"moe", &RecomputeModules::moe},
     {"shared_experts", &RecomputeModules::shared_experts}}};
/// Megatron-Core's other recompute modules (transformer_config.py, allowed_modules: those of
/// the gated delta net and mHC layers, which upsim does not model), named so the error says
/// they exist but are not priced (rather than "unknown").
constexpr std::array<std::string_view, 4> kUnmodelled = {"gdn_norm_out", "gdp_in_proj", "gdp_qkv",
                                                         "mhc"};

/// The member of `m` that module `name` sets; nullptr for a name not modelled.
bool* module_flag(RecomputeModules& m, std::string_view name) {
  for (const Module& module : kModelled) {
    if (module.name == name) return &(m.*module.flag);
  }
  return nullptr;
}

std::string modelled_list() {
  std::vector<std::string_view> names;
  for (const Module& module : kModelled)
    names.push_back(module.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

/// Why a module has nothing to recompute in this model; empty when it has.
std::string_view nothing_to_recompute(std::string_view name, const RecomputeModulesScope& s) {
  if (name == "mlp" && !s.has_dense_layers) {
    return "recomputes a dense layer's MLP, and every layer of this model is a MoE layer (use moe "
           "or moe_act)";
  }
  if ((name == "moe" || name == "moe_act") && !s.has_moe_layers) {
    return "recomputes part of a MoE layer, and this model has none (moe.experts)";
  }
  if (name == "shared_experts" && !s.has_shared_experts) {
    return "recomputes the shared experts, and this model has none (moe.shared_experts)";
  }
  if (name == "mla_up_proj" && !s.latent_attention) {
    return "recomputes latent attention's up projections, and this model has none (mla; "
           "Megatron-Core raises the same)";
  }
  if (name == "layernorm" && !s.has_moe_layers && !s.latent_attention) {
    return "recomputes the norms that are modules of their own, and Megatron-Core's Transformer "
           "Engine spec fuses both of this model's norms into the linears after them (only "
           "latent attention's input norm and a MoE layer's pre-MLP norm stand alone)";
  }
  return {};
}

}  // namespace

RecomputeModules read_recompute_modules(const ConfigNode& workload, bool selective,
                                        const RecomputeModulesScope& scope) {
  RecomputeModules modules;
  if (!workload.has(kKey)) return modules;
  const ConfigNode node = workload.child(kKey);
  if (!selective) {
    node.fail(
        "lists the modules Megatron-Core's selective recomputation reruns: needs `recompute: "
        "selective`");
  }
  if (!node.is_sequence() || node.size() == 0) {
    node.fail(fmt::format("expected a non-empty list of module names ({})", modelled_list()));
  }
  modules.core_attn = false;
  for (const ConfigNode& item : node.items()) {
    const std::string name = item.as_string();
    for (std::string_view unmodelled : kUnmodelled) {
      if (name == unmodelled) {
        item.fail(fmt::format(
            "`{}` is a Megatron-Core recompute module upsim does not model; modelled: {}", name,
            modelled_list()));
      }
    }
    bool* flag = module_flag(modules, name);
    if (flag == nullptr) {
      item.fail(fmt::format("unknown recompute module `{}`; valid: {}", name, modelled_list()));
    }
    if (*flag) item.fail(fmt::format("`{}` is listed twice", name));
    const std::string_view nothing = nothing_to_recompute(name, scope);
    if (!nothing.empty()) item.fail(fmt::format("`{}` {}", name, nothing));
    *flag = true;
  }
  if (modules.moe && (modules.moe_act || modules.shared_experts)) {
    node.fail(fmt::format(
        "moe checkpoints the whole MoE layer, which already reruns its {}: list one of them",
        modules.moe_act ? "activation (moe_act)" : "shared experts (shared_experts)"));
  }
  return modules;
}

std::string recompute_modules_text(const RecomputeModules& m) {
  std::vector<std::string_view> names;
  for (const Module& module : kModelled) {
    if (m.*module.flag) names.push_back(module.name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace upsim

#include "workloads/transformer/cuda_graph_scope.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <string_view>
#include <vector>

namespace upsim {

namespace {

constexpr std::string_view kKey = "cuda_graph_scope";

struct Module {
  std::string_view name;
  bool CudaGraphScope::*flag;
};

constexpr std::array<Module, 5> kModules = {{
    {"attn", &CudaGraphScope::attn},
    {"mlp", &CudaGraphScope::mlp},
    {"moe", &CudaGraphScope::moe},
    {"moe_router", &CudaGraphScope::moe_router},
    {"moe_preprocess", &CudaGraphScope::moe_preprocess},
}};

std::string module_list() {
  std::vector<std::string_view> names;
  for (const Module& m : kModules)
    names.push_back(m.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

CudaGraphScope read_cuda_graph_scope(const ConfigNode& workload, bool cuda_graphs,
                                     bool has_dense_layers, bool has_moe_layers) {
  CudaGraphScope scope;
  if (!workload.has(kKey)) return scope;
  const ConfigNode node = workload.child(kKey);
  if (!node.is_sequence() || node.size() == 0) {
    node.fail(fmt::format("expected a non-empty list of module names ({})", module_list()));
  }
  for (const ConfigNode& item : node.items()) {
    const std::string name = item.as_string();
    bool CudaGraphScope::*flag = nullptr;
    for (const Module& m : kModules) {
      if (m.name == name) flag = m.flag;
    }
    if (flag == nullptr) {
      item.fail(fmt::format("unknown CUDA graph scope `{}`; valid: {}", name, module_list()));
    }
    if (scope.*flag) item.fail(fmt::format("`{}` is listed twice", name));
    if (name == "mlp" && !has_dense_layers) {
      item.fail("`mlp` captures dense layers' MLP, and this model has none (moe_router or moe)");
    }
    if (name.starts_with("moe") && !has_moe_layers) {
      item.fail(fmt::format("`{}` captures part of MoE layers, and this model has none", name));
    }
    scope.*flag = true;
  }
  if (scope.moe && scope.moe_router) {
    node.fail("moe captures the whole MoE layer, moe_router part of it: list one of them");
  }
  if (scope.moe_preprocess && !scope.moe_router) {
    node.fail(
        "moe_preprocess extends moe_router's graph (Megatron-Core requires both): add moe_router");
  }
  if (!cuda_graphs) {
    CudaGraphScope ignored;
    ignored.ignored = true;
    return ignored;
  }
  return scope;
}

std::string cuda_graph_scope_text(const CudaGraphScope& scope) {
  if (scope.whole_layer()) return "whole layer";
  std::vector<std::string_view> names;
  for (const Module& m : kModules) {
    if (scope.*m.flag) names.push_back(m.name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace upsim

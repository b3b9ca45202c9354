#include "workloads/trace/rank_kernel_descs.h"

#include <string>
#include <string_view>
#include <utility>

#include "sim/formats/json_reader.h"
#include "workloads/trace/trace_kernel_desc.h"

namespace upsim::trace_build {

KinetoOpInputs RankKernelDescs::op_inputs(uint32_t op) const {
  KinetoOpInputs in = kineto_op_inputs(kineto_, events_[op]);
  if (!in.dims.empty() || !trace_.et) return in;
  const auto it = trace_.link.node_of_event.find(op);
  if (it == trace_.link.node_of_event.end()) return in;
  const EtNode& n = trace_.et->nodes[it->second];
  for (size_t i = 0; i < n.input_shapes.items.size(); ++i) {
    std::vector<int64_t> shape;
    for (const JsonValue& d : n.input_shapes.items[i].items) {
      if (d.is_number()) shape.push_back(d.integer);
    }
    in.dims.push_back(std::move(shape));
    std::string type = i < n.input_types.size() ? n.input_types[i] : "";
    // ET types read "Tensor(float)", "Tensor(c10::Half)".
    if (type.starts_with("Tensor(") && type.ends_with(")")) type = type.substr(7, type.size() - 8);
    in.types.push_back(std::move(type));
  }
  return in;
}

std::optional<KernelDesc> RankKernelDescs::kernel_desc(uint32_t gi, KeptReason& reason) {
  reason = KeptReason::kShapes;
  const uint32_t call = timeline_.launcher[gi];
  if (call == kNone) return std::nullopt;
  uint32_t op = kNone;
  for (uint32_t p = timeline_.parent[call]; p != kNone; p = timeline_.parent[p]) {
    if (events_[p].category == KinetoCategory::kCpuOp) {
      op = p;
      break;
    }
  }
  const std::string_view op_name = op == kNone ? std::string_view() : kineto_.name_of(events_[op]);
  if (is_inductor_kernel(kineto_.name_of(events_[gi])) ||
      (op != kNone && is_compiled_region_op(op_name))) {
    reason = KeptReason::kCompiled;
    return std::nullopt;
  }
  if (op == kNone) return std::nullopt;
  if (!is_registered_operator(op_name)) {
    // Inside a compiled region, an op that is no operator is the region's own code.
    reason = KeptReason::kNonAten;
    for (uint32_t p = timeline_.parent[op]; p != kNone; p = timeline_.parent[p]) {
      if (is_compiled_region_op(kineto_.name_of(events_[p]))) reason = KeptReason::kCompiled;
    }
    return std::nullopt;
  }
  const bool gemm_taken = gemm_done_.count(op) > 0;
  std::optional<KernelDesc> kd = op_kernel_desc(
      kineto_.name_of(events_[op]), kineto_.name_of(events_[gi]), op_inputs(op), gemm_taken);
  if (kd && kd->cls == KernelClass::kGemm) gemm_done_.insert(op);
  return kd;
}

}  // namespace upsim::trace_build

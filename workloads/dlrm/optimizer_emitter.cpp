#include "workloads/dlrm/optimizer_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "sim/units.h"
#include "workloads/dlrm/lookup_group.h"

namespace upsim::dlrm_emit {

std::string_view torch_optimizer_class(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdagrad:
      return "Adagrad";
    case OptimizerKind::kAdam:
      return "Adam";
    case OptimizerKind::kAdamW:
      return "AdamW";
    case OptimizerKind::kLamb:
      return "FusedLAMB";
    default:
      return "SGD";
  }
}

OptimizerEmitter::OptimizerEmitter(RankOps& ops, const RankPlan& plan,
                                   const std::vector<int64_t>& top_widths)
    : ops_(ops),
      config_(ops.config()),
      plan_(plan),
      top_widths_(top_widths),
      dtype_(ops.config().dtype) {}

void OptimizerEmitter::zero_grad() {
  ops_.body(fmt::format("Optimizer.zero_grad#{0}.zero_grad",
                        torch_optimizer_class(config_.dense_optimizer)));
}

void OptimizerEmitter::step() {
  OptimizerShape sgd{config_.dense_optimizer, OptimizerImpl::kForeach};
  int64_t elements = 0;
  const bool tables_apart =
      RankOps::storage_dtype(config_.embedding_dtype) != RankOps::storage_dtype(dtype_) &&
      plan_.data_parallel_elements > 0;
  if (plan_.data_parallel_elements > 0 && !tables_apart) {
    sgd.tensor_elements.push_back(plan_.data_parallel_elements);
    elements += plan_.data_parallel_elements;
  }
  // The cross network (DCNv2) is registered between the bottom and the top MLP.
  const std::vector<int64_t> cross = cross_param_elements(config_);
  for (const std::vector<int64_t>* widths : {&config_.bottom_mlp, &top_widths_}) {
    if (widths == &top_widths_) {
      for (const int64_t e : cross) {
        sgd.tensor_elements.push_back(e);
        elements += e;
      }
    }
    for (size_t l = 0; l + 1 < widths->size(); ++l) {
      const int64_t in = (*widths)[l];
      const int64_t out = (*widths)[l + 1];
      sgd.tensor_elements.push_back(out * in);
      sgd.tensor_elements.push_back(out);
      elements += out * in + out;
    }
  }
  if (config_.grad_scaler) {
    // scaler.step(optimizer): unscale_ the dense gradients and check them for inf / NaN,
    // then read found_inf on the host (torch/amp/grad_scaler.py _maybe_opt_step: `if not
    // sum(v.item() ...)`), which waits for the whole backward, before optimizer.step().
    unscale_gradients(elements + (tables_apart ? plan_.data_parallel_elements : 0), DType::kFp32);
    HostOp item = ops_.host_op("aten::_local_scalar_dense");
    item.copy("Memcpy DtoH (found_inf)", TransferKind::kDeviceToHost, kFp32Bytes);
    item.end();
    ops_.host_sync(kComputeStream, "aten::_local_scalar_dense");
  }
  dense_step(sgd, elements, tables_apart);
  sparse_step();
  if (config_.grad_scaler) {
    // scaler.update(): the scale for the next step from found_inf.
    ops_.single_kernel("aten::_amp_update_scale_", "amp_update_scale_cuda_kernel",
                       "aten::_amp_update_scale_",
                       pointwise(MemoryOp::kBinary, DType::kFp32, 1, 2, 3, 2));
  }
}

void OptimizerEmitter::unscale_gradients(int64_t elements, DType dtype) {
  if (elements == 0) return;
  ops_.single_kernel("aten::_amp_foreach_non_finite_check_and_unscale_",
                     "multi_tensor_apply_kernel/amp_non_finite_check_and_unscale",
                     "aten::_amp_foreach_non_finite_check_and_unscale_",
                     pointwise(MemoryOp::kBinary, dtype, as_double(elements), 2, 1, 1));
}

void OptimizerEmitter::sparse_step() {
  if (config_.embedding_update != EmbeddingUpdate::kScatterAdd) return;
  const std::array<const LookupGroup*, 3> groups{&plan_.pieces, &plan_.row_wise,
                                                 &plan_.table_row_wise};
  if (config_.grad_scaler) {
    // The values are in the table dtype; GradScaler unscales them as they are.
    int64_t values = 0;
    for (const LookupGroup* group : groups)
      values += sparse_values(*group);
    unscale_gradients(values, config_.embedding_dtype);
  }
  if (std::all_of(groups.begin(), groups.end(), [](const LookupGroup* g) { return g->empty(); })) {
    return;
  }
  HostOp h = ops_.host_op("Optimizer.step#SGD.step");
  for (const LookupGroup* group : groups) {
    if (group->empty()) continue;
    KernelDesc update = embedding_kernel(config_, KernelClass::kEmbeddingBackward, *group,
                                         EmbeddingOptimizer::kSgd);
    update.embedding.update = EmbeddingUpdate::kScatterAdd;
    h.kernel("indexFuncLargeIndex/index_add", "aten::index_add_", update);
  }
  h.end();
}

void OptimizerEmitter::dense_step(OptimizerShape& sgd, int64_t elements, bool tables_apart) {
  const std::string kernel =
      fmt::format("multi_tensor_apply_kernel/{}", optimizer_kind_name(config_.dense_optimizer));
  const std::string_view aten = config_.dense_optimizer == OptimizerKind::kSgd
                                    ? "aten::_foreach_add_"
                                    : "aten::_foreach_addcdiv_";
  HostOp h = ops_.host_op(
      fmt::format("Optimizer.step#{}.step", torch_optimizer_class(config_.dense_optimizer)));
  if (tables_apart) {
    KernelDesc tables = pointwise(MemoryOp::kOptimizer, config_.embedding_dtype,
                                  as_double(plan_.data_parallel_elements), 2, 2, 1);
    tables.optimizer = OptimizerShape{config_.dense_optimizer, OptimizerImpl::kForeach};
    tables.optimizer.tensor_elements.push_back(plan_.data_parallel_elements);
    h.kernel(kernel, aten, tables);
  }
  KernelDesc update =
      pointwise(MemoryOp::kOptimizer, config_.param_dtype(), as_double(elements), 2, 2, 1);
  update.optimizer = std::move(sgd);
  h.kernel(kernel, aten, update);
  h.end();
}

}  // namespace upsim::dlrm_emit

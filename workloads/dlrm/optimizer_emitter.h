// The optimizer of one DLRM rank's training step (OptimizerEmitter): zero_grad at the start of
// the backward, then the step: GradScaler's unscale and found_inf check, the dense parameters'
// foreach update (MLPs, cross network, data-parallel tables), the sparse gradients' SGD
// (embeddings.update sparse) and GradScaler's scale update. Fused embedding optimizers update
// in the embedding backward (embedding_emitter.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

/// torch.optim's class name of a dense optimizer (the profiler's Optimizer.step#<Class>.step).
std::string_view torch_optimizer_class(OptimizerKind kind);

class OptimizerEmitter {
 public:
  /// `top_widths`: the top MLP's input width, then its layer widths.
  OptimizerEmitter(RankOps& ops, const RankPlan& plan, const std::vector<int64_t>& top_widths);

  /// Optimizer.zero_grad (set_to_none: no kernel).
  void zero_grad();

  /// SGD.step with foreach (PyTorch's default on CUDA): torch._foreach_add_(params, grads,
  /// alpha=-lr) over the dense parameters, bottom MLP then top MLP, each layer's weight
  /// (out x in) then bias (out); it reads each parameter and gradient and writes the parameter
  /// (2 flops per element: scale and add). The descriptor names the update and its tensors, so
  /// the optimizer model counts multi_tensor_apply's launches.
  ///
  /// The data-parallel tables' weights (one tensor: the dense table-batched op's) are dense
  /// parameters too, registered first (TorchRec's DLRM holds the sparse arch before the dense
  /// one). torch.optim's foreach path groups tensors by device and dtype
  /// (_group_tensors_by_device_and_dtype), so when the tables' dtype differs from the MLPs' the
  /// tables get their own multi_tensor_apply launch.
  void step();

 private:
  /// torch._amp_foreach_non_finite_check_and_unscale_ over `elements` gradient values of
  /// `dtype`: each read, multiplied by 1 / scale, checked and written back.
  void unscale_gradients(int64_t elements, DType dtype);

  /// embeddings.update sparse: torch.optim.SGD adds each lookup's gradient row into its table
  /// row (dense.add_(sparse, alpha=-lr): one index_add_ per sparse parameter; the lookup groups
  /// are the parameters), after GradScaler's unscale_ of the values.
  void sparse_step();

  /// The dense parameters' optimizer step (the foreach update `sgd` over `elements`; the
  /// data-parallel tables in their own launch when `tables_apart`).
  void dense_step(OptimizerShape& sgd, int64_t elements, bool tables_apart);

  RankOps& ops_;
  const DlrmConfig& config_;
  const RankPlan& plan_;
  const std::vector<int64_t>& top_widths_;
  DType dtype_;
};

}  // namespace upsim::dlrm_emit

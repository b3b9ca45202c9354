// One DLRM rank's training (or inference) step as PyTorch runs it: the per-rank op sequence of
// dlrm_generator.h, emitted into the task graph. The rank's lookups are planned from the table
// placement when it is made (rank_plan.h); the step's ops are emitted by concern:
// rank_emitter.cpp (the input batch), embedding_emitter.h (the embedding lookups and their
// exchange), dense_network_emitter.h (the MLPs and the loss), interaction_emitter.h (dot or
// DCNv2), rank_emitter_forward.cpp and rank_emitter_backward.cpp (the order of the phases'
// ops) and rank_emitter_optimizer.cpp (sparse and dense optimizer steps); the op helpers they
// share are RankOps (rank_ops.h), the DDP buckets ddp_module.h's, the collectives they launch
// collective_groups.h's.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"
#include "sim/units.h"
#include "workloads/dlrm/collective_groups.h"
#include "workloads/dlrm/ddp_module.h"
#include "workloads/dlrm/dense_network_emitter.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/embedding_emitter.h"
#include "workloads/dlrm/interaction_emitter.h"
#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

/// torch.optim's class name of a dense optimizer (the profiler's Optimizer.step#<Class>.step).
std::string_view torch_optimizer_class(OptimizerKind kind);

/// Emits one rank's iterations.
class RankEmitter {
 public:
  RankEmitter(const DlrmConfig& config, const DlrmGraph& built,
              const std::vector<int64_t>& top_widths, const EmbeddingExchange& exchange,
              uint32_t index, TaskGraph& graph);
  /// The phase emitters refer to the rank's ops and plan, members of this object.
  RankEmitter(const RankEmitter&) = delete;
  RankEmitter& operator=(const RankEmitter&) = delete;

  void iteration(uint32_t it, const IterationGroups& groups);

 private:
  /// A copy of one input tensor: blocking (the host waits for it on the compute stream), or the
  /// prefetcher's on the data stream, whose pageable source holds the host until it is staged
  /// (CUDA's cudaMemcpyAsync from pageable memory returns once the data is staged; the staging
  /// is priced as the copy).
  void input_copy(std::string_view copy_name, int64_t bytes);

  // ---- phases ------------------------------------------------------------------------------
  /// The batch's host-to-device copies; training fetches it from the DataLoader first (a served
  /// batch arrives without one).
  void load_batch();

  void forward(const IterationGroups& groups);

  void backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom);

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
  void optimizer_step();

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

  const DlrmConfig& config_;
  const DlrmGraph& built_;
  const std::vector<int64_t>& top_widths_;
  RankOps ops_;
  EmbeddingExchange exchange_;
  RankPlan plan_;
  EmbeddingEmitter embeddings_;
  DenseNetworkEmitter dense_;
  InteractionEmitter interaction_;
  int64_t table_count_;
  int64_t embedding_dim_;
  DType dtype_;
};

}  // namespace upsim::dlrm_emit

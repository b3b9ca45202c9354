// One DLRM rank's training (or inference) step as PyTorch runs it: the per-rank op sequence of
// dlrm_generator.h, emitted into the task graph. The rank's lookups are planned from the table
// placement when it is made (rank_plan.h); the step's ops are emitted by concern:
// rank_emitter.cpp (the input batch), embedding_emitter.h (the embedding lookups and their
// exchange), rank_emitter_forward.cpp (MLPs, interactions, the cross network),
// rank_emitter_backward.cpp (their backward, DDP buckets) and
// rank_emitter_optimizer.cpp (sparse and dense optimizer steps); the op helpers they share are
// RankOps (rank_ops.h), the collectives they launch collective_groups.h's.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"
#include "sim/units.h"
#include "workloads/dlrm/collective_groups.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/embedding_emitter.h"
#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

/// torch.optim's class name of a dense optimizer (the profiler's Optimizer.step#<Class>.step).
std::string_view torch_optimizer_class(OptimizerKind kind);

/// A data-parallel MLP under its own DDP wrapper, during one iteration's backward.
struct DdpModule {
  /// Input width, then the layer widths.
  const std::vector<int64_t>& widths;
  const std::vector<DdpBucket>& buckets;
  const std::vector<CollectiveId>& groups;
  /// Comm-stream events marking the end of this module's all-reduces so far.
  std::vector<TaskId> done_events;
  size_t next_bucket = 0;
};
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

  void linear_forward(int64_t batch, int64_t in, int64_t out);

  /// Lin et al., TPDS 2024: relu F = 1, A = 2; sigmoid F = 4, A = 2.
  void relu_forward(int64_t batch, int64_t width);

  void forward(const IterationGroups& groups);

  // Dot interaction (dlrm_s_pytorch.py interact_features): stack dense output and T pooled
  // embeddings, batched Gram matrix, gather its strictly lower triangle, concat with dense.
  void dot_interaction_forward();

  void dot_interaction_backward();

  /// DCNv2's low-rank cross network (TorchRec LowRankCrossNet, as in MLPerf DLRMv2): x0 = the
  /// bottom MLP output and the T pooled embeddings concatenated (b x N, N = (T + 1) D); per
  /// layer x_{l+1} = x0 * (W_l (V_l x_l) + bias_l) + x_l with V_l: N -> r and W_l: r -> N, as
  /// two GEMMs and three elementwise kernels (add bias, mul, add) in eager PyTorch.
  void cross_network_forward();

  /// The cross network's backward, last layer first; `ready_params` of the top DDP module
  /// (the top MLP's) have their gradients before it. Per layer: AddBackward0 passes the
  /// gradient to x_l and to the product; MulBackward0 = two muls (the gradient of the bracket,
  /// and of x0, which an add accumulates); the bias gradient is a batch sum; each GEMM's
  /// backward computes the input and the weight gradient; an add joins x_l's two gradients.
  void cross_network_backward(DdpModule& top, size_t ready_params);

  /// AddmmBackward0 of a layer in -> out (Lin et al., TPDS 2024): grad input = grad_out W
  /// (m = b, n = in, k = out) when the input needs a gradient, grad weight = grad_out^T x
  /// (m = out, n = in, k = b), bias gradient = column sum of grad_out (seed 2.6: F = 1, A = 1).
  /// The first `layers` layers of an MLP of `widths` (input, then layer widths), each followed
  /// by a ReLU, for `batch` samples: aten's addmm and relu per layer, or apex.mlp.MLP
  /// (mlp_kernels apex_fused: DeepLearningExamples' CppMlp, dlrm/nn/mlps.py; apex
  /// csrc/mlp_cuda.cu): one host op for the whole MLP, per layer a GEMM without bias and one
  /// kernel that adds the bias and applies the ReLU.
  void mlp_forward(int64_t batch, const std::vector<int64_t>& widths, size_t layers);

  /// The backward of mlp_forward's `layers` layers of `module`, last first; `input_grad`: the
  /// first layer computes its input's gradient too. `ready_before` parameters of the module had
  /// their gradients before (DDP buckets fill in that order). apex's backward (mlp_bp): per
  /// layer one kernel for the ReLU's gradient and the bias gradient (biasAddRelu_bprop), the
  /// input-gradient GEMM and the weight-gradient GEMM, all in one host op; the gradients are
  /// then accumulated.
  void mlp_backward(int64_t batch, DdpModule& module, size_t layers, bool input_grad,
                    size_t ready_before);

  void linear_backward(int64_t batch, const DdpModule& module, size_t layer, bool input_grad);

  /// All-reduces every bucket of `module` whose gradients are all ready once `ready_params`
  /// parameters (in ready order) have their gradients.
  void reduce_ready_buckets(DdpModule& module, size_t ready_params);

  void relu_backward(int64_t batch, int64_t width);

  void add_gradients(int64_t elements);

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
  int64_t table_count_;
  int64_t embedding_dim_;
  DType dtype_;
};

}  // namespace upsim::dlrm_emit

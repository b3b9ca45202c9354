// The feature interaction of one DLRM rank between the bottom and the top MLP
// (InteractionEmitter), forward and backward: the dot interaction (aten ops, or
// DeepLearningExamples' fused cuda_dot kernels) or DCNv2's low-rank cross network, whose
// parameters' gradients join the top MLP's DDP module.
#pragma once

#include <cstddef>
#include <cstdint>

#include "workloads/dlrm/ddp_module.h"
#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

class InteractionEmitter {
 public:
  InteractionEmitter(RankOps& ops, const RankPlan& plan);

  /// The configured interaction's forward (dot or dcnv2).
  void forward();

  /// Its backward; `ready_params` parameters of the top DDP module `top` (the top MLP's) have
  /// their gradients before it.
  void backward(DdpModule& top, size_t ready_params);

 private:
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

  /// interaction_kernel: fused (xla: the same, fused_cross_names), one cross layer's forward as
  /// HugeCTR's MultiCrossLayer runs it
  /// (HugeCTR/src/layers/multi_cross_layer.cu, MultiCrossForwardFunctorv2): XU = x_l U and
  /// h = XU V + bias (cuBLASLt, the bias in the epilogue), then one
  /// fused_matrix_elementwise_dot_add kernel x_{l+1} = x0 * h + x_l; one host op (HugeCTR's C++
  /// layer).
  void fused_cross_layer_forward();

  /// interaction_kernel: fused (xla: the same, fused_cross_names), the cross network's backward
  /// as HugeCTR runs it
  /// (MultiCrossBackwardFunctorv2), one host op: the dx accumulator zeroed, then per layer, last
  /// first, one fused_mul_fma3 kernel and four GEMMs (dV with the bias gradient, S1 = S0 V^T,
  /// dU, dY = S1 U^T + dY with dY read as C), then one add for x0's gradient. The parameters'
  /// gradients are ready together at its end.
  void fused_cross_network_backward(DdpModule& top, size_t ready_params);

  /// The host ops and fused kernels of the fused cross network: HugeCTR's MultiCrossLayer
  /// (interaction_kernel: fused), or TensorFlow's Cross layer compiled by XLA (xla: the same
  /// kernels as XLA's fusions name them. Forward: the GEMMs, the bias folded into the second
  /// (XLA's GemmRewriter) or into the loop fusion, then one loop fusion x0 * h + x_l. Backward
  /// per layer: one multi-output fusion of dY * x0 (the bias gradient's reduce fused with it)
  /// and the accumulated dY * h, four GEMMs, the residual gradient folded into the input
  /// gradient's GEMM as its C operand; x0's gradient starts from the first fusion's output, so
  /// no accumulator is zeroed).
  struct FusedCrossNames {
    const char* forward_op;
    const char* backward_op;
    const char* forward_kernel;
    const char* backward_kernel;
    const char* final_add_kernel;
    bool zeroes_accumulator;
  };
  FusedCrossNames fused_cross_names() const;

  /// An aten::add of two gradients of `elements` values.
  void add_gradients(int64_t elements);

  RankOps& ops_;
  const DlrmConfig& config_;
  const RankPlan& plan_;
  int64_t table_count_;
  int64_t embedding_dim_;
  DType dtype_;
};

}  // namespace upsim::dlrm_emit

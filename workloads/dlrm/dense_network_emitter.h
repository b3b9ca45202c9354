// The dense network of one DLRM rank (DenseNetworkEmitter): the bottom and the top MLP forward
// and backward (aten's addmm and relu per layer, or apex's fused MLP), their DDP buckets filled
// as the gradients become ready, and the loss (BCE on the top MLP's sigmoid) with its backward.
// The interaction between the two MLPs is interaction_emitter.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "workloads/dlrm/ddp_module.h"
#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

class DenseNetworkEmitter {
 public:
  /// `top_widths`: the top MLP's input width (the interaction output), then its layer widths.
  DenseNetworkEmitter(RankOps& ops, const RankPlan& plan, const std::vector<int64_t>& top_widths);

  /// The bottom MLP, all layers with their ReLUs, for this rank's bottom batch.
  void bottom_forward();

  /// The top MLP: its ReLU layers, then the last layer and the sigmoid.
  void top_forward();

  /// loss_fn_wrap: the targets' copy (blocking input), BCE, and the loss's copy to the host
  /// (loss_to_host).
  void loss_forward();

  /// The loss's backward: GradScaler's scale of the loss, the seed gradient (ones_like) and
  /// BCE's backward.
  void loss_backward();

  /// The top MLP's backward, the sigmoid's first; the top MLP's input (the interaction output)
  /// needs its gradient, so every layer computes grad input. Fills `top`'s buckets.
  void top_backward(DdpModule& top);

  /// The bottom MLP's backward; the dense input needs no gradient, so the first layer computes
  /// no grad input. Fills `bottom`'s buckets.
  void bottom_backward(DdpModule& bottom);

 private:
  void linear_forward(int64_t batch, int64_t in, int64_t out);

  /// Lin et al., TPDS 2024: relu F = 1, A = 2; sigmoid F = 4, A = 2.
  void relu_forward(int64_t batch, int64_t width);

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

  /// mlp_kernels cublaslt_fused, HugeCTR's FusedReluBiasFullyConnectedLayer chain
  /// (HugeCTR/src/layers/fused_relu_bias_fully_connected_layer.cu), one host op (HugeCTR's C++
  /// layers): per layer one cuBLASLt GEMM with the bias and ReLU in its epilogue
  /// (CUBLASLT_EPILOGUE_RELU_AUX_BIAS; the aux mask's bytes are not priced), then the last
  /// layer's output copied as its ReLU mask.
  void fused_layers_forward(int64_t batch, const std::vector<int64_t>& widths, size_t layers);

  /// Its backward, one host op: the last layer's dReLU and bias gradient
  /// (reverse_add_bias_and_re_kernel), then per layer, last first, the weight-gradient GEMM
  /// (accumulating, beta 1) and, where an input gradient is needed, the input-gradient GEMM
  /// whose epilogue (CUBLASLT_EPILOGUE_DRELU_BGRAD) is the layer below's dReLU and bias
  /// gradient.
  void fused_layers_backward(int64_t batch, const DdpModule& module, size_t layers,
                             bool input_grad);

  /// AddmmBackward0 of a layer in -> out (Lin et al., TPDS 2024): grad input = grad_out W
  /// (m = b, n = in, k = out) when the input needs a gradient, grad weight = grad_out^T x
  /// (m = out, n = in, k = b), bias gradient = column sum of grad_out (seed 2.6: F = 1, A = 1).
  void linear_backward(int64_t batch, const DdpModule& module, size_t layer, bool input_grad);

  void relu_backward(int64_t batch, int64_t width);

  RankOps& ops_;
  const DlrmConfig& config_;
  const RankPlan& plan_;
  const std::vector<int64_t>& top_widths_;
  DType dtype_;
};

}  // namespace upsim::dlrm_emit

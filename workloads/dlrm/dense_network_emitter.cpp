#include "workloads/dlrm/dense_network_emitter.h"

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"

namespace upsim::dlrm_emit {

DenseNetworkEmitter::DenseNetworkEmitter(RankOps& ops, const RankPlan& plan,
                                         const std::vector<int64_t>& top_widths)
    : ops_(ops),
      config_(ops.config()),
      plan_(plan),
      top_widths_(top_widths),
      dtype_(ops.config().dtype) {}

void DenseNetworkEmitter::bottom_forward() {
  const auto& bot = config_.bottom_mlp;
  // A served batch's dense features arrive in fp32; a model run in a 16-bit dtype (model.half(),
  // no autocast) takes them cast: DeepLearningExamples' inference_benchmark,
  // `numerical_features.half()` under --amp.
  if (config_.mode == DlrmMode::kInference && !config_.master_weights) {
    ops_.convert(DType::kFp32, dtype_, plan_.bottom_batch * bot.front());
  }
  mlp_forward(plan_.bottom_batch, bot, bot.size() - 1);
}

void DenseNetworkEmitter::top_forward() {
  // The top MLP: its ReLU layers, then the last layer and the sigmoid.
  const size_t top_layers = top_widths_.size() - 1;
  mlp_forward(plan_.local_batch, top_widths_, top_layers - 1);
  linear_forward(plan_.local_batch, top_widths_[top_layers - 1], top_widths_[top_layers]);
  ops_.single_kernel("aten::sigmoid", "vectorized_elementwise_kernel/sigmoid", "aten::sigmoid",
                     pointwise(MemoryOp::kSigmoid, dtype_,
                               as_double(plan_.local_batch * top_widths_.back()), 4, 1, 1));
}

void DenseNetworkEmitter::loss_forward() {
  // loss_fn_wrap copies the targets to the device, then BCE (seed 2.6: F = 7, A = 3).
  if (config_.input == InputPipeline::kBlocking) {
    ops_.blocking_copy("Memcpy HtoD (targets)", TransferKind::kHostToDevice,
                       plan_.local_batch * kFp32Bytes);
  }
  ops_.single_kernel("aten::binary_cross_entropy", "binary_cross_entropy_kernel",
                     "aten::binary_cross_entropy",
                     pointwise(MemoryOp::kBinary, dtype_, as_double(plan_.local_batch), 7, 2, 1));
  // L = E.detach().cpu().numpy(): a 4-byte device-to-host copy the host waits for.
  if (config_.loss_to_host) {
    ops_.blocking_copy("Memcpy DtoH (loss)", TransferKind::kDeviceToHost, kFp32Bytes);
  }
}

void DenseNetworkEmitter::loss_backward() {
  if (config_.grad_scaler) {
    // scaler.scale(loss): the loss times the scale.
    ops_.single_kernel("aten::mul", "vectorized_elementwise_kernel/mul", "aten::mul",
                       pointwise(MemoryOp::kBinary, DType::kFp32, 1, 1, 2, 1));
  }
  ops_.single_kernel("aten::ones_like", "vectorized_elementwise_kernel/fill_", "aten::ones_like",
                     pointwise(MemoryOp::kCopy, DType::kFp32, 1, 0, 0, 1));
  ops_.single_kernel("BinaryCrossEntropyBackward0",
                     "vectorized_elementwise_kernel/binary_cross_entropy_backward",
                     "aten::binary_cross_entropy_backward",
                     pointwise(MemoryOp::kBinary, dtype_, as_double(plan_.local_batch), 4, 2, 1));
}

void DenseNetworkEmitter::top_backward(DdpModule& top) {
  const size_t top_layers = top_widths_.size() - 1;
  ops_.single_kernel("SigmoidBackward0", "vectorized_elementwise_kernel/sigmoid_backward",
                     "aten::sigmoid_backward",
                     pointwise(MemoryOp::kSigmoid, dtype_,
                               as_double(plan_.local_batch * top_widths_.back()), 2, 1, 1));
  // The last layer, then the ReLU layers.
  linear_backward(plan_.local_batch, top, top_layers - 1, true);
  top.reduce_ready_buckets(ops_, 2);
  mlp_backward(plan_.local_batch, top, top_layers - 1, true, 2);
}

void DenseNetworkEmitter::bottom_backward(DdpModule& bottom) {
  mlp_backward(plan_.bottom_batch, bottom, config_.bottom_mlp.size() - 1, false, 0);
}

void DenseNetworkEmitter::linear_forward(int64_t batch, int64_t in, int64_t out) {
  if (config_.master_weights) {
    HostOp h = ops_.host_op("aten::linear");
    ops_.cast_parameter(h, out * in);
    ops_.cast_parameter(h, out);
    h.kernel(pytorch::gemm_kernel_name(dtype_, "addmm"), "aten::addmm",
             gemm_kernel(dtype_, 1, batch, out, in));
    h.end();
    return;
  }
  ops_.single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "addmm"), "aten::addmm",
                     gemm_kernel(dtype_, 1, batch, out, in));
}

void DenseNetworkEmitter::relu_forward(int64_t batch, int64_t width) {
  ops_.single_kernel("aten::relu", "vectorized_elementwise_kernel/relu", "aten::relu",
                     pointwise(MemoryOp::kRelu, dtype_, as_double(batch * width), 1, 1, 1));
}

void DenseNetworkEmitter::mlp_forward(int64_t batch, const std::vector<int64_t>& widths,
                                      size_t layers) {
  if (config_.mlp_kernels == MlpKernels::kAten) {
    for (size_t l = 0; l < layers; ++l) {
      linear_forward(batch, widths[l], widths[l + 1]);
      relu_forward(batch, widths[l + 1]);
    }
    return;
  }
  if (layers == 0) return;
  if (config_.mlp_kernels == MlpKernels::kCublasLtFused) {
    fused_layers_forward(batch, widths, layers);
    return;
  }
  HostOp h = ops_.host_op("MlpFunction");
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = widths[l];
    const int64_t out = widths[l + 1];
    ops_.cast_parameter(h, out * in);
    ops_.cast_parameter(h, out);
    h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "apex::mlp_forward",
             gemm_kernel(dtype_, 1, batch, out, in));
    h.kernel("biasAddRelu_fprop", "apex::mlp_forward",
             pointwise(MemoryOp::kRelu, dtype_, as_double(batch * out), 2, 1, 1));
  }
  h.end();
}

void DenseNetworkEmitter::mlp_backward(int64_t batch, DdpModule& module, size_t layers,
                                       bool input_grad, size_t ready_before) {
  if (config_.mlp_kernels == MlpKernels::kAten) {
    for (size_t l = layers; l-- > 0;) {
      relu_backward(batch, module.widths[l + 1]);
      linear_backward(batch, module, l, l > 0 || input_grad);
      module.reduce_ready_buckets(ops_, ready_before + 2 * (layers - l));
    }
    return;
  }
  if (layers == 0) return;
  if (config_.mlp_kernels == MlpKernels::kCublasLtFused) {
    fused_layers_backward(batch, module, layers, input_grad);
  } else {
    HostOp h = ops_.host_op("MlpFunctionBackward");
    for (size_t l = layers; l-- > 0;) {
      const int64_t in = module.widths[l];
      const int64_t out = module.widths[l + 1];
      h.kernel("biasAddRelu_bprop", "apex::mlp_backward",
               pointwise(MemoryOp::kRelu, dtype_, as_double(batch * out), 2, 2, 1));
      if (l > 0 || input_grad) {
        h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "apex::mlp_backward",
                 gemm_kernel(dtype_, 1, batch, in, out));
      }
      h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "apex::mlp_backward",
               gemm_kernel(dtype_, 1, out, in, batch));
    }
    h.end();
  }
  for (size_t l = layers; l-- > 0;) {
    ops_.accumulate_grad(module.widths[l + 1] * module.widths[l]);
    ops_.accumulate_grad(module.widths[l + 1]);
  }
  module.reduce_ready_buckets(ops_, ready_before + 2 * layers);
}

void DenseNetworkEmitter::fused_layers_forward(int64_t batch, const std::vector<int64_t>& widths,
                                               size_t layers) {
  HostOp h = ops_.host_op("FusedReluBiasFullyConnectedLayer::fprop");
  for (size_t l = 0; l < layers; ++l) {
    ops_.cast_parameter(h, widths[l + 1] * widths[l]);
    ops_.cast_parameter(h, widths[l + 1]);
    h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "cublasLtMatmul",
             gemm_kernel(dtype_, 1, batch, widths[l + 1], widths[l]));
  }
  // The chain's last layer keeps its output as the ReLU mask (a device-to-device copy).
  h.copy("Memcpy DtoD (relu mask)", TransferKind::kDeviceToDevice,
         batch * widths[layers] * dtype_bytes(dtype_));
  h.end();
}

void DenseNetworkEmitter::fused_layers_backward(int64_t batch, const DdpModule& module,
                                                size_t layers, bool input_grad) {
  HostOp h = ops_.host_op("FusedReluBiasFullyConnectedLayer::bprop");
  // The last layer's dReLU and bias gradient (reverse_add_bias_and_re_kernel: reads the
  // gradient and the mask, writes dReLU).
  h.kernel("reverse_add_bias_and_re_kernel", "FusedReluBiasFullyConnectedLayer::bprop",
           pointwise(MemoryOp::kRelu, dtype_, as_double(batch * module.widths[layers]), 2, 2, 1));
  for (size_t l = layers; l-- > 0;) {
    const int64_t in = module.widths[l];
    const int64_t out = module.widths[l + 1];
    // The weight gradient accumulates into its buffer (beta 1: C read).
    KernelDesc wgrad = gemm_kernel(dtype_, 1, out, in, batch);
    wgrad.bytes_read += as_double(out * in * dtype_bytes(dtype_));
    h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "cublasGemmEx", wgrad);
    // The input gradient; its epilogue computes the layer below's dReLU and bias gradient.
    if (l > 0 || input_grad) {
      h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "cublasLtMatmul",
               gemm_kernel(dtype_, 1, batch, in, out));
    }
  }
  h.end();
}

void DenseNetworkEmitter::linear_backward(int64_t batch, const DdpModule& module, size_t layer,
                                          bool input_grad) {
  const int64_t in = module.widths[layer];
  const int64_t out = module.widths[layer + 1];
  {
    HostOp h = ops_.host_op("AddmmBackward0");
    if (input_grad)
      h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
               gemm_kernel(dtype_, 1, batch, in, out));
    h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
             gemm_kernel(dtype_, 1, out, in, batch));
    KernelDesc sum = pointwise(MemoryOp::kSum, dtype_, as_double(batch * out), 1, 1, 0);
    sum.bytes_written = as_double(out * dtype_bytes(dtype_));
    h.kernel("reduce_kernel/sum", "aten::sum", sum);
    h.end();
  }
  ops_.body("TBackward0");
  ops_.accumulate_grad(out * in);
  ops_.accumulate_grad(out);
}

void DenseNetworkEmitter::relu_backward(int64_t batch, int64_t width) {
  ops_.single_kernel("ReluBackward0", "vectorized_elementwise_kernel/threshold_backward",
                     "aten::threshold_backward",
                     pointwise(MemoryOp::kRelu, dtype_, as_double(batch * width), 1, 1, 1));
}

}  // namespace upsim::dlrm_emit

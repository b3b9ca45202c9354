#include "workloads/dlrm/rank_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

void RankEmitter::forward(const IterationGroups& groups) {
  embeddings_.lookup_pieces();
  const auto& bot = config_.bottom_mlp;
  if (plan_.bottom_in_exchange) {
    // Hybrid parallel: this rank's bottom MLP runs on the global batch before the exchange,
    // whose payload carries its output to every rank.
    mlp_forward(plan_.bottom_batch, bot, bot.size() - 1);
  }
  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_forward(groups);
  if (!plan_.bottom_in_exchange && plan_.bottom_batch > 0) {
    mlp_forward(plan_.bottom_batch, bot, bot.size() - 1);
  }
  embeddings_.receive_forward(pending);

  if (config_.interaction == DlrmInteraction::kDot) {
    dot_interaction_forward();
  } else {
    cross_network_forward();
  }

  // The top MLP: its ReLU layers, then the last layer and the sigmoid.
  const size_t top_layers = top_widths_.size() - 1;
  mlp_forward(plan_.local_batch, top_widths_, top_layers - 1);
  linear_forward(plan_.local_batch, top_widths_[top_layers - 1], top_widths_[top_layers]);
  ops_.single_kernel("aten::sigmoid", "vectorized_elementwise_kernel/sigmoid", "aten::sigmoid",
                     pointwise(MemoryOp::kSigmoid, dtype_,
                               as_double(plan_.local_batch * top_widths_.back()), 4, 1, 1));

  if (config_.mode == DlrmMode::kInference) return;
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

void RankEmitter::dot_interaction_forward() {
  const int64_t f = table_count_ + 1;
  const int64_t pairs = config_.interaction_pairs();
  ops_.single_kernel("aten::cat", "CatArrayBatchedCopy", "aten::cat",
                     pointwise(MemoryOp::kCat, dtype_,
                               as_double(plan_.local_batch * f * embedding_dim_), 0, 1, 1));
  if (config_.interaction_kernel == InteractionKernel::kFused) {
    // DeepLearningExamples' cuda_dot (dlrm/cuda_src/dot_based_interact*): one kernel reads
    // the f x D features and the bottom MLP output of each sample and writes the D + pairs
    // outputs; the lower triangle of the Gram matrix takes f f D multiply-adds.
    KernelDesc dot;
    dot.cls = KernelClass::kMemoryBound;
    dot.dtype = dtype_;
    const double e = as_double(dtype_bytes(dtype_));
    dot.bytes_read = as_double(plan_.local_batch * (f + 1) * embedding_dim_) * e;
    dot.bytes_written = as_double(plan_.local_batch * (embedding_dim_ + pairs)) * e;
    dot.flops = as_double(plan_.local_batch * f * f * embedding_dim_);
    ops_.single_kernel("DotBasedInteract", "dotBasedInteractFwdKernel", "dot_based_interact::fwd",
                       dot);
    return;
  }
  ops_.body("aten::view");
  ops_.body("aten::transpose");
  ops_.single_kernel("aten::bmm", pytorch::gemm_kernel_name(dtype_, "bmm"), "aten::bmm",
                     gemm_kernel(dtype_, plan_.local_batch, f, f, embedding_dim_));
  KernelDesc gather =
      pointwise(MemoryOp::kIndex, dtype_, as_double(plan_.local_batch * pairs), 0, 1, 1);
  gather.bytes_read += as_double(2 * pairs * 8);  // li, lj: int64 index tensors
  ops_.single_kernel("aten::index", "index_elementwise_kernel", "aten::index", gather);
  ops_.single_kernel("aten::cat", "CatArrayBatchedCopy", "aten::cat",
                     pointwise(MemoryOp::kCat, dtype_,
                               as_double(plan_.local_batch * (embedding_dim_ + pairs)), 0, 1, 1));
}

void RankEmitter::dot_interaction_backward() {
  const int64_t f = table_count_ + 1;
  const int64_t pairs = config_.interaction_pairs();
  if (config_.interaction_kernel == InteractionKernel::kFused) {
    // cuda_dot's backward: one kernel reads the output gradient and the features and writes
    // the features' gradient (the bottom MLP output's included); twice the forward's work.
    KernelDesc dot;
    dot.cls = KernelClass::kMemoryBound;
    dot.dtype = dtype_;
    const double e = as_double(dtype_bytes(dtype_));
    dot.bytes_read = as_double(plan_.local_batch * (embedding_dim_ + pairs) +
                               plan_.local_batch * f * embedding_dim_) *
                     e;
    dot.bytes_written = as_double(plan_.local_batch * (f + 1) * embedding_dim_) * e;
    dot.flops = as_double(2 * plan_.local_batch * f * f * embedding_dim_);
    ops_.single_kernel("DotBasedInteractBackward", "dotBasedInteractBwdKernel",
                       "dot_based_interact::bwd", dot);
    ops_.body("CatBackward0");
    return;
  }
  ops_.body("CatBackward0");
  {
    HostOp h = ops_.host_op("IndexBackward0");
    h.kernel("vectorized_elementwise_kernel/zero_", "aten::zero_",
             pointwise(MemoryOp::kCopy, dtype_, as_double(plan_.local_batch * f * f), 0, 0, 1));
    KernelDesc put =
        pointwise(MemoryOp::kIndex, dtype_, as_double(plan_.local_batch * pairs), 1, 2, 1);
    put.bytes_read += as_double(2 * pairs * 8);
    h.kernel("indexing_backward_kernel", "aten::index_put_", put);
    h.end();
  }
  {
    // Z = S S^T with S = b x f x D: grad S = grad_Z S (m = f, n = D, k = f) and
    // grad S^T = S^T grad_Z (m = D, n = f, k = f) (Lin et al., TPDS 2024 BmmBackward).
    HostOp h = ops_.host_op("BmmBackward0");
    h.kernel(pytorch::gemm_kernel_name(dtype_, "bmm"), "aten::bmm",
             gemm_kernel(dtype_, plan_.local_batch, f, embedding_dim_, f));
    h.kernel(pytorch::gemm_kernel_name(dtype_, "bmm"), "aten::bmm",
             gemm_kernel(dtype_, plan_.local_batch, embedding_dim_, f, f));
    h.end();
  }
  ops_.body("TransposeBackward0");
  add_gradients(plan_.local_batch * f * embedding_dim_);
  ops_.body("ViewBackward0");
  ops_.body("CatBackward0");
  add_gradients(plan_.local_batch * embedding_dim_);
}

void RankEmitter::cross_network_forward() {
  const int64_t n = config_.cross_width();
  const int64_t r = config_.cross_rank;
  ops_.single_kernel("aten::cat", "CatArrayBatchedCopy", "aten::cat",
                     pointwise(MemoryOp::kCat, dtype_, as_double(plan_.local_batch * n), 0, 1, 1));
  for (int64_t l = 0; l < config_.cross_layers; ++l) {
    if (config_.master_weights) {
      HostOp h = ops_.host_op("aten::to");
      ops_.cast_parameter(h, r * n);  // V_l
      ops_.cast_parameter(h, n * r);  // W_l
      ops_.cast_parameter(h, n);      // bias_l
      h.end();
    }
    ops_.single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                       gemm_kernel(dtype_, 1, plan_.local_batch, r, n));
    ops_.single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                       gemm_kernel(dtype_, 1, plan_.local_batch, n, r));
    for (const std::string_view op : {"add", "mul", "add"}) {
      const std::string aten = fmt::format("aten::{}", op);
      ops_.single_kernel(
          aten, fmt::format("vectorized_elementwise_kernel/{}", op), aten,
          pointwise(MemoryOp::kBinary, dtype_, as_double(plan_.local_batch * n), 1, 2, 1));
    }
  }
}

void RankEmitter::cross_network_backward(DdpModule& top, size_t ready_params) {
  const int64_t n = config_.cross_width();
  const int64_t r = config_.cross_rank;
  const double elements = as_double(plan_.local_batch * n);
  for (int64_t l = config_.cross_layers; l-- > 0;) {
    ops_.body("AddBackward0");
    {
      HostOp h = ops_.host_op("MulBackward0");
      for (int k = 0; k < 2; ++k) {
        h.kernel("vectorized_elementwise_kernel/mul", "aten::mul",
                 pointwise(MemoryOp::kBinary, dtype_, elements, 1, 2, 1));
      }
      h.end();
    }
    add_gradients(plan_.local_batch * n);  // x0's gradient accumulates over the layers
    {
      HostOp h = ops_.host_op("AddBackward0");
      KernelDesc sum = pointwise(MemoryOp::kSum, dtype_, elements, 1, 1, 0);
      sum.bytes_written = as_double(n * dtype_bytes(dtype_));
      h.kernel("reduce_kernel/sum", "aten::sum", sum);
      h.end();
    }
    for (const auto& [out, in] : {std::pair{n, r}, std::pair{r, n}}) {
      HostOp h = ops_.host_op("MmBackward0");
      h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
               gemm_kernel(dtype_, 1, plan_.local_batch, in, out));
      h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
               gemm_kernel(dtype_, 1, out, in, plan_.local_batch));
      h.end();
    }
    add_gradients(plan_.local_batch * n);  // x_l: the residual's gradient plus V's
    ops_.accumulate_grad(n);
    ops_.accumulate_grad(n * r);
    ops_.accumulate_grad(r * n);
    ready_params += 3;  // bias, W, V
    if (ops_.distributed()) reduce_ready_buckets(top, ready_params);
  }
  ops_.body("CatBackward0");
}

void RankEmitter::mlp_forward(int64_t batch, const std::vector<int64_t>& widths, size_t layers) {
  if (config_.mlp_kernels == MlpKernels::kAten) {
    for (size_t l = 0; l < layers; ++l) {
      linear_forward(batch, widths[l], widths[l + 1]);
      relu_forward(batch, widths[l + 1]);
    }
    return;
  }
  if (layers == 0) return;
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

void RankEmitter::mlp_backward(int64_t batch, DdpModule& module, size_t layers, bool input_grad,
                               size_t ready_before) {
  if (config_.mlp_kernels == MlpKernels::kAten) {
    for (size_t l = layers; l-- > 0;) {
      relu_backward(batch, module.widths[l + 1]);
      linear_backward(batch, module, l, l > 0 || input_grad);
      if (ops_.distributed()) reduce_ready_buckets(module, ready_before + 2 * (layers - l));
    }
    return;
  }
  if (layers == 0) return;
  {
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
  if (ops_.distributed()) reduce_ready_buckets(module, ready_before + 2 * layers);
}

}  // namespace upsim::dlrm_emit

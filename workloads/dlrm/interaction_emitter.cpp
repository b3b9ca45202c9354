#include "workloads/dlrm/interaction_emitter.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"

namespace upsim::dlrm_emit {

InteractionEmitter::InteractionEmitter(RankOps& ops, const RankPlan& plan)
    : ops_(ops),
      config_(ops.config()),
      plan_(plan),
      table_count_(static_cast<int64_t>(ops.config().tables.size())),
      embedding_dim_(ops.config().embedding_dim),
      dtype_(ops.config().dtype) {}

void InteractionEmitter::forward() {
  if (config_.interaction == DlrmInteraction::kDot) {
    dot_interaction_forward();
  } else {
    cross_network_forward();
  }
}

void InteractionEmitter::backward(DdpModule& top, size_t ready_params) {
  if (config_.interaction == DlrmInteraction::kDot) {
    dot_interaction_backward();
  } else {
    cross_network_backward(top, ready_params);
  }
}

void InteractionEmitter::dot_interaction_forward() {
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

void InteractionEmitter::dot_interaction_backward() {
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

void InteractionEmitter::cross_network_forward() {
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
    if (config_.interaction_kernel != InteractionKernel::kAten) {
      fused_cross_layer_forward();
      continue;
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

InteractionEmitter::FusedCrossNames InteractionEmitter::fused_cross_names() const {
  if (config_.interaction_kernel == InteractionKernel::kXla) {
    return {"Cross (XLA)",
            "Cross backward (XLA)",
            "loop_fusion (x0 * h + x_l)",
            "multi_output_fusion (dY * x0, dY * h)",
            "loop_fusion (dx0 + dY)",
            false};
  }
  return {"MultiCrossLayer::fprop",
          "MultiCrossLayer::bprop",
          "fused_matrix_elementwise_dot_add",
          "fused_mul_fma3",
          "matrix_add",
          true};
}

void InteractionEmitter::fused_cross_layer_forward() {
  const int64_t b = plan_.local_batch;
  const int64_t n = config_.cross_width();
  const int64_t r = config_.cross_rank;
  const FusedCrossNames names = fused_cross_names();
  HostOp h = ops_.host_op(names.forward_op);
  // XU = x_l U, then h = XU V + bias (the bias in the cuBLASLt epilogue).
  h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "cublasLtMatmul",
           gemm_kernel(dtype_, 1, b, r, n));
  h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "cublasLtMatmul",
           gemm_kernel(dtype_, 1, b, n, r));
  // x_{l+1} = x0 * h + x_l, reading h, x0 and x_l.
  h.kernel(names.forward_kernel, names.forward_op,
           pointwise(MemoryOp::kBinary, dtype_, as_double(b * n), 2, 3, 1));
  h.end();
}

void InteractionEmitter::fused_cross_network_backward(DdpModule& top, size_t ready_params) {
  const int64_t b = plan_.local_batch;
  const int64_t n = config_.cross_width();
  const int64_t r = config_.cross_rank;
  const double elements = as_double(b * n);
  const double e = as_double(dtype_bytes(dtype_));
  const FusedCrossNames names = fused_cross_names();
  {
    HostOp h = ops_.host_op(names.backward_op);
    if (names.zeroes_accumulator) {
      // cudaMemsetAsync of the dx accumulator.
      KernelDesc zero = pointwise(MemoryOp::kCopy, dtype_, elements, 0, 0, 1);
      h.kernel("memset", "cudaMemsetAsync", zero);
    }
    for (int64_t l = config_.cross_layers; l-- > 0;) {
      // S0 = dY * x0 and dx += dY * h (reads dY, x0, h, dx; writes S0, dx).
      h.kernel(names.backward_kernel, names.backward_op,
               pointwise(MemoryOp::kBinary, dtype_, elements, 3, 4, 2));
      // dV (+ the bias gradient) = XU^T S0; S1 = S0 V^T; dU = x_l^T S1 (dV, dU accumulate:
      // beta 1); dY_{l-1} = S1 U^T + dY_l, dY_l the C operand.
      // Each beta-1 GEMM reads its C operand too.
      const auto reading_c = [&](int64_t m, int64_t cols, int64_t k) {
        KernelDesc gemm = gemm_kernel(dtype_, 1, m, cols, k);
        gemm.bytes_read += as_double(m * cols) * e;
        return gemm;
      };
      for (const KernelDesc& gemm : {reading_c(r, n, b), gemm_kernel(dtype_, 1, b, r, n),
                                     reading_c(n, r, b), reading_c(b, n, r)}) {
        h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "cublasLtMatmul", gemm);
      }
    }
    // The gradient of x0 is the accumulated dx plus the first layer's dY.
    h.kernel(names.final_add_kernel, names.backward_op,
             pointwise(MemoryOp::kBinary, dtype_, elements, 1, 2, 1));
    h.end();
  }
  for (int64_t l = config_.cross_layers; l-- > 0;) {
    ops_.accumulate_grad(n);
    ops_.accumulate_grad(n * r);
    ops_.accumulate_grad(r * n);
  }
  top.reduce_ready_buckets(ops_, ready_params + 3 * static_cast<size_t>(config_.cross_layers));
  ops_.body("CatBackward0");
}

void InteractionEmitter::cross_network_backward(DdpModule& top, size_t ready_params) {
  if (config_.interaction_kernel != InteractionKernel::kAten) {
    fused_cross_network_backward(top, ready_params);
    return;
  }
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
    top.reduce_ready_buckets(ops_, ready_params);
  }
  ops_.body("CatBackward0");
}

void InteractionEmitter::add_gradients(int64_t elements) {
  ops_.single_kernel("aten::add", "vectorized_elementwise_kernel/add", "aten::add",
                     pointwise(MemoryOp::kBinary, dtype_, as_double(elements), 1, 2, 1));
}

}  // namespace upsim::dlrm_emit

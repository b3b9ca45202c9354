#include "workloads/dlrm/rank_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

void RankEmitter::linear_backward(int64_t batch, const DdpModule& module, size_t layer,
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

void RankEmitter::reduce_ready_buckets(DdpModule& module, size_t ready_params) {
  const auto& buckets = module.buckets;
  while (module.next_bucket < buckets.size() &&
         buckets[module.next_bucket].params.back() < ready_params) {
    const DdpBucket& bucket = buckets[module.next_bucket];
    module.done_events.push_back(
        ops_.scaled_all_reduce(module.groups[module.next_bucket], config_.param_dtype(),
                               bucket.bytes / dtype_bytes(config_.param_dtype())));
    ++module.next_bucket;
  }
}

void RankEmitter::relu_backward(int64_t batch, int64_t width) {
  ops_.single_kernel("ReluBackward0", "vectorized_elementwise_kernel/threshold_backward",
                     "aten::threshold_backward",
                     pointwise(MemoryOp::kRelu, dtype_, as_double(batch * width), 1, 1, 1));
}

void RankEmitter::add_gradients(int64_t elements) {
  ops_.single_kernel("aten::add", "vectorized_elementwise_kernel/add", "aten::add",
                     pointwise(MemoryOp::kBinary, dtype_, as_double(elements), 1, 2, 1));
}

void RankEmitter::backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom) {
  ops_.body(fmt::format("Optimizer.zero_grad#{0}.zero_grad",
                        torch_optimizer_class(config_.dense_optimizer)));
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
  const size_t top_layers = top_widths_.size() - 1;
  ops_.single_kernel("SigmoidBackward0", "vectorized_elementwise_kernel/sigmoid_backward",
                     "aten::sigmoid_backward",
                     pointwise(MemoryOp::kSigmoid, dtype_,
                               as_double(plan_.local_batch * top_widths_.back()), 2, 1, 1));
  // The top MLP's input (the interaction output) needs its gradient, so every layer computes
  // grad input: the last layer, then the ReLU layers.
  linear_backward(plan_.local_batch, top, top_layers - 1, true);
  if (ops_.distributed()) reduce_ready_buckets(top, 2);
  mlp_backward(plan_.local_batch, top, top_layers - 1, true, 2);

  if (config_.interaction == DlrmInteraction::kDot) {
    dot_interaction_backward();
  } else {
    cross_network_backward(top, 2 * top_layers);
  }

  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_backward(groups);

  // The dense input needs no gradient: the first bottom layer computes no grad input.
  const auto& bot = config_.bottom_mlp;
  const size_t layers = bot.size() - 1;
  const auto bottom_backward = [&] { mlp_backward(plan_.bottom_batch, bottom, layers, false, 0); };
  if (!plan_.hybrid) bottom_backward();

  embeddings_.wait_backward_all_to_all(pending);
  if (plan_.bottom_in_exchange) {
    // Hybrid parallel: the bottom output's gradients of every rank's samples arrived.
    ops_.convert(config_.all_to_all_dtype, dtype_, plan_.bottom_batch * embedding_dim_);
    bottom_backward();
  }
  const std::vector<TaskId> data_parallel_done = embeddings_.backward(pending, groups);
  if (ops_.distributed()) {
    // Each DDP module's reducer waits for its buckets' all-reduces at the end of backward
    // (the data-parallel tables: for their gradient's).
    const auto finalize_backward = [&](const std::vector<TaskId>& done_events) {
      HostOp h = ops_.host_op("ddp.reducer::finalize_backward");
      for (TaskId done : done_events)
        h.wait(kComputeStream, done);
      h.end();
    };
    finalize_backward(top.done_events);
    finalize_backward(bottom.done_events);
    if (exchange_.data_parallel) finalize_backward(data_parallel_done);
  }
}

}  // namespace upsim::dlrm_emit

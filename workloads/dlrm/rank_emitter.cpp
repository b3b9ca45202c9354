#include "workloads/dlrm/rank_emitter.h"

#include <vector>

namespace upsim::dlrm_emit {

RankEmitter::RankEmitter(const DlrmConfig& config, const DlrmGraph& built,
                         const std::vector<int64_t>& top_widths, const EmbeddingExchange& exchange,
                         const std::vector<KjtAllToAll>& kjts, uint32_t index, TaskGraph& graph)
    : config_(config),
      built_(built),
      top_widths_(top_widths),
      ops_(config, built, index, graph),
      exchange_(exchange),
      plan_(plan_rank(config, built, index)),
      input_(ops_, plan_),
      input_dist_(ops_, kjts, plan_.position),
      embeddings_(ops_, plan_, exchange),
      dense_(ops_, plan_, top_widths),
      interaction_(ops_, plan_),
      optimizer_(ops_, plan_, top_widths) {}

void RankEmitter::iteration(uint32_t it, const IterationGroups& groups) {
  ops_.iteration_mark(it);
  DdpModule top{top_widths_, built_.top_buckets, groups.top, {}, 0};
  DdpModule bottom{config_.bottom_mlp, built_.bottom_buckets, groups.bottom, {}, 0};
  if (config_.mode == DlrmMode::kInference) {
    // A served batch: its inputs copied, the forward, the host waits for the scores. Under
    // CUDA graphs the copied batch goes into the graph's static inputs and one replay runs the
    // captured forward (DeepLearningExamples' DLRM main.py, inference_benchmark_graphed).
    input_.load_batch();
    if (config_.cuda_graphs) {
      input_.copy_into_static_inputs();
      ops_.begin_capture();
      forward(groups);
      ops_.end_capture("torch.cuda.CUDAGraph.replay");
    } else {
      forward(groups);
    }
    ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
    return;
  }
  if (config_.train_pipeline == TrainPipeline::kSparseDist) {
    pipelined_training_step(it, groups, top, bottom);
    return;
  }
  if (config_.train_pipeline == TrainPipeline::kSemiSync) {
    semi_sync_training_step(it, groups, top, bottom);
    return;
  }
  const bool prefetch = config_.input == InputPipeline::kPrefetch;
  // The prefetcher copies the first batch before the loop, each later one after the step
  // before it (dlrm/data/utils.py prefetcher); the forward waits for its batch's copies.
  if (!prefetch || it == 0) input_.load_batch();
  if (prefetch) input_.wait_for_prefetched_batch();
  if (config_.cuda_graphs) {
    // DeepLearningExamples' DLRM main.py CudaGraphWrapper: the batch is copied into the static
    // inputs, one replay runs the captured forward, loss and scaled backward (zero_grad sets
    // .grad to None before the capture only), then the optimizer runs eagerly.
    input_.copy_into_static_inputs();
    ops_.begin_capture();
    forward(groups);
    backward(groups, top, bottom);
    ops_.end_capture("torch.cuda.CUDAGraph.replay");
  } else {
    forward(groups);
    backward(groups, top, bottom);
  }
  embeddings_.sync_replicas(groups);
  optimizer_.step();
  if (prefetch) input_.load_batch();
  ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
}

void RankEmitter::pipelined_training_step(uint32_t it, const IterationGroups& groups,
                                          DdpModule& top, DdpModule& bottom) {
  if (it == 0) {
    input_.load_batch();
    if (input_dist_.active()) {
      next_batch_input_ = input_dist_.start(groups.first_batch_input_dist, kDataDistStream);
      input_dist_.send_tensors(groups.first_batch_input_dist, next_batch_input_, kDataDistStream);
    }
    input_.load_batch();
  }
  const InputDistEmitter::Pending this_batch = next_batch_input_;
  if (input_dist_.active()) {
    next_batch_input_ = input_dist_.start(groups.input_dist, kDataDistStream);
  } else {
    // One rank distributes nothing: the step waits for its batch's copy alone (the data-dist
    // stream's wait on the memcpy stream, which the compute stream waits for).
    input_.wait_for_prefetched_batch();
  }
  input_.load_batch();
  forward(groups, input_dist_.active() ? &this_batch : nullptr);
  if (input_dist_.active()) {
    input_dist_.send_tensors(groups.input_dist, next_batch_input_, kDataDistStream);
  }
  backward(groups, top, bottom);
  // TrainPipelineSparseDist.progress: sync_embeddings between backward and the optimizer.
  embeddings_.sync_replicas(groups);
  optimizer_.step();
  // The training loop calls progress() back to back: no synchronize between steps; the splits'
  // read-back keeps the host within about a step of the device.
}

void RankEmitter::semi_sync_training_step(uint32_t it, const IterationGroups& groups,
                                          DdpModule& top, DdpModule& bottom) {
  const bool distributed = input_dist_.active();
  if (it == 0) {
    // fill_pipeline: batch 0 copied, distributed and looked up; batch 1 copied and distributed;
    // batch 2 copied.
    const TaskId first_copied = load_recorded_batch();
    InputDistEmitter::Pending first;
    if (distributed) {
      first = input_dist_.start(groups.first_batch_input_dist, kDataDistStream);
      input_dist_.send_tensors(groups.first_batch_input_dist, first, kDataDistStream);
    }
    copied_batches_.pop_front();
    next_batch_exchange_ = start_embedding_lookup(first, first_copied, groups.first_batch_forward);
    load_recorded_batch();
    if (distributed) {
      next_batch_input_ = input_dist_.start(groups.second_batch_input_dist, kDataDistStream);
      input_dist_.send_tensors(groups.second_batch_input_dist, next_batch_input_, kDataDistStream);
    }
    load_recorded_batch();
  }
  // progress(): batch it+2's splits, then batch it's forward.
  InputDistEmitter::Pending batch_after_next;
  if (distributed) batch_after_next = input_dist_.start(groups.input_dist, kDataDistStream);
  dense_forward(next_batch_exchange_);
  load_recorded_batch();
  // Batch it+1's lookups read the tables before batch it's update (semi-synchronous); its
  // exchange overlaps batch it's backward.
  const TaskId next_copied = copied_batches_.front();
  copied_batches_.pop_front();
  next_batch_exchange_ = start_embedding_lookup(next_batch_input_, next_copied, groups.forward);
  if (distributed) {
    input_dist_.send_tensors(groups.input_dist, batch_after_next, kDataDistStream);
    next_batch_input_ = batch_after_next;
  }
  semi_sync_backward(groups, top, bottom);
  embeddings_.sync_replicas(groups);
  optimizer_.step();
  optimizer_.zero_grad();
}

TaskId RankEmitter::load_recorded_batch() {
  input_.load_batch();
  HostOp h = ops_.host_op("torch.cuda.Event.record");
  const TaskId copied = h.record(kDataStream);
  h.end();
  copied_batches_.push_back(copied);
  return copied;
}

EmbeddingEmitter::PendingExchange RankEmitter::start_embedding_lookup(
    const InputDistEmitter::Pending& input, TaskId copied, const ForwardExchangeGroups& exchange) {
  if (input_dist_.active()) {
    input_dist_.finish(input, kDataDistStream);
  } else {
    HostOp h = ops_.host_op("torch.cuda.Stream.wait_event");
    h.wait(kComputeStream, copied);
    h.end();
  }
  embeddings_.lookup_pieces();
  return embeddings_.send_forward(exchange);
}

void RankEmitter::dense_forward(const EmbeddingEmitter::PendingExchange& embeddings) {
  if (input_dist_.active()) {
    HostOp h = ops_.host_op("torch.cuda.Stream.wait_stream");
    h.wait(kComputeStream, h.record(kDataDistStream));
    h.end();
  }
  if (plan_.bottom_batch > 0) dense_.bottom_forward();
  embeddings_.receive_forward(embeddings);
  interaction_.forward();
  dense_.top_forward();
  dense_.loss_forward();
}

void RankEmitter::semi_sync_backward(const IterationGroups& groups, DdpModule& top,
                                     DdpModule& bottom) {
  // `torch.sum(losses).backward()`: the dense graph down to the detached pooled embeddings.
  head_backward(top);
  if (plan_.bottom_batch > 0) dense_.bottom_backward(bottom);
  if (ops_.distributed()) {
    finalize_ddp_backward(ops_, top.done_events);
    finalize_ddp_backward(ops_, bottom.done_events);
  }
  // embedding_backward: autograd from the detached embeddings' gradients through the exchange
  // and the lookups.
  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_backward(groups);
  embeddings_.wait_backward_all_to_all(pending);
  const std::vector<TaskId> data_parallel_done = embeddings_.backward(pending, groups);
  if (ops_.distributed() && exchange_.data_parallel) {
    finalize_ddp_backward(ops_, data_parallel_done);
  }
}

void RankEmitter::head_backward(DdpModule& top) {
  dense_.loss_backward();
  dense_.top_backward(top);
  // The top MLP's weights and biases have their gradients before the interaction's.
  interaction_.backward(top, 2 * (top_widths_.size() - 1));
}

void RankEmitter::end_of_loop(uint32_t iterations) {
  if (config_.train_pipeline == TrainPipeline::kNone) return;
  ops_.iteration_mark(iterations);
  ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
}

void RankEmitter::forward(const IterationGroups& groups,
                          const InputDistEmitter::Pending* distributed) {
  // TorchRec's sharded modules distribute the batch's features in their forward, or wait for
  // the pipeline's distribution of them.
  if (distributed != nullptr) {
    input_dist_.finish(*distributed, kDataDistStream);
  } else if (input_dist_.active()) {
    InputDistEmitter::Pending pending = input_dist_.start(groups.input_dist, kComputeStream);
    input_dist_.send_tensors(groups.input_dist, pending, kComputeStream);
    input_dist_.finish(pending, kComputeStream);
  }
  embeddings_.lookup_pieces();
  // Hybrid parallel: this rank's bottom MLP runs on the global batch before the exchange,
  // whose payload carries its output to every rank.
  if (plan_.bottom_in_exchange) dense_.bottom_forward();
  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_forward(groups.forward);
  if (!plan_.bottom_in_exchange && plan_.bottom_batch > 0) dense_.bottom_forward();
  embeddings_.receive_forward(pending);
  interaction_.forward();
  dense_.top_forward();
  if (config_.mode == DlrmMode::kInference) return;
  dense_.loss_forward();
}

void RankEmitter::backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom) {
  optimizer_.zero_grad();
  head_backward(top);
  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_backward(groups);
  // The bottom MLP's backward overlaps the exchange; hybrid parallel: it waits for its output's
  // gradients of every rank's samples, which arrive in the all-to-all in the payload dtype.
  if (!plan_.hybrid) dense_.bottom_backward(bottom);
  embeddings_.wait_backward_all_to_all(pending);
  if (plan_.bottom_in_exchange) {
    ops_.convert(config_.all_to_all_dtype, config_.dtype,
                 plan_.bottom_batch * config_.embedding_dim);
    dense_.bottom_backward(bottom);
  }
  const std::vector<TaskId> data_parallel_done = embeddings_.backward(pending, groups);
  if (ops_.distributed()) {
    // Each DDP module's reducer waits for its buckets' all-reduces at the end of backward
    // (the data-parallel tables: for their gradient's).
    finalize_ddp_backward(ops_, top.done_events);
    finalize_ddp_backward(ops_, bottom.done_events);
    if (exchange_.data_parallel) finalize_ddp_backward(ops_, data_parallel_done);
  }
}

}  // namespace upsim::dlrm_emit

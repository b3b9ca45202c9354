// Megatron-Core's combined 1F1B schedule (moe.a2a_overlap = overlap_moe_expert_parallel_comm),
// read at Megatron-LM d98e8a6:
//  - megatron/core/pipeline_parallel/combined_1f1b.py, combined_1f1b_schedule_for_no_pipelining:
//    without a pipeline the first micro-batch's forward runs alone, then each next forward
//    runs with the previous micro-batch's backward, then the last backward alone
//    (pipeline_schedule with one extra warm-up forward gives that order);
//  - megatron/core/models/common/model_chunk_schedule_plan.py: TransformerModelChunkSchedulePlan
//    .run pairs the forward's i-th layer with the backward's i-th from the top, and
//    TransformerLayerSchedulePlan.run orders one pair's nodes
//        comm stream:  combine_bwd      | dispatch_fwd -> dispatch_bwd | combine_fwd
//        comp stream:  pre_dispatch_fwd | mlp_bwd -> mlp_fwd           | pre_dispatch_bwd
//    (issue order: combine_bwd, pre_dispatch_fwd, mlp_bwd, dispatch_fwd, dispatch_bwd, mlp_fwd,
//    combine_fwd, pre_dispatch_bwd);
//  - megatron/core/pipeline_parallel/utils.py, ScheduleNode: a node waits for its chain's event
//    on its stream, runs, records the event (one event per micro-batch's schedule plan).
// The host runs the nodes in that order, so a host wait inside one (the dispatcher's token
// counts) holds the launches of every node after it. Not modelled: delay_wgrad_compute (the
// experts' weight gradients deferred past the dispatch's backward) and the delayed wgrad of the
// backward's first layer.
#include <fmt/format.h>

#include "workloads/transformer/transformer_emitter.h"

namespace upsim::transformer_emit {

void TransformerEmitter::chain_join(NodeChain& chain, uint16_t stream) {
  if (chain.stream == stream) return;
  HostOp h = ops_.host_op("cudaStreamWaitEvent");
  h.wait(stream, chain.done);
  h.end();
}

void TransformerEmitter::chain_record(NodeChain& chain, uint16_t stream) {
  HostOp h = ops_.host_op("cudaEventRecord");
  chain.done = h.record(stream);
  h.end();
  chain.stream = stream;
}

void TransformerEmitter::chain_node(NodeChain& chain, uint16_t stream, LayerEmitter::LayerNode node,
                                    bool backward, int64_t layer) {
  using Node = LayerEmitter::LayerNode;
  // A dense layer has no dispatch or combine node (Megatron-Core builds none for it).
  if ((node == Node::kDispatch || node == Node::kCombine) && !config_.is_moe_layer(layer)) return;
  chain_join(chain, stream);
  {
    const OpEmitter::StreamScope scope(ops_, stream);
    layers_.layer_node(node, backward, layer);
  }
  chain_record(chain, stream);
}

void TransformerEmitter::combined_step(const PipelineStep& forward, const PipelineStep& backward) {
  using Node = LayerEmitter::LayerNode;
  ops_.marker(fmt::format("forward mb {} + backward mb {} (combined 1F1B)", forward.micro_batch,
                          backward.micro_batch));
  const bool last_mb = backward.micro_batch == micro_batches_ - 1;
  NodeChain f;
  NodeChain b;
  // The forward's pre-process (embedding), then the backward's post-process (head), both on
  // the compute stream.
  grad_sync_->before_forward(-1, params_.embedding().elements, std::nullopt);
  layers_.embedding_forward();
  chain_record(f, kCompute);
  head_layers().head_backward();
  grad_sync_->after_backward(-2, params_.head(), last_mb);
  chain_record(b, kCompute);

  const int64_t first = first_layer(0);
  const int64_t count = chunk_layer_count(0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t fl = first + i;
    const int64_t bl = first + count - 1 - i;
    if (grad_sync_->gathers_for_backward()) {
      std::optional<UnitElements> next;
      if (bl > first) next = std::make_pair(bl - 1, params_.layer(bl - 1).elements);
      grad_sync_->before_backward(bl, params_.layer(bl).elements, next);
    }
    chain_node(b, kEpComm, Node::kCombine, true, bl);
    std::optional<std::pair<int64_t, PerBuffer>> next_forward;
    if (fl < first + count - 1) {
      next_forward = std::make_pair(fl + 1, params_.layer(fl + 1).elements);
    }
    grad_sync_->before_forward(fl, params_.layer(fl).elements, next_forward);
    chain_node(f, kCompute, Node::kPreDispatch, false, fl);
    chain_node(b, kCompute, Node::kMlp, true, bl);
    chain_node(f, kEpComm, Node::kDispatch, false, fl);
    chain_node(b, kEpComm, Node::kDispatch, true, bl);
    chain_node(f, kCompute, Node::kMlp, false, fl);
    chain_node(f, kEpComm, Node::kCombine, false, fl);
    chain_node(b, kCompute, Node::kPreDispatch, true, bl);
    grad_sync_->after_backward(bl, params_.layer(bl), last_mb);
  }

  // The forward's post-process (head and loss), then the backward's pre-process (embedding).
  chain_join(f, kCompute);
  grad_sync_->before_forward(-2, params_.head().elements, std::nullopt);
  head_layers().head_forward();
  chain_join(b, kCompute);
  layers_.embedding_backward();
  grad_sync_->after_backward(-1, params_.embedding(), last_mb);
}

}  // namespace upsim::transformer_emit

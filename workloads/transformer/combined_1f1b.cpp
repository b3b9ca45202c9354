// Megatron-Core's combined 1F1B schedule (moe.a2a_overlap = overlap_moe_expert_parallel_comm),
// read at Megatron-LM d98e8a6:
//  - megatron/core/pipeline_parallel/combined_1f1b.py, combined_1f1b_schedule_for_no_pipelining:
//    without a pipeline the first micro-batch's forward runs alone, then each next forward
//    runs with the previous micro-batch's backward, then the last backward alone
//    (pipeline_schedule with one extra warm-up forward gives that order);
//    combined_1f1b_schedule_for_interleaved_pipelining: under an interleaved pipeline the same
//    extra warm-up forward, then each steady-state forward chunk with the backward chunk after
//    it (PipelineStep::steady), their receives and sends around the pair;
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
// counts) holds the launches of every node after it. moe.delay_wgrad (delay_wgrad_compute): the
// kMlp backward's weight gradients (b_layer.mlp.backward_dw) after the forward's dispatch,
// before the backward's; the kPreDispatch backward's (pre_dispatch_computation.backward_dw: the
// attention's and the shared experts' linears) after that node, the chunk's last layer's after
// the backward's send. Under tensor parallel a linear's input all-gather stays in its backward
// and only the weight-gradient GEMM moves (Transformer Engine's Linear stores the gathered
// input: module/linear.py, wgrad_store.put); TE refuses the deferral with userbuffers.
#include <fmt/format.h>

#include <algorithm>

#include "workloads/transformer/transformer_emitter.h"

namespace upsim::transformer_emit {

void TransformerEmitter::chain_join(NodeChain& chain, uint16_t stream) {
  if (chain.stream == stream) return;
  HostOp h = ops_.host_op("cudaStreamWaitEvent");
  h.wait(stream, chain.done);
  h.end();
  chain.stream = stream;
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

void TransformerEmitter::deferred_weight_gradients() {
  // On the compute stream, outside the backward's chain: its next node waits for the chain's
  // event, recorded before them.
  const OpEmitter::StreamScope scope(ops_, kCompute);
  layers_.flush_weight_gradients();
}

void TransformerEmitter::combined_step(const PipelineStep& forward, const PipelineStep& backward) {
  using Node = LayerEmitter::LayerNode;
  const int64_t last_vs = virtual_stages() - 1;
  const int64_t fvs = virtual_stage(forward.chunk);
  const int64_t bvs = virtual_stage(backward.chunk);
  ops_.marker(fmt::format("forward mb {} chunk {} + backward mb {} chunk {} (combined 1F1B)",
                          forward.micro_batch, forward.chunk, backward.micro_batch,
                          backward.chunk));
  const bool last_mb = backward.micro_batch == micro_batches_ - 1;
  NodeChain f;
  NodeChain b;
  // pre_forward and the forward's pre-process (the embedding on the first virtual stage), then
  // pre_backward and the backward's post-process (the head on the last), on the compute stream.
  p2p_.receive(true, forward.micro_batch, fvs, last_vs);
  begin_forward_step();
  if (fvs == 0) {
    grad_sync_->before_forward(-1, params_.embedding().elements, std::nullopt);
    layers_.embedding_forward();
  }
  chain_record(f, kCompute);
  p2p_.receive(false, backward.micro_batch, bvs, last_vs);
  if (bvs == last_vs) {
    head_layers().head_backward();
    grad_sync_->after_backward(-2, params_.head(), last_mb);
  }
  chain_record(b, kCompute);

  const int64_t f_first = first_layer(forward.chunk);
  const int64_t f_count = chunk_layer_count(forward.chunk);
  const int64_t b_first = first_layer(backward.chunk);
  const int64_t b_count = chunk_layer_count(backward.chunk);
  const auto begin_forward = [&](int64_t layer) {
    std::optional<std::pair<int64_t, PerBuffer>> next;
    if (layer < f_first + f_count - 1) {
      next = std::make_pair(layer + 1, params_.layer(layer + 1).elements);
    }
    grad_sync_->before_forward(layer, params_.layer(layer).elements, next);
  };
  const auto begin_backward = [&](int64_t layer) {
    if (!grad_sync_->gathers_for_backward()) return;
    std::optional<UnitElements> next;
    if (layer > b_first) next = std::make_pair(layer - 1, params_.layer(layer - 1).elements);
    grad_sync_->before_backward(layer, params_.layer(layer).elements, next);
  };
  // A backward layer ends with its pre-dispatch node's deferred weight gradients, then its
  // gradients' reduction; the chunk's last layer's wait for the backward's send (Megatron-Core:
  // "Delay the last pre_dispatch_computation wgrad ... for overlapping with the p2p comm").
  std::optional<int64_t> last_backward_layer;
  const auto end_backward = [&](int64_t layer, bool last) {
    if (last) {
      last_backward_layer = layer;
      return;
    }
    deferred_weight_gradients();
    grad_sync_->after_backward(layer, params_.layer(layer), last_mb);
  };
  const int64_t pairs = std::min(f_count, b_count);
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t fl = f_first + i;
    const int64_t bl = b_first + b_count - 1 - i;
    begin_backward(bl);
    chain_node(b, kEpComm, Node::kCombine, true, bl);
    begin_forward(fl);
    chain_node(f, kCompute, Node::kPreDispatch, false, fl);
    chain_node(b, kCompute, Node::kMlp, true, bl);
    chain_node(f, kEpComm, Node::kDispatch, false, fl);
    deferred_weight_gradients();  // b_layer.mlp.backward_dw
    chain_node(b, kEpComm, Node::kDispatch, true, bl);
    chain_node(f, kCompute, Node::kMlp, false, fl);
    chain_node(f, kEpComm, Node::kCombine, false, fl);
    chain_node(b, kCompute, Node::kPreDispatch, true, bl);
    end_backward(bl, i == b_count - 1);
  }
  // Chunks of unequal layer counts: the backward's remaining layers, then the forward's.
  for (int64_t i = pairs; i < b_count; ++i) {
    const int64_t bl = b_first + b_count - 1 - i;
    begin_backward(bl);
    chain_node(b, kEpComm, Node::kCombine, true, bl);
    chain_node(b, kCompute, Node::kMlp, true, bl);
    deferred_weight_gradients();
    chain_node(b, kEpComm, Node::kDispatch, true, bl);
    chain_node(b, kCompute, Node::kPreDispatch, true, bl);
    end_backward(bl, i == b_count - 1);
  }
  for (int64_t i = pairs; i < f_count; ++i) {
    const int64_t fl = f_first + i;
    begin_forward(fl);
    chain_node(f, kCompute, Node::kPreDispatch, false, fl);
    chain_node(f, kEpComm, Node::kDispatch, false, fl);
    chain_node(f, kCompute, Node::kMlp, false, fl);
    chain_node(f, kEpComm, Node::kCombine, false, fl);
  }

  // post_forward (the output's send once the forward's chain is done, beside the backward's
  // last node), post_backward; the forward's post-process (head and loss on the last virtual
  // stage) and the backward's pre-process (the embedding's backward on the first).
  p2p_.send(true, forward.micro_batch, fvs, last_vs, f.done);
  if (fvs == last_vs) {
    chain_join(f, kCompute);
    grad_sync_->before_forward(-2, params_.head().elements, std::nullopt);
    head_layers().head_forward();
  }
  p2p_.send(false, backward.micro_batch, bvs, last_vs, b.done);
  if (last_backward_layer) {
    deferred_weight_gradients();
    grad_sync_->after_backward(*last_backward_layer, params_.layer(*last_backward_layer), last_mb);
  }
  if (bvs == 0) {
    chain_join(b, kCompute);
    layers_.embedding_backward();
    grad_sync_->after_backward(-1, params_.embedding(), last_mb);
  }
  // Megatron-Core: the current stream waits for both chains before the next step.
  chain_join(f, kCompute);
  chain_join(b, kCompute);
}

}  // namespace upsim::transformer_emit

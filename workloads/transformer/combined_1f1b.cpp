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
//  - the MTP block's layers (mtp_layers) are layer plans after the decoder's on the last
//    chunk (_build_layer_schedule_plan): the MTP prologue inside the pre-dispatch node, the
//    layer's own dispatch, experts and combine, then its mtp_post_process node (its final norm,
//    output layer and loss) after the forward's combine and before the backward's combine;
//    the main head stays the chunk's post-process;
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

std::vector<TransformerEmitter::ChunkEntry> TransformerEmitter::chunk_entries(int64_t chunk) const {
  std::vector<ChunkEntry> entries;
  const int64_t first = first_layer(chunk);
  for (int64_t l = 0; l < chunk_layer_count(chunk); ++l)
    entries.push_back({first + l, -1});
  if (virtual_stage(chunk) == virtual_stages() - 1) {
    for (int64_t k = 0; k < config_.mtp_layers; ++k)
      entries.push_back({config_.layers - 1, k});
  }
  return entries;
}

void TransformerEmitter::entry_node(NodeChain& chain, uint16_t stream, LayerEmitter::LayerNode node,
                                    bool backward, const ChunkEntry& entry) {
  using Node = LayerEmitter::LayerNode;
  if (entry.mtp < 0) {
    chain_node(chain, stream, node, backward, entry.layer);
    return;
  }
  if ((node == Node::kDispatch || node == Node::kCombine) && !config_.is_moe_layer(entry.layer)) {
    return;
  }
  chain_join(chain, stream);
  {
    const OpEmitter::StreamScope scope(ops_, stream);
    // MultiTokenPredictionLayer's pre_dispatch_computation wraps its transformer layer's with
    // the embedding, the norms and eh_proj (model_chunk_schedule_plan.py).
    if (node == Node::kPreDispatch && !backward) layers_.mtp_prologue_forward();
    layers_.layer_node(node, backward, entry.layer);
    if (node == Node::kPreDispatch && backward) layers_.mtp_prologue_backward();
  }
  chain_record(chain, stream);
}

void TransformerEmitter::mtp_post_process(NodeChain& chain, bool backward,
                                          const ChunkEntry& entry) {
  if (entry.mtp < 0) return;  // a decoder layer's mtp_post_process is a no-op node
  chain_join(chain, kCompute);
  {
    const OpEmitter::StreamScope scope(ops_, kCompute);
    if (backward) {
      layers_.mtp_post_process_backward();
    } else {
      layers_.mtp_post_process_forward();
    }
  }
  chain_record(chain, kCompute);
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

  // The layers of each chunk in the schedule plan's order (_build_layer_schedule_plan: the
  // decoder's, then on the last virtual stage the MTP block's), the backward's from the top.
  const std::vector<ChunkEntry> f_entries = chunk_entries(forward.chunk);
  std::vector<ChunkEntry> b_entries = chunk_entries(backward.chunk);
  std::reverse(b_entries.begin(), b_entries.end());
  const auto f_count = static_cast<int64_t>(f_entries.size());
  const auto b_count = static_cast<int64_t>(b_entries.size());
  const auto begin_forward = [&](int64_t i) {
    const ChunkEntry& e = f_entries[static_cast<size_t>(i)];
    if (e.mtp >= 0) {
      grad_sync_->before_forward(mtp_unit(e.mtp), mtp_params(e.mtp).elements, std::nullopt);
      return;
    }
    std::optional<std::pair<int64_t, PerBuffer>> next;
    if (i + 1 < f_count && f_entries[static_cast<size_t>(i + 1)].mtp < 0) {
      next = std::make_pair(e.layer + 1, params_.layer(e.layer + 1).elements);
    }
    grad_sync_->before_forward(e.layer, params_.layer(e.layer).elements, next);
  };
  const auto unit_of = [&](const ChunkEntry& e) -> UnitElements {
    if (e.mtp >= 0) return {mtp_unit(e.mtp), mtp_params(e.mtp).elements};
    return {e.layer, params_.layer(e.layer).elements};
  };
  const auto begin_backward = [&](int64_t i) {
    if (!grad_sync_->gathers_for_backward()) return;
    std::optional<UnitElements> next;
    if (i + 1 < b_count) next = unit_of(b_entries[static_cast<size_t>(i + 1)]);
    const UnitElements unit = unit_of(b_entries[static_cast<size_t>(i)]);
    grad_sync_->before_backward(unit.first, unit.second, next);
  };
  // A backward layer ends with its pre-dispatch node's deferred weight gradients, then its
  // gradients' reduction; the chunk's last layer's wait for the backward's send (Megatron-Core:
  // "Delay the last pre_dispatch_computation wgrad ... for overlapping with the p2p comm").
  std::optional<ChunkEntry> last_backward_entry;
  const auto reduce = [&](const ChunkEntry& e) {
    if (e.mtp >= 0) {
      grad_sync_->after_backward(mtp_unit(e.mtp), mtp_params(e.mtp), last_mb);
    } else {
      grad_sync_->after_backward(e.layer, params_.layer(e.layer), last_mb);
    }
  };
  const auto end_backward = [&](int64_t i) {
    const ChunkEntry& e = b_entries[static_cast<size_t>(i)];
    if (i == b_count - 1) {
      last_backward_entry = e;
      return;
    }
    deferred_weight_gradients();
    reduce(e);
  };
  const auto fnode = [&](uint16_t stream, Node node, int64_t i) {
    entry_node(f, stream, node, false, f_entries[static_cast<size_t>(i)]);
  };
  const auto bnode = [&](uint16_t stream, Node node, int64_t i) {
    entry_node(b, stream, node, true, b_entries[static_cast<size_t>(i)]);
  };
  const int64_t pairs = std::min(f_count, b_count);
  for (int64_t i = 0; i < pairs; ++i) {
    begin_backward(i);
    mtp_post_process(b, true, b_entries[static_cast<size_t>(i)]);
    bnode(kEpComm, Node::kCombine, i);
    begin_forward(i);
    fnode(kCompute, Node::kPreDispatch, i);
    bnode(kCompute, Node::kMlp, i);
    fnode(kEpComm, Node::kDispatch, i);
    deferred_weight_gradients();  // b_layer.mlp.backward_dw
    bnode(kEpComm, Node::kDispatch, i);
    fnode(kCompute, Node::kMlp, i);
    fnode(kEpComm, Node::kCombine, i);
    bnode(kCompute, Node::kPreDispatch, i);
    mtp_post_process(f, false, f_entries[static_cast<size_t>(i)]);
    end_backward(i);
  }
  // Chunks of unequal layer counts: the backward's remaining layers, then the forward's.
  for (int64_t i = pairs; i < b_count; ++i) {
    begin_backward(i);
    mtp_post_process(b, true, b_entries[static_cast<size_t>(i)]);
    bnode(kEpComm, Node::kCombine, i);
    bnode(kCompute, Node::kMlp, i);
    deferred_weight_gradients();
    bnode(kEpComm, Node::kDispatch, i);
    bnode(kCompute, Node::kPreDispatch, i);
    end_backward(i);
  }
  for (int64_t i = pairs; i < f_count; ++i) {
    begin_forward(i);
    fnode(kCompute, Node::kPreDispatch, i);
    fnode(kEpComm, Node::kDispatch, i);
    fnode(kCompute, Node::kMlp, i);
    fnode(kEpComm, Node::kCombine, i);
    mtp_post_process(f, false, f_entries[static_cast<size_t>(i)]);
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
  if (last_backward_entry) {
    deferred_weight_gradients();
    reduce(*last_backward_entry);
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

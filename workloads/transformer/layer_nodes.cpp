// A decoder layer cut into the four nodes of Megatron-Core's combined 1F1B schedule
// (moe.a2a_overlap; combined_1f1b.cpp), as megatron/core/models/gpt/fine_grained_callables.py
// (build_transformer_layer_callables, Megatron-LM d98e8a6) cuts it: pre-dispatch computation,
// dispatch, experts, combine. Each node's ops are the ones LayerEmitter emits for the layer in
// one piece (layer_emitter.cpp, moe_emitter.cpp), in the order the node runs them; the caller
// puts a node on its stream.
#include <stdexcept>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::layer_node(LayerNode node, bool backward, int64_t layer) {
  if (config_.layer_kernels == LayerKernelSet::kTorchtitan || config_.moe.shared_expert_overlap ||
      config_.moe.dispatcher == MoeDispatcher::kAllGather) {
    throw std::logic_error("layer_node: the config refuses moe.a2a_overlap with this layer");
  }
  // Megatron-Core's backward_dw callables: the kMlp node's (layer.mlp) and the kPreDispatch
  // node's (the attention's and the shared experts').
  deferring_ = backward && config_.moe.delay_wgrad &&
               (node == LayerNode::kMlp || node == LayerNode::kPreDispatch);
  emit_layer_node(node, backward, layer);
  deferring_ = false;
}

void LayerEmitter::emit_layer_node(LayerNode node, bool backward, int64_t layer) {
  // Transformer Engine's partial graphs (cuda_graph_scope attn, moe_router, moe_preprocess; the
  // config refuses the whole layer, mlp and moe beside the combined schedule): the pre-dispatch
  // node replays the layer's graphed callables (fine_grained_callables.py,
  // submodule_pre_dispatch_forward: _te_cuda_graph_replay), one graph for the attention and the
  // router (with the dispatcher's preprocess) where both are captured, the rest eagerly.
  const bool attn_graph = config_.cuda_graphs && config_.cuda_graph_scope.attn;
  const bool router_graph = config_.cuda_graphs && config_.cuda_graph_scope.moe_router;
  if (!config_.is_moe_layer(layer)) {
    // A dense layer: the attention, then the norm, MLP and residual add; no communication node.
    if (node == LayerNode::kPreDispatch) {
      if (attn_graph) ops_.begin_capture();
      if (backward) {
        attention_backward(layer);
      } else {
        attention_forward(layer);
      }
      if (attn_graph) ops_.end_capture(kGraphReplay);
    } else if (node == LayerNode::kMlp) {
      if (backward) {
        mlp_backward(layer);
      } else {
        mlp_forward(layer);
      }
    }
    return;
  }
  if (backward) {
    // The router graph's backward (begun inside moe_node_backward) goes on into the
    // attention's where both are captured.
    moe_node_backward(node);
    if (node == LayerNode::kPreDispatch) {
      if (ops_.capturing() && !attn_graph) ops_.end_capture(kGraphReplay);
      if (attn_graph && !ops_.capturing()) ops_.begin_capture();
      attention_backward(layer);
      if (ops_.capturing()) ops_.end_capture(kGraphReplay);
    }
    return;
  }
  if (node == LayerNode::kPreDispatch) {
    if (attn_graph) ops_.begin_capture();
    attention_forward(layer);
    if (ops_.capturing() && !router_graph) ops_.end_capture(kGraphReplay);
    if (router_graph && !ops_.capturing()) ops_.begin_capture();
  }
  moe_node_forward(node);
}

void LayerEmitter::moe_node_forward(LayerNode node) {
  const LayerKernels& d = kernels_;
  const bool flex = config_.moe.dispatcher == MoeDispatcher::kFlex;
  const bool hybrid = flex && config_.moe.flex_backend == FlexBackend::kHybridEp;
  // Dropless, the all-to-all's split sizes are needed on the host before the dispatch; with a
  // capacity factor, before the first permutation (token_dispatcher.py, cuda_sync_point).
  const bool counts = !flex && !config_.moe.pad_to_capacity;
  const bool sync_before_permute = counts && config_.moe.capacity_factor > 0.0;
  switch (node) {
    case LayerNode::kPreDispatch: {
      pre_mlp_norm_forward();
      if (config_.moe.shared_experts > 0) shared_experts_forward();
      router_forward();
      // A moe_router graph (emit_layer_node began it) ends here, with the dispatcher's
      // preprocess in it under moe_preprocess; the counts then leave for the host after it.
      const bool preprocessed = ops_.capturing() && moe_router_graph_end();
      // DeepEP's setup_metadata (dispatch_preprocess): the routing's top-k token indices.
      if (flex && !hybrid && !preprocessed) ops_.op("aten::topk", "flex_topk", d.topk);
      if (counts) {
        expert_counts_to_host(preprocessed);
        if (sync_before_permute) host_waits_for_counts_copy();
      }
      if (!flex && !preprocessed) ops_.op("moe_permute", "permute", d.permute);
      return;
    }
    case LayerNode::kDispatch:
      if (flex) {
        flex_dispatch(false);
        return;
      }
      if (counts && !sync_before_permute) host_waits_for_counts_copy();
      expert_all_to_all(false);
      expert_probs_all_to_all(false);
      return;
    case LayerNode::kMlp:
      if (flex) {
        ops_.op("moe_permute", "permute", d.permute);
      } else {
        expert_tp_all_gather(false);
      }
      routed_experts_forward();
      if (flex) {
        ops_.op("moe_unpermute", "unpermute", d.unpermute);
      } else {
        expert_tp_reduce_scatter(false);
      }
      return;
    case LayerNode::kCombine:
      if (flex) {
        flex_collective("combine", flex_op("deep_ep::combine", "hybrid_ep::combine"),
                        flex_.combine);
      } else {
        expert_all_to_all(true);
        ops_.op("moe_unpermute", "unpermute", d.unpermute);
      }
      ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
      return;
  }
}

bool LayerEmitter::defer_weight_gradient(std::string_view kernel, KernelDescId desc) {
  if (!deferring_) return false;
  deferred_.push_back({std::string(kernel), desc});
  return true;
}

void LayerEmitter::flush_weight_gradients() {
  for (const DeferredWeightGradient& w : deferred_)
    ops_.op("backward_dw", w.kernel, w.desc);
  deferred_.clear();
}

void LayerEmitter::moe_node_backward(LayerNode node) {
  const LayerKernels& d = kernels_;
  const bool flex = config_.moe.dispatcher == MoeDispatcher::kFlex;
  const RecomputeModules rerun = config_.selective_modules();
  switch (node) {
    case LayerNode::kCombine:
      residual_backward();
      if (flex) {
        flex_collective("dispatch", flex_op("FusedCombineBackward", "HybridEPCombineBackward"),
                        flex_.combine_grad);
      } else {
        ops_.op("MoeUnpermuteBackward", "unpermute_bwd", d.permute);
        expert_all_to_all(false);
      }
      return;
    case LayerNode::kMlp:
      if (flex) {
        ops_.op("MoeUnpermuteBackward", "unpermute_bwd", d.permute);
      } else {
        expert_tp_all_gather(true);
      }
      routed_experts_backward();
      if (flex) {
        ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
      } else {
        expert_tp_reduce_scatter(true);
      }
      return;
    case LayerNode::kDispatch:
      if (flex) {
        flex_collective("combine", flex_op("FusedDispatchBackward", "HybridEPDispatchBackward"),
                        flex_.dispatch_grad);
      } else {
        expert_all_to_all(true);
        expert_probs_all_to_all(true);
      }
      return;
    case LayerNode::kPreDispatch:
      // The moe_router graph's backward: from the first permutation's under moe_preprocess,
      // else from the router's (emit_layer_node ends it).
      if (config_.cuda_graphs && config_.cuda_graph_scope.moe_router &&
          config_.cuda_graph_scope.moe_preprocess && !flex) {
        ops_.begin_capture();
      }
      if (!flex) ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
      if (config_.cuda_graphs && config_.cuda_graph_scope.moe_router && !ops_.capturing()) {
        ops_.begin_capture();
      }
      // The pre-MLP norm's output feeds the router and the shared experts: rerun under
      // layernorm before their backward.
      if (rerun.layernorm) norm_forward();
      router_backward();
      if (config_.moe.shared_experts > 0) {
        if (rerun.shared_experts) shared_experts_forward();
        shared_experts_part(SharedExpertPart::kFc2Backward);
        shared_experts_part(SharedExpertPart::kFc1Backward);
      }
      norm_backward_and_residual_gradient();
      return;
  }
}

}  // namespace upsim::transformer_emit

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
  if (!config_.is_moe_layer(layer)) {
    // A dense layer: the attention, then the norm, MLP and residual add; no communication node.
    if (node == LayerNode::kPreDispatch) {
      if (backward) {
        attention_backward(layer);
      } else {
        attention_forward(layer);
      }
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
    moe_node_backward(node);
    if (node == LayerNode::kPreDispatch) attention_backward(layer);
    return;
  }
  if (node == LayerNode::kPreDispatch) attention_forward(layer);
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
    case LayerNode::kPreDispatch:
      if (config_.compile) {
        ops_.op("CompiledFunction", "triton_fused_add_norm", d.add_norm_fwd);
      } else {
        norm_forward();
      }
      if (config_.moe.shared_experts > 0) shared_experts_forward();
      ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "router"), d.router_fwd);
      ops_.op("aten::topk", "router_topk", d.topk);
      // DeepEP's setup_metadata (dispatch_preprocess): the routing's top-k token indices.
      if (flex && !hybrid) ops_.op("aten::topk", "flex_topk", d.topk);
      if (counts) {
        expert_counts_to_host();
        if (sync_before_permute) host_waits_for_counts_copy();
      }
      if (!flex) ops_.op("moe_permute", "permute", d.permute);
      return;
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
      fp8_cast(d.expert_fc1_in, false);
      ops_.op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc1"), d.expert_fc1_fwd);
      ops_.op(act_op(false), "activation_fwd", d.expert_act_fwd);
      fp8_cast(d.expert_fc2_in, false);
      ops_.op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc2"), d.expert_fc2_fwd);
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

void LayerEmitter::grouped_gemm_backward(KernelDescId dgrad, KernelDescId wgrad) {
  const std::string dgrad_name = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad_name = pytorch::gemm_kernel_name(gemm_dt_, "wgrad");
  if (defer_weight_gradient(wgrad_name, wgrad)) {
    ops_.op("GroupedGemmBackward", dgrad_name, dgrad);
    return;
  }
  ops_.op2("GroupedGemmBackward", dgrad_name, dgrad, wgrad_name, wgrad);
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
      fp8_cast(d.expert_fc2_dy, true);
      grouped_gemm_backward(d.expert_fc2_dgrad, d.expert_fc2_wgrad);
      if (rerun.moe_act) ops_.op(act_op(false), "activation_fwd", d.expert_act_fwd);
      ops_.op(act_op(true), "activation_bwd", d.expert_act_bwd);
      fp8_cast(d.expert_fc1_dy, true);
      grouped_gemm_backward(d.expert_fc1_dgrad, d.expert_fc1_wgrad);
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
      if (!flex) ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
      // The pre-MLP norm's output feeds the router and the shared experts: rerun under
      // layernorm before their backward.
      if (rerun.layernorm) norm_forward();
      ops_.op("TopkBackward", "router_topk_bwd", d.topk_bwd);
      ops_.op2("MmBackward0", pytorch::gemm_kernel_name(linear_dt_, "dgrad"), d.router_dgrad,
               pytorch::gemm_kernel_name(linear_dt_, "wgrad"), d.router_wgrad);
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

// A MoE layer's ops as torchtitan's MoE module runs them (layer_kernels torchtitan with moe; the
// kernels and their sources: torchtitan_moe.h), between the pre-MLP norm and the residual add.
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::torchtitan_moe_forward() {
  const LayerKernels& d = kernels_;
  const TorchtitanMoeKernels& k = d.torchtitan_moe;
  const MoeConfig& m = config_.moe;
  // TokenChoiceTopKRouter and TokenReorderer.
  ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "router"), d.router_fwd);
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_router_scores", k.router_scores);
  } else {
    ops_.op("aten::_to_copy", "cast_to_fp32", k.score_cast);
    ops_.op("aten::sigmoid", "router_sigmoid", k.score_act);
    ops_.op("aten::add", "expert_bias_add", k.bias_add);
  }
  ops_.op("aten::topk", "router_topk", k.topk);
  ops_.op("aten::histc", "router_histc", k.histc);
  ops_.op("aten::histc", "reorderer_histc", k.histc);
  ops_.op("aten::sort", "reorderer_argsort", k.argsort);
  // x[token_indices_experts_sorted // top_k], then the scores applied to the routed slots.
  ops_.op("aten::index", "slot_gather", k.slot_gather);
  if (m.score_before_experts) {
    if (config_.compile) {
      ops_.op("CompiledFunction", "triton_fused_score_scale", k.score_scale);
    } else {
      ops_.op("aten::_to_copy", "cast_to_fp32", k.slot_upcast);
      ops_.op("aten::mul", "score_mul", k.score_mul);
      ops_.op("aten::_to_copy", "cast_from_fp32", k.slot_downcast);
    }
  }
  if (config_.parallelism.expert > 1) torchtitan_moe_split_sync();
  expert_all_to_all(false);
  // _permute: vstack with a zero row, then the rows gathered in local-expert order, padded.
  ops_.op("aten::cat", "permute_vstack", k.rows_copy);
  ops_.op("aten::index", "permute_gather", k.rows_gather);
  const std::string grouped = "aten::_grouped_mm";
  ops_.op(grouped, pytorch::gemm_kernel_name(gemm_dt_, "expert_w1"), k.w13_fwd);
  if (!config_.compile) ops_.op("aten::silu", "silu_fwd", k.silu_fwd);
  ops_.op(grouped, pytorch::gemm_kernel_name(gemm_dt_, "expert_w3"), k.w13_fwd);
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_silu_mul", k.silu_fwd);
  } else {
    ops_.op("aten::mul", "gate_mul", k.gate_mul);
  }
  ops_.op(grouped, pytorch::gemm_kernel_name(gemm_dt_, "expert_w2"), k.w2_fwd);
  // _unpermute: index_put of the rows into the vstack's shape.
  ops_.op("aten::index_put_", "unpermute_scatter", k.rows_scatter);
  expert_all_to_all(true);
  if (m.shared_experts > 0) torchtitan_shared_experts_forward();
  // The slots back in token order, then each token's top_k rows combined.
  ops_.op("aten::zeros", "slot_zeros", k.slot_zeros);
  ops_.op("aten::index_put_", "slot_scatter", k.slot_scatter);
  if (m.score_before_experts) {
    ops_.op("aten::sum", "topk_sum", k.slot_sum);
  } else {
    ops_.op("aten::_to_copy", "cast_to_fp32", k.combine_upcast);
    ops_.op("aten::bmm", "score_combine_bmm", k.combine_bmm);
    ops_.op("aten::_to_copy", "cast_from_fp32", k.combine_downcast);
  }
  if (m.shared_experts > 0) ops_.op("aten::add", "shared_add", k.token_add);
}

void LayerEmitter::torchtitan_moe_backward() {
  const LayerKernels& d = kernels_;
  const TorchtitanMoeKernels& k = d.torchtitan_moe;
  const MoeConfig& m = config_.moe;
  const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(config_.wgrad_dtype(), "wgrad");
  // The shared experts' branch was created last: its backward runs first.
  if (m.shared_experts > 0) torchtitan_shared_experts_backward();
  // The combine's backward: the sum's is a view; the bmm's gives the slots' and the scores'
  // gradients. index_put's gradient to its values is a gather.
  if (!m.score_before_experts) {
    ops_.op("ToCopyBackward0", "cast_to_fp32", k.combine_downcast);
    ops_.op("BmmBackward0", "score_combine_bmm_bwd", k.combine_bmm_bwd);
    ops_.op("BmmBackward0", "score_grad_reduce", k.combine_score_grad);
    ops_.op("ToCopyBackward0", "cast_from_fp32", k.combine_upcast);
  }
  ops_.op("IndexPutBackward0", "slot_gather", k.slot_scatter);
  expert_all_to_all(false);
  ops_.op("IndexPutBackward0", "unpermute_gather", k.rows_gather);
  const std::string grouped = "GroupedMmBackward0";
  ops_.op2(grouped, dgrad, k.w2_dgrad, wgrad, k.w2_wgrad);
  if (config_.compile) {
    ops_.op("CompiledFunctionBackward", "triton_fused_silu_mul_bwd", k.silu_bwd);
  } else {
    // The product's gradients to both factors, then silu's backward.
    ops_.op("MulBackward0", "gate_mul", k.gate_mul);
    ops_.op("MulBackward0", "gate_mul", k.gate_mul);
  }
  ops_.op2(grouped, dgrad, k.w13_dgrad, wgrad, k.w13_wgrad);
  if (!config_.compile) ops_.op("SiluBackward0", "silu_bwd", k.silu_bwd);
  ops_.op2(grouped, dgrad, k.w13_dgrad, wgrad, k.w13_wgrad);
  ops_.op("AddBackward0", "input_grad_add", k.rows_grad_add);
  // _permute's gather: its gradient accumulated into zeros of the vstack's shape.
  ops_.op("IndexBackward0", "permute_zeros", k.rows_zeros);
  ops_.op("IndexBackward0", "permute_scatter_add", k.rows_scatter_add);
  expert_all_to_all(true);
  if (m.score_before_experts) {
    if (config_.compile) {
      ops_.op("CompiledFunctionBackward", "triton_fused_score_scale_bwd", k.score_scale_bwd);
    } else {
      ops_.op("ToCopyBackward0", "cast_to_fp32", k.slot_downcast);
      ops_.op("MulBackward0", "score_mul", k.score_mul);
      ops_.op("ToCopyBackward0", "cast_from_fp32", k.slot_upcast);
    }
    ops_.op("MulBackward0", "score_grad_reduce", k.score_grad_reduce);
  }
  // x[indices]'s gradient: the slots' gradients accumulated into zeros of the tokens.
  ops_.op("IndexBackward0", "token_zeros", k.token_zeros);
  ops_.op("IndexBackward0", "token_scatter_add", k.token_scatter_add);
  // The router: the top scores' gather, sigmoid (and the cast), the gate.
  ops_.op("GatherBackward0", "score_scatter", k.score_scatter);
  ops_.op("SigmoidBackward0", "router_sigmoid_bwd", k.score_act_bwd);
  if (k.score_cast_bwd != 0) ops_.op("ToCopyBackward0", "cast_from_fp32", k.score_cast_bwd);
  ops_.op2("MmBackward0", pytorch::gemm_kernel_name(linear_dt_, "dgrad"), d.router_dgrad,
           pytorch::gemm_kernel_name(linear_dt_, "wgrad"), d.router_wgrad);
  // The token gradients of the routed path and the router's, then the shared experts'.
  ops_.op("AddBackward0", "input_grad_add", k.token_add);
  if (m.shared_experts > 0) ops_.op("AddBackward0", "input_grad_add", k.token_add);
}

void LayerEmitter::torchtitan_moe_split_sync() {
  // all_to_all_single of num_tokens_per_expert (one count per expert), the splits' copy to the
  // host and .tolist(): the host waits for the GPU (ExpertParallel._token_dispatch).
  // Each EP rank sends every peer the counts of the peer's experts.
  constexpr int64_t kCountBytes = 8;
  const int64_t ep = config_.parallelism.expert;
  const int64_t per_peer = config_.moe.experts / ep * kCountBytes;
  ops_.blocking(groups_.expert, CollectiveKind::kAllToAll, 0, "all_to_all",
                "c10d::all_to_all_single",
                std::vector<int64_t>(static_cast<size_t>(ep * ep), per_peer));
  HostOp h = ops_.host_op("aten::to");
  h.copy("Memcpy DtoH (Device -> Pinned)", TransferKind::kDeviceToHost,
         2 * config_.parallelism.expert * kCountBytes);
  h.end();
  if (ops_.capturing()) {
    throw std::logic_error(
        "transformer generator: torchtitan's expert-parallel split sync inside a CUDA graph "
        "capture");
  }
  ops_.graph().add_host_sync(ops_.threads().rank, kCpuThread, kCompute, "cudaStreamSynchronize");
}

void LayerEmitter::torchtitan_shared_experts_forward() {
  const TorchtitanMoeKernels& k = kernels_.torchtitan_moe;
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_w1"), k.shared_w13_fwd);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_w3"), k.shared_w13_fwd);
  silu_mul_forward(k.shared_silu_fwd, k.shared_gate_mul);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_w2"), k.shared_w2_fwd);
}

void LayerEmitter::torchtitan_shared_experts_backward() {
  const TorchtitanMoeKernels& k = kernels_.torchtitan_moe;
  const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(config_.wgrad_dtype(), "wgrad");
  ops_.op2("MmBackward0", dgrad, k.shared_w2_dgrad, wgrad, k.shared_w2_wgrad);
  silu_mul_backward(k.shared_silu_bwd, k.shared_gate_mul);
  ops_.op2("MmBackward0", dgrad, k.shared_w13_dgrad, wgrad, k.shared_w13_wgrad);
  ops_.op2("MmBackward0", dgrad, k.shared_w13_dgrad, wgrad, k.shared_w13_wgrad);
  ops_.op("AddBackward0", "input_grad_add", k.token_add);
}

}  // namespace upsim::transformer_emit

// The kernels of a mixture-of-experts layer as torchtitan runs it (layer_kernels: torchtitan,
// moe: {...}), from pytorch/torchtitan at 018740b7aae7846d24954539244c78215dbd181f:
// torchtitan/models/moe/moe.py (TokenChoiceTopKRouter, TokenReorderer, GroupedExperts,
// _run_experts_grouped_mm, MoE.forward, FeedForward), torchtitan/models/moe/utils.py
// (_permute, _unpermute, indices_padding_wrapper) and torchtitan/distributed/expert_parallel.py
// (ExpertParallel._token_dispatch / _token_combine). Per MoE layer, forward:
//  - router: the gate nn.Linear (tokens x experts), the scores cast to fp32 and their sigmoid,
//    the expert bias added (load_balance_coeff's aux-loss-free balancing, on by default), topk,
//    then torch.histc of the chosen experts (router and reorderer: two) and a stable argsort of
//    the routed slots (tokens x top_k);
//  - dispatch: x[token_indices // top_k], the routed slots gathered; with score_before_experts
//    (MoEArgs' default) the slots cast to fp32, multiplied by their scores and cast back;
//  - expert parallel (parallelism.expert > 1): all_to_all_single of the token counts, their
//    .tolist() (a device-to-host sync), then the slots' all-to-all; one rank or many, _permute
//    pads every local expert's group to a multiple of 8 rows (vstack's copy of the received
//    rows, then their gather in expert order) without a host sync;
//  - experts: torch._grouped_mm for w1 and w3 (two grouped GEMMs on the same rows, not one
//    fused), silu and the gate product, w2; _unpermute scatters the rows back; the combine
//    all-to-all;
//  - combine: a zeros buffer of the slots, index_put of the experts' rows, and their sum over
//    top_k (score_before_experts), or with scores after the experts their fp32 cast, a bmm with
//    the scores and a cast back;
//  - shared experts: FeedForward (w1, w3, w2 nn.Linears, silu, the product), its output added.
// The backward runs each op's autograd formula: index_put's and index's gradients are a gather
// and an accumulating index_put into zeros, the score multiply's gives the slots' gradient and
// the scores' (a reduction over the hidden width), _grouped_mm's a grouped data-gradient and a
// grouped weight-gradient GEMM. torch.compile fuses the elementwise chains (the router's cast,
// sigmoid and bias; the score multiply with its casts; silu and the product), not the index
// ops, sorts, histograms and grouped GEMMs.
// Before the optimizer step, the load balancing's expert-bias update (transformer_emitter.h,
// expert_bias_update). Not modelled, refused at their keys (transformer_config.cpp): tensor
// parallel over the MoE layers (ExpertTensorParallel), float8 grouped GEMMs, per-op
// checkpointing; DeepEP and node-limited routing have no key.
#pragma once

#include <cstdint>

#include "sim/task_graph.h"

namespace upsim {

struct LayerSizes;
struct TransformerConfig;

struct TorchtitanMoeKernels {
  // Router. Eager: the scores' cast, sigmoid and the bias's add; compiled: router_scores, one
  // kernel for the three. histc over the slots; the argsort's radix passes as one kernel.
  KernelDescId score_cast = 0, score_act = 0, bias_add = 0, router_scores = 0;
  KernelDescId topk = 0, histc = 0, argsort = 0;
  // Backward: the top scores' gather's (zeros and a scatter into the scores), sigmoid's (and
  // the cast's, eager; compiled: one kernel, score_cast_bwd 0).
  KernelDescId score_scatter = 0, score_act_bwd = 0, score_cast_bwd = 0;
  // Dispatch: the slots' gather (index), the score multiply (eager: cast up, multiply, cast
  // down; compiled: score_scale); its backward (eager: the gradient's cast up, its product with
  // the scores, the scores' reduction, the cast down; compiled: score_scale_bwd and the
  // reduction).
  KernelDescId slot_gather = 0;
  KernelDescId slot_upcast = 0, score_mul = 0, slot_downcast = 0, score_scale = 0;
  KernelDescId score_grad_reduce = 0, score_scale_bwd = 0;
  // The backward of the slots' gather: a zeros buffer of the tokens and the accumulating
  // index_put of the slots' gradients.
  KernelDescId token_zeros = 0, token_scatter_add = 0;
  // _permute / _unpermute on the rows this rank's experts receive: vstack's copy and the padded
  // gather; the scatter back; the gather's backward (zeros and an accumulating index_put).
  KernelDescId rows_copy = 0, rows_gather = 0, rows_scatter = 0, rows_zeros = 0,
               rows_scatter_add = 0;
  // Grouped experts: w1 and w3 (same shape), w2; silu and the product (eager) or the fused
  // silu-mul (compiled: silu_fwd / silu_bwd); the two dgrads' sum.
  KernelDescId w13_fwd = 0, w13_dgrad = 0, w13_wgrad = 0;
  KernelDescId w2_fwd = 0, w2_dgrad = 0, w2_wgrad = 0;
  KernelDescId silu_fwd = 0, silu_bwd = 0, gate_mul = 0, rows_grad_add = 0;
  // Combine: the slots' zeros and index_put, the sum over top_k (or, scores after the experts,
  // the fp32 cast, the bmm with the scores and the cast back; and their backward).
  KernelDescId slot_zeros = 0, slot_scatter = 0, slot_sum = 0;
  KernelDescId combine_upcast = 0, combine_bmm = 0, combine_downcast = 0;
  KernelDescId combine_bmm_bwd = 0, combine_score_grad = 0;
  // Shared experts (FeedForward over every token): w1 / w3, w2, silu and the product; the
  // shared output's add; the tokens' gradient adds (shared and router paths).
  KernelDescId shared_w13_fwd = 0, shared_w13_dgrad = 0, shared_w13_wgrad = 0;
  KernelDescId shared_w2_fwd = 0, shared_w2_dgrad = 0, shared_w2_wgrad = 0;
  KernelDescId shared_silu_fwd = 0, shared_silu_bwd = 0, shared_gate_mul = 0;
  KernelDescId token_add = 0;
};

/// Bytes one MoE layer keeps for its backward beyond Megatron-Core's MoE layer
/// (transformer_memory.h), per micro-batch on one GPU: the score multiply's saved copy of the
/// routed slots (tokens x top_k x hidden), in fp32 eager (autograd's mul saves its fp32
/// operand, the cast's output; with scores after the experts, the bmm's) or in the activation
/// dtype compiled (Inductor's partition saves the cast's input). 0 for any other model.
int64_t torchtitan_moe_extra_activation_bytes(const TransformerConfig& config);

/// Adds the descriptions for `config` (layer_kernels torchtitan with moe.experts) on a rank
/// with `sizes`.
TorchtitanMoeKernels add_torchtitan_moe_kernels(const TransformerConfig& config,
                                                const LayerSizes& sizes, TaskGraph& graph);

}  // namespace upsim

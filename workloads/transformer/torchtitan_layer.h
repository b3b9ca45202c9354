// The kernels of a layer as torchtitan's Llama model runs it in PyTorch (layer_kernels:
// torchtitan; pytorch/torchtitan, torchtitan/models/llama3/model/model.py at
// 018740b7aae7846d24954539244c78215dbd181f, Attention, FeedForward, apply_rotary_emb,
// repeat_kv), against Megatron-Core with Transformer Engine's fused modules:
//  - wq, wk and wv are three nn.Linear GEMMs on the same input (TE: one QKV GEMM), and w1 and
//    w3 two (TE: one fc1 GEMM of gate and up); autograd sums their input gradients (one add
//    per extra consumer) before tensor parallel's reduction of the replicated input;
//  - apply_rotary_emb: xq.float() and xk.float() (casts to fp32), view_as_complex, a complex
//    multiply by freqs_cis, view_as_real, type_as (casts back): three kernels each for q and
//    k, and three again in the backward (the gradient's cast up, the multiply by the
//    conjugate, the cast down); compiled (torch.compile per block), Inductor fuses the chain:
//    one rotary kernel each way, as the fused pricing;
//  - repeat_kv (n_kv_heads < n_heads): expand then reshape, a copy of K and of V to n_heads
//    heads before SDPA; its backward sums the copies' gradients back (a reduction each);
//  - the attention output's transpose(1, 2).contiguous(): a copy, and one of its gradient
//    before the fused attention's backward;
//  - F.silu(w1(x)) * w3(x): a silu and a mul kernel (TE: one fused SwiGLU), in the backward
//    the mul's two products and silu's backward; compiled, one kernel each way.
// Torchtitan's RMSNorm is nn.RMSNorm, one fused kernel each way from PyTorch 2.9
// (aten::_fused_rms_norm), as the fused pricing. Before (rms_norm_kernel: composite), eager
// nn.RMSNorm runs ATen's CompositeImplicit rms_norm (aten/src/ATen/native/layer_norm.cpp,
// rms_norm_symint, PyTorch 2.4-2.8): input.to(float), pow(2), mean over the hidden dimension,
// add_(eps), rsqrt, the multiply by it and by the weight, type_as(input); the backward is
// autograd's through those ops: the casts' (ToCopyBackward0), both multiplies' (each operand's
// gradient, the weight's summed over the tokens, rsqrt's over the hidden dimension), rsqrt's,
// mean's (the gradient spread over the row), pow's, and the sum of the two paths into the
// upcast input.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"

namespace upsim {

struct LayerSizes;
struct TransformerConfig;

/// One eager op of the composite RMSNorm: its name, its kernel's and the description.
struct NamedKernel {
  std::string_view op;
  std::string_view kernel;
  KernelDescId desc = 0;
};

/// The kernel descriptions torchtitan's modules add to a layer's (LayerKernels::torchtitan; the
/// output projection w2 / wo, norms, attention and residual adds are the layer's own).
struct TorchtitanLayerKernels {
  KernelDescId wq_fwd = 0, wq_dgrad = 0, wq_wgrad = 0;
  /// wk and wv (the same shape).
  KernelDescId wkv_fwd = 0, wkv_dgrad = 0, wkv_wgrad = 0;
  /// w1 and w3 (the same shape: hidden -> ffn / tensor).
  KernelDescId w13_fwd = 0, w13_dgrad = 0, w13_wgrad = 0;
  /// Eager rotary (not compiled, rotary positions): per q and k the cast to fp32, the complex
  /// multiply, the cast back (no casts: 0, with fp32 activations); the backward runs the same
  /// shapes.
  KernelDescId q_upcast = 0, q_rotate = 0, q_downcast = 0;
  KernelDescId k_upcast = 0, k_rotate = 0, k_downcast = 0;
  /// repeat_kv's copy of K or V to the query heads and its backward's sum (0: no repeat).
  KernelDescId repeat_kv = 0, repeat_kv_bwd = 0;
  /// The attention output's transpose copy (forward), its gradient's (backward).
  KernelDescId transpose_copy = 0;
  /// silu and the gate product, forward and backward (eager), or the compiled SwiGLU.
  KernelDescId silu_fwd = 0, silu_bwd = 0, gate_mul = 0;
  /// Autograd's sum of two input gradients of a replicated input (tokens x hidden).
  KernelDescId input_grad_add = 0;
  /// Async TP (parallelism.async_tp; all 0 without): the matmuls on one rank's token shard
  /// (sp_tokens rows) that symmetric memory's pipelines run once per shard: wq, wk / wv and
  /// w1 / w3 forward, wo's and w2's forward (the output chunk for one peer) and dgrad; the copy
  /// of the local shard (into the symmetric-memory buffer, and into the gathered output kept
  /// for the wgrad); the sum of the tensor-parallel partial outputs of a matmul +
  /// reduce-scatter (symmetric memory's reduce kernel: reads every partial, writes one).
  KernelDescId wq_fwd_chunk = 0, wkv_fwd_chunk = 0, w13_fwd_chunk = 0;
  KernelDescId wo_fwd_chunk = 0, w2_fwd_chunk = 0, wo_dgrad_chunk = 0, w2_dgrad_chunk = 0;
  KernelDescId shard_copy = 0, partial_sum = 0;
  /// The composite RMSNorm's ops (rms_norm_kernel composite; empty otherwise), forward and
  /// backward in order, on the norm's rows (the sequence shard under sequence parallel).
  std::vector<NamedKernel> rms_norm_fwd, rms_norm_bwd;
};

/// F.silu(a) * b over `elements` (a's) as torchtitan's modules run it: compiled, Inductor's one
/// fused kernel each way (fwd, bwd; mul 0); eager, silu and its backward on one input, and the
/// gate's multiply (mul).
struct SiluMulKernels {
  KernelDescId fwd = 0, bwd = 0, mul = 0;
};
SiluMulKernels add_silu_mul_kernels(const TransformerConfig& config, double elements,
                                    TaskGraph& graph);

/// Adds the descriptions for `config` (layer_kernels torchtitan) on a rank with `sizes`.
TorchtitanLayerKernels add_torchtitan_layer_kernels(const TransformerConfig& config,
                                                    const LayerSizes& sizes, TaskGraph& graph);

/// Bytes one layer keeps for its backward beyond the fused layer's (transformer_memory.h), per
/// micro-batch on one GPU: SDPA saves K and V after repeat_kv, at the query heads' width; the
/// composite RMSNorm keeps two fp32 tensors of its rows in place of its input.
int64_t torchtitan_extra_activation_bytes(const TransformerConfig& config);

}  // namespace upsim

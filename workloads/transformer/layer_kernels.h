// The kernels of one transformer layer on one GPU: the per-GPU sizes of a micro-batch and the
// kernel descriptions every layer, micro-batch and rank shares (GEMMs of the linear layers,
// attention (flash, unfused, ring steps), norms, activations, MoE router / permutation / grouped
// expert GEMMs, embedding and the vocab-parallel output layer with its cross-entropy).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/transformer/autocast.h"
#include "workloads/transformer/relative_bias.h"
#include "workloads/transformer/task_head_kernels.h"
#include "workloads/transformer/torchao_float8.h"
#include "workloads/transformer/torchtitan_layer.h"
#include "workloads/transformer/torchtitan_moe.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// Splits of Transformer Engine's pipelined GEMM + reduce-scatter overlap (num_splits 4 in
/// initialize_ub's defaults for the `pipeline` method).
constexpr int64_t kTpOverlapSplits = 4;

/// Work per element of a memory-bound kernel: arithmetic operations, and elements read and
/// written (in units of the activation's element size).
struct PerElement {
  double flops = 0;
  double reads = 0;
  double writes = 0;
};
/// A norm forward: one read and one write per element (Lin et al., TPDS 2024); its backward
/// reads the input and the output gradient (and the saved statistics), writes the input
/// gradient.
inline constexpr PerElement kNormForward{8, 1, 1};
inline constexpr PerElement kNormBackward{12, 2, 1};
/// The residual add after an attention or MLP block: a plain add, or Megatron's fused
/// bias-dropout-add (which also writes its mask); the add of the residual stream's two
/// gradients in the backward.
inline constexpr PerElement kResidualAdd{1, 2, 1};
inline constexpr PerElement kResidualDropoutAdd{3, 2, 2};
inline constexpr PerElement kResidualGradientAdd{1, 2, 1};

/// The memory-bound op family of `config`'s norm (layernorm or RMS norm).
inline MemoryOp norm_memory_op(const TransformerConfig& config) {
  return config.norm == TransformerNorm::kRmsNorm ? MemoryOp::kRmsNorm : MemoryOp::kLayerNorm;
}

/// Per-GPU sizes of one micro-batch (Megatron's notation: b micro-batch, s sequence on this
/// rank (seq / context), h hidden, t tensor parallel). With unpadded or packed samples b and s
/// are the attention's sequences (TransformerConfig::attention_sequences) and tokens the real
/// ones.
struct LayerSizes {
  int64_t b = 0;  ///< attention sequences
  int64_t s = 0;  ///< tokens per attention sequence on this rank
  int64_t h = 0;
  int64_t t = 1;
  /// The routed experts' tensor parallel (ParallelismConfig::expert_tensor_parallel): t or 1.
  int64_t et = 1;
  int64_t tokens = 0;     ///< rows of the GEMMs: b x s when padded
  int64_t sp_tokens = 0;  ///< tokens held between TP regions (tokens / t with SP)
  int64_t heads = 0;      ///< query heads on this rank
  int64_t kv_heads = 0;   ///< key/value heads on this rank (replicated when kv_heads < t)
  int64_t head_dim = 0;
  int64_t qkv_out = 0;     ///< the QKV GEMM's width (latent attention: its up projections')
  int64_t attn_out = 0;    ///< the output projection's input width: heads x head_dim (v_head_dim)
  int64_t ffn = 0;         ///< MLP inner width on this rank
  int64_t fc1_out = 0;     ///< ffn, doubled for SwiGLU's gate
  int64_t vocab = 0;       ///< padded vocabulary on this rank
  int64_t moe_tokens = 0;  ///< tokens routed by this rank's router
  int64_t vocab_rows = 0;  ///< rows through the vocabulary projection on this rank (task head)
  int64_t samples = 0;     ///< samples in the micro-batch (at least 1; the pooler's rows)
};

/// The quantisation of one fp8 GEMM operand (dtype fp8 only; `present` false otherwise), as
/// Transformer Engine runs it (docs/features/low_precision_training, FP8 Delayed / Current
/// Scaling): one cast kernel that reads the bf16 tensor once and writes its fp8 copy twice, row-
/// and column-wise (the forward GEMM reads one, the wgrad the other: TE's cast_transpose; MXFP8's
/// cast writes both), 2 + 2 bytes per element; current scaling first reads the tensor once more
/// for its amax (a reduction, 2 bytes per element). Left out: TE casts weights once per step
/// (cached over micro-batches, 2 + 2 bytes per parameter) and updates the amax histories and
/// scales in one small kernel per autocast context; TE's norm-fused casts (LayerNormLinear
/// writes its output in fp8) are priced as this separate cast.
struct Fp8Cast {
  bool present = false;
  bool amax_pass = false;  ///< current scaling
  KernelDescId amax = 0;
  KernelDescId cast = 0;
};

/// The casts around a reduce-scatter of hidden-state rows in the routing probabilities' dtype
/// (kRouterProbBytes; Megatron-Core's MoE combine sums in probs.dtype): the group's rows to it
/// before, the rank's share back after; in the backward their gradients, the same bytes.
struct ProbDtypeCasts {
  KernelDescId group_rows = 0;
  KernelDescId rank_rows = 0;
};

/// Kernel descriptions of one layer, shared by every layer, micro-batch and rank.
struct LayerKernels {
  KernelDescId norm_fwd, norm_bwd;
  KernelDescId qkv_fwd, qkv_dgrad, qkv_wgrad;
  KernelDescId rotary_fwd, rotary_bwd;
  KernelDescId attn_fwd, attn_bwd;
  /// The same in the sliding window (sliding_window > 0 only).
  KernelDescId attn_window_fwd, attn_window_bwd;
  std::vector<KernelDescId> attn_ring_fwd, attn_ring_bwd;  ///< CP steps 1.. (non-diagonal)
  /// Context parallel with context_comm all_gather: per CP rank, its two load-balanced query
  /// chunks' attention to the keys before them (forward, backward); a2a: the attention over the
  /// whole sequence on heads / context query and key/value heads.
  std::vector<std::array<KernelDescId, 2>> attn_gather_fwd, attn_gather_bwd;
  KernelDescId attn_a2a_fwd = 0, attn_a2a_bwd = 0;
  KernelDescId score_fwd, score_dgrad_q, score_dgrad_k;  ///< unfused q k^T
  KernelDescId softmax_fwd, softmax_bwd, attn_dropout_fwd, attn_dropout_bwd;
  KernelDescId av_fwd, av_dgrad_p, av_dgrad_v;  ///< unfused p v
  KernelDescId proj_fwd, proj_dgrad, proj_wgrad;
  KernelDescId residual_fwd, residual_bwd;
  KernelDescId fc1_fwd, fc1_dgrad, fc1_wgrad;
  KernelDescId act_fwd, act_bwd;
  KernelDescId fc2_fwd, fc2_dgrad, fc2_wgrad;
  KernelDescId grad_add;
  // Tensor-parallel overlap (parallelism.tp_comm_overlap only): the GEMMs on one ring-exchange
  // chunk of tokens (tokens / tensor rows) and on one of the pipelined GEMM + reduce-scatter's
  // 4 splits (tokens / 4 rows, rounded up).
  KernelDescId qkv_fwd_chunk, fc1_fwd_chunk, proj_dgrad_chunk, fc2_dgrad_chunk;
  KernelDescId proj_fwd_split, fc2_fwd_split;
  // torch.compile (TransformerConfig::compile only): compiled_fusion.h's fused kernels.
  KernelDescId add_norm_fwd = 0, norm_bwd_add = 0;
  // MoE
  KernelDescId router_fwd, router_dgrad, router_wgrad, topk, topk_bwd, permute, unpermute;
  KernelDescId expert_fc1_fwd, expert_fc1_dgrad, expert_fc1_wgrad;
  KernelDescId expert_act_fwd, expert_act_bwd;
  KernelDescId expert_fc2_fwd, expert_fc2_dgrad, expert_fc2_wgrad;
  KernelDescId shared_fc1_fwd, shared_fc1_dgrad, shared_fc1_wgrad;
  KernelDescId shared_act_fwd, shared_act_bwd;
  KernelDescId shared_fc2_fwd, shared_fc2_dgrad, shared_fc2_wgrad;
  /// moe.dispatcher allgather with expert parallel only: the zeros of the gathered shape
  /// (expert x the rank's tokens x hidden), and the casts around its reduce-scatter.
  KernelDescId moe_gathered_fill = 0;
  ProbDtypeCasts moe_ep_combine_casts;
  /// moe.dispatcher flex only: DeepEP's get_dispatch_layout (reads the [tokens, top_k] int64
  /// expert indices, writes is_token_in_rank [tokens, expert ranks] and the counts), or
  /// HybridEP's scan of the gathered routing map (metadata_preprocessing).
  KernelDescId flex_layout = 0;
  /// moe.dispatcher alltoall with tensor parallel only: the casts around the reduce-scatter of
  /// the tensor ranks' expert rows (tensor x moe_rank_rows x hidden).
  ProbDtypeCasts moe_tp_combine_casts;
  // fp8 quantisation of the fp8 GEMMs' inputs (forward) and output gradients (backward).
  Fp8Cast qkv_in, proj_in, fc1_in, fc2_in, qkv_dy, proj_dy, fc1_dy, fc2_dy;
  Fp8Cast expert_fc1_in, expert_fc2_in, expert_fc1_dy, expert_fc2_dy;
  Fp8Cast shared_fc1_in, shared_fc2_in, shared_fc1_dy, shared_fc2_dy;
  // Embedding and output layer.
  KernelDescId embed_fwd, embed_bwd, pos_add;
  KernelDescId head_fwd, head_dgrad, head_wgrad, xent_fwd, xent_bwd;
  /// Multi-token prediction (TransformerConfig::mtp_layers): the concatenation of the normalised
  /// embedding and hidden state (2 hidden per sequence-parallel token) and eh_proj, the column-
  /// parallel 2 hidden -> hidden linear.
  KernelDescId mtp_cat = 0, mtp_proj_fwd = 0, mtp_proj_dgrad = 0, mtp_proj_wgrad = 0;
  /// The eager cross-entropy (TaskHead::eager_loss): the cast to fp32, log_softmax, and in the
  /// backward nll_loss's gradient, log_softmax's and the cast back.
  KernelDescId logits_upcast = 0, log_softmax_fwd = 0, nll_grad = 0, log_softmax_bwd = 0,
               logits_downcast = 0;
  /// The task head's own kernels (mlm and classification heads).
  TaskHeadKernels task;
  /// torchtitan's modules' kernels (layer_kernels torchtitan only; torchtitan_layer.h).
  TorchtitanLayerKernels torchtitan;
  /// torchtitan's MoE layers' kernels (layer_kernels torchtitan with moe only;
  /// torchtitan_moe.h).
  TorchtitanMoeKernels torchtitan_moe;
  /// torchao's float8 casts (TransformerConfig::torchao_float8 only; torchao_float8.h).
  TorchaoFloat8Kernels float8;
  /// The per-head query and key norms (qk_norm only), forward and backward.
  KernelDescId q_norm_head_fwd = 0, q_norm_head_bwd = 0, k_norm_head_fwd = 0, k_norm_head_bwd = 0;
  /// T5's relative attention bias (position relative only; relative_bias.h).
  RelativeBiasKernels relative_bias;
  /// LoRA's adapters (lora enabled only; lora.h).
  LoraKernels lora{};
  // Latent attention (TransformerConfig::mla only; latent_attention.h): the down projections
  // (0 for the queries' when q_lora_rank is 0), the latents' RMSNorms, the up projections (the
  // queries' straight from the hidden state without a q latent).
  KernelDescId q_down_fwd = 0, q_down_dgrad = 0, q_down_wgrad = 0, q_norm_fwd = 0, q_norm_bwd = 0;
  KernelDescId q_up_fwd = 0, q_up_dgrad = 0, q_up_wgrad = 0;
  KernelDescId kv_down_fwd = 0, kv_down_dgrad = 0, kv_down_wgrad = 0, kv_norm_fwd = 0,
               kv_norm_bwd = 0;
  KernelDescId kv_up_fwd = 0, kv_up_dgrad = 0, kv_up_wgrad = 0;
  // torch.autocast (TransformerConfig::autocast only; autocast.h): the casts around the QKV,
  // output-projection, fc1 and fc2 GEMMs and the output layer.
  AutocastCasts qkv_cast, proj_cast, fc1_cast, fc2_cast, head_cast;
  // Per-op recompute (recompute: op only): torchtitan's separate wq, wk / wv and w1 / w3
  // projections (one GEMM each; the fused qkv_fwd and fc1_fwd stand for them in the forward).
  KernelDescId query_fwd = 0, key_value_fwd = 0, gate_fwd = 0;
};

/// The per-GPU sizes of one micro-batch of `config` (the vocabulary padded to 128 x tensor, as
/// Megatron-LM pads it).
LayerSizes layer_sizes(const TransformerConfig& config);

/// How the simulated rank's routed tokens fall to its `local` experts: the busiest EP rank's
/// rows (tokens_per_local_expert's), each expert keeping at most its capacity (capacity_factor
/// x the mean tokens per expert, Megatron-Core's get_capacity) when tokens are dropped. One
/// local expert computes all of them: a plain GEMM (routed 0).
GroupedRows moe_expert_rows(const TransformerConfig& config, const LayerSizes& sizes,
                            int64_t local);

/// Tokens each expert on the simulated EP rank processes per micro-batch: the busiest rank's
/// load (moe_busiest_rank_load) over its local experts.
int64_t tokens_per_local_expert(const TransformerConfig& config, const LayerSizes& sizes);
/// The rows one rank's local experts receive from its expert-parallel all-to-all (the busiest
/// rank's): local experts x tokens_per_local_expert; before the tensor ranks' all-gather.
int64_t moe_rank_rows(const TransformerConfig& config, const LayerSizes& sizes);

/// Bytes of one routing probability: the router's top-k runs in fp32 here (LayerKernels::topk;
/// Megatron-Core's moe_router_dtype fp32, which its MoE model providers set).
inline constexpr int64_t kRouterProbBytes = 4;
/// Bytes of one expert's token count (tokens_per_expert, int64).
inline constexpr int64_t kExpertCountBytes = 8;

/// Adds the kernel descriptions of one layer, the embedding and the output layer to `graph`, in
/// a fixed order (the descriptions' ids are part of the graph's identity).
LayerKernels add_layer_kernels(const TransformerConfig& config, const LayerSizes& sizes,
                               TaskGraph& graph);

}  // namespace upsim

// Multi-head latent attention (the `mla` key): DeepSeek-V2/V3's attention (DeepSeek-AI, arXiv
// 2405.04434 section 2.1, arXiv 2412.19437 section 2.1.1), as Megatron-Core's
// MLASelfAttention runs it in training (megatron/core/transformer/multi_latent_attention.py):
//   queries  x W_qa (hidden -> q_lora_rank), RMSNorm, W_qb (-> heads x (nope + rope)); or
//            x W_q directly when q_lora_rank is 0 (DeepSeek-V2-Lite)
//   keys and values  x W_kva (hidden -> kv_lora_rank + rope): the latent, RMSNorm'ed, and one
//            rotary key part shared by every head; W_kvb (latent -> heads x (nope + v))
//   rotary   on the queries' and the shared key's rope dimensions
//   attention  heads query and key/value heads (no grouping after the up projections), q.k over
//            nope + rope dimensions, values of v_head_dim
//   output   heads x v_head_dim -> hidden
// The down projections (W_qa, W_kva) and their norms are replicated over tensor parallel, the up
// projections split over the heads (column parallel), the output projection row parallel.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/config_node.h"

namespace upsim {

struct LatentAttentionConfig {
  int64_t q_lora_rank = 0;   ///< 0: queries projected directly
  int64_t kv_lora_rank = 0;  ///< 0: no latent attention (the layer's usual q, k, v)
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  /// One head's query / key width: nope + rope.
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  /// The head width that prices the attention core exactly: q.k costs 2 x qk_head_dim and p.v
  /// 2 x v_head_dim multiply-adds per query-key pair, as a head of their mean width would.
  int64_t attention_head_dim() const { return (qk_head_dim() + v_head_dim) / 2; }
};

/// Reads `mla:` (kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim required;
/// q_lora_rank default 0). Every value must be positive (q_lora_rank non-negative) and at most
/// 2^20; qk_head_dim() + v_head_dim must be even.
LatentAttentionConfig read_latent_attention(const ConfigNode& mla);

/// The parameter tensors of one layer's latent attention on one of `tensor` tensor-parallel
/// ranks, in forward order (element counts): W_qa and its RMSNorm gain (or W_q without a q
/// latent), W_qb, W_kva and its gain, W_kvb, W_o; the down projections and gains whole, the up
/// and output projections / tensor; for `heads` query heads and model width `hidden`; no
/// biases (DeepSeek's projections have none).
std::vector<int64_t> latent_attention_tensors(const LatentAttentionConfig& mla, int64_t hidden,
                                              int64_t heads, int64_t tensor);

/// latent_attention_tensors, summed.
int64_t latent_attention_parameters(const LatentAttentionConfig& mla, int64_t hidden, int64_t heads,
                                    int64_t tensor);

/// The matrix-multiply weights of one layer's latent attention, all ranks together: what each
/// token multiplies (Megatron's model FLOPs count 6 per weight and token).
int64_t latent_attention_matmul_weights(const LatentAttentionConfig& mla, int64_t hidden,
                                        int64_t heads);

}  // namespace upsim

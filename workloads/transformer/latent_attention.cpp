#include "workloads/transformer/latent_attention.h"

#include <fmt/format.h>

#include <numeric>

namespace upsim {

namespace {

constexpr int64_t kMaxWidth = int64_t{1} << 20;

}  // namespace

LatentAttentionConfig read_latent_attention(const ConfigNode& mla) {
  LatentAttentionConfig m;
  m.q_lora_rank = mla.get_int_in_or("q_lora_rank", 0, kMaxWidth, 0);
  m.kv_lora_rank = mla.get_int_in("kv_lora_rank", 1, kMaxWidth);
  m.qk_nope_head_dim = mla.get_int_in("qk_nope_head_dim", 1, kMaxWidth);
  m.qk_rope_head_dim = mla.get_int_in("qk_rope_head_dim", 1, kMaxWidth);
  m.v_head_dim = mla.get_int_in("v_head_dim", 1, kMaxWidth);
  if ((m.qk_head_dim() + m.v_head_dim) % 2 != 0) {
    mla.child("v_head_dim")
        .fail(fmt::format("qk_nope_head_dim + qk_rope_head_dim + v_head_dim = {} must be even (the "
                          "attention is priced at their mean head width)",
                          m.qk_head_dim() + m.v_head_dim));
  }
  return m;
}

std::vector<int64_t> latent_attention_tensors(const LatentAttentionConfig& m, int64_t hidden,
                                              int64_t heads, int64_t tensor) {
  const int64_t local_heads = heads / tensor;
  std::vector<int64_t> tensors;
  if (m.q_lora_rank > 0) {
    tensors = {hidden * m.q_lora_rank, m.q_lora_rank,
               m.q_lora_rank * local_heads * m.qk_head_dim()};
  } else {
    tensors = {hidden * local_heads * m.qk_head_dim()};
  }
  tensors.push_back(hidden * (m.kv_lora_rank + m.qk_rope_head_dim));
  tensors.push_back(m.kv_lora_rank);
  tensors.push_back(m.kv_lora_rank * local_heads * (m.qk_nope_head_dim + m.v_head_dim));
  tensors.push_back(local_heads * m.v_head_dim * hidden);
  return tensors;
}

int64_t latent_attention_parameters(const LatentAttentionConfig& m, int64_t hidden, int64_t heads,
                                    int64_t tensor) {
  const std::vector<int64_t> tensors = latent_attention_tensors(m, hidden, heads, tensor);
  return std::accumulate(tensors.begin(), tensors.end(), int64_t{0});
}

int64_t latent_attention_matmul_weights(const LatentAttentionConfig& m, int64_t hidden,
                                        int64_t heads) {
  // Every parameter but the two latents' RMSNorm gains (the q one absent without a q latent).
  return latent_attention_parameters(m, hidden, heads, 1) - m.q_lora_rank - m.kv_lora_rank;
}

}  // namespace upsim

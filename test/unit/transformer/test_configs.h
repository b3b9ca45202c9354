// Transformer configurations the transformer tests share, built in code (no YAML).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "workloads/transformer/transformer_config.h"

namespace upsim::test_configs {

/// `gpus` GPUs on DGX nodes of 8: GPU i on node i / 8.
inline std::vector<uint32_t> dgx_nodes(size_t gpus) {
  std::vector<uint32_t> nodes(gpus);
  for (size_t i = 0; i < gpus; ++i)
    nodes[i] = static_cast<uint32_t>(i / 8);
  return nodes;
}

/// A small GPT: `layers` layers (8 by default), hidden 1024, 16 heads, ffn 4096, vocab 32000,
/// seq 512, micro-batch 2, global batch 16, bf16, dropout 0.1.
inline TransformerConfig small_gpt(int64_t layers = 8) {
  TransformerConfig c;
  c.architecture = "gpt";
  c.layers = layers;
  c.hidden = 1024;
  c.heads = 16;
  c.kv_heads = 16;
  c.ffn = 4096;
  c.vocab = 32000;
  c.seq = 512;
  c.micro_batch = 2;
  c.global_batch = 16;
  c.dtype = DType::kBf16;
  c.dropout = 0.1;
  return c;
}

/// A Llama-style model in bf16 (RMSNorm, SwiGLU, RoPE, no biases), one micro-batch of one
/// sequence: `layers` layers of hidden `hidden`, `heads` query and `kv_heads` key/value heads,
/// MLP width `ffn`, vocabulary 32000, sequence `seq`.
inline TransformerConfig llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                               int64_t ffn, int64_t seq) {
  TransformerConfig c;
  c.architecture = "llama";
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.ffn = ffn;
  c.vocab = 32000;
  c.seq = seq;
  c.micro_batch = 1;
  c.global_batch = 1;
  c.dtype = DType::kBf16;
  c.norm = TransformerNorm::kRmsNorm;
  c.activation = TransformerActivation::kSwiglu;
  c.position = TransformerPosition::kRotary;
  c.bias = false;
  return c;
}

/// `c` with dropless MoE layers of `experts` experts, `top_k` per token, of width `expert_ffn`.
inline TransformerConfig with_moe(TransformerConfig c, int64_t experts, int64_t top_k,
                                  int64_t expert_ffn) {
  c.moe.experts = experts;
  c.moe.top_k = top_k;
  c.moe.expert_ffn = expert_ffn;
  c.moe.capacity_factor = 0.0;
  return c;
}

/// small_gpt() (8 layers) with MoE layers of 32 experts, top 8, dropless, expert width 2048,
/// over expert parallel 16 of data parallel 16 (two DGX nodes), `micro_batches` micro-batches
/// per replica, with `dispatcher`.
inline TransformerConfig fine_moe(MoeDispatcher dispatcher, int64_t micro_batches = 2) {
  TransformerConfig c = with_moe(small_gpt(), 32, 8, 2048);
  c.moe.dispatcher = dispatcher;
  c.parallelism.data = 16;
  c.parallelism.expert = 16;
  c.global_batch = c.micro_batch * 16 * micro_batches;
  return c;
}

}  // namespace upsim::test_configs

// Transformer configurations the transformer tests share, built in code (no YAML).
#pragma once

#include <cstdint>

#include "workloads/transformer/transformer_config.h"

namespace upsim::test_configs {

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

}  // namespace upsim::test_configs

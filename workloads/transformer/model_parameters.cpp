#include "workloads/transformer/model_parameters.h"

#include "workloads/transformer/encoder_decoder.h"

namespace upsim::transformer_emit {

void ModelParameters::add_norm(LayerParams& p) const {
  p.add(sizes_.h);
  if (transformer_norm_parameters(config_) > sizes_.h) p.add(sizes_.h);
}

LayerParams ModelParameters::layer(int64_t layer) const {
  LayerParams p;
  if (config_.lora.enabled()) {
    // The base is frozen: only the adapters train (lora.h).
    for (const int64_t n : lora_layer_tensors(config_, sizes_.t))
      p.add(n);
    return p;
  }
  const bool bias = config_.bias;
  add_norm(p);
  if (config_.mla.enabled()) {
    for (const int64_t n : latent_attention_tensors(config_.mla, sizes_.h, config_.heads, sizes_.t))
      p.add(n);
  } else {
    p.add(sizes_.qkv_out * sizes_.h);
    if (bias) p.add(sizes_.qkv_out);
    p.add(sizes_.h * sizes_.attn_out);
    if (bias) p.add(sizes_.h);
    if (config_.attention_sinks) p.add(sizes_.heads);  // the sinks of this rank's heads
    if (config_.qk_norm) {
      // The query and key norms' weights (and biases), one head wide, replicated over TP.
      const int64_t per_norm = transformer_norm_parameters(config_) / sizes_.h;
      for (int64_t i = 0; i < 2 * per_norm; ++i)
        p.add(sizes_.head_dim);
    }
  }
  // T5's relative bias table of each stack, with its first layer (relative_bias.h).
  if (config_.position == TransformerPosition::kRelative &&
      (layer == 0 || (config_.encoder_decoder() && layer == config_.layers))) {
    p.add(kRelativeBiasBuckets * sizes_.heads);
  }
  const bool split_stages = config_.encoder_decoder() && config_.parallelism.pipeline > 1;
  if (split_stages && layer == config_.layers) {
    // The first decoder stage's decoder embedding (encoder_decoder.h): its positions, and its
    // copy of the word embedding unless the last stage's serves it.
    if (config_.position == TransformerPosition::kLearned) p.add(config_.seq * sizes_.h);
    if (first_decoder_stage(config_) != config_.parallelism.pipeline - 1) {
      p.add(sizes_.vocab * sizes_.h);
    }
  }
  if (config_.encoder_decoder() && layer >= config_.layers) {
    // A decoder layer's cross-attention (encoder_decoder.h): its norm, the query and
    // key/value projections (column parallel), the output projection (row parallel).
    add_norm(p);
    const int64_t kv_out = sizes_.qkv_out - sizes_.attn_out;
    p.add(sizes_.attn_out * sizes_.h);
    if (bias) p.add(sizes_.attn_out);
    p.add(kv_out * sizes_.h);
    if (bias) p.add(kv_out);
    p.add(sizes_.h * sizes_.attn_out);
    if (bias) p.add(sizes_.h);
  }
  add_norm(p);
  if (config_.is_moe_layer(layer)) {
    const MoeConfig& m = config_.moe;
    const int64_t local = m.experts / config_.parallelism.expert;
    p.add(m.experts * sizes_.h);
    for (int64_t e = 0; e < local + m.shared_experts; ++e) {
      // Routed experts split over the expert tensor ranks, shared experts over the tensor ones.
      const int64_t e_ffn = m.expert_ffn / (e < local ? sizes_.et : sizes_.t);
      const int64_t e_fc1 = gated_activation(config_.activation) ? 2 * e_ffn : e_ffn;
      // Routed experts are expert-parallel parameters when expert > 1 (Megatron-Core sets
      // allreduce = not (is_expert and expert_parallel)); shared experts are dense.
      const GradBufferIndex b =
          e < local && config_.parallelism.expert > 1 ? kExpertBuffer : kDenseBuffer;
      p.add(e_fc1 * sizes_.h, b);
      if (bias) p.add(e_fc1, b);
      p.add(sizes_.h * e_ffn, b);
      if (bias) p.add(sizes_.h, b);
    }
  } else {
    p.add(sizes_.fc1_out * sizes_.h);
    if (bias) p.add(sizes_.fc1_out);
    p.add(sizes_.h * sizes_.ffn);
    if (bias) p.add(sizes_.h);
  }
  // The last encoder stage's encoder final norm (encoder_decoder.h).
  if (split_stages && layer == config_.layers - 1) add_norm(p);
  return p;
}

LayerParams ModelParameters::embedding() const {
  LayerParams p;
  if (config_.lora.enabled()) return p;  // frozen
  p.add(sizes_.vocab * sizes_.h);
  if (config_.position == TransformerPosition::kLearned) {
    p.add(config_.seq * sizes_.h);
    // An encoder-decoder model's decoder has a position table of its own (NeMo's T5: both
    // of max_position_embeddings = seq rows), here on one stage (layer() has it on the first
    // decoder stage otherwise).
    if (config_.encoder_decoder() && config_.parallelism.pipeline == 1) {
      p.add(config_.seq * sizes_.h);
    }
  }
  return p;
}

LayerParams ModelParameters::mtp(bool embedding_copy) const {
  LayerParams p = layer(config_.layers - 1);
  add_norm(p);  // enorm
  add_norm(p);  // hnorm
  p.add(2 * sizes_.h * (sizes_.h / sizes_.t));
  add_norm(p);  // final_layernorm
  if (embedding_copy) p.add(sizes_.vocab * sizes_.h);
  return p;
}

LayerParams ModelParameters::head() const {
  LayerParams p;
  if (config_.lora.enabled()) return p;  // frozen
  add_norm(p);                           // final norm
  // The encoder's final norm, on one stage (layer() has it on the last encoder stage otherwise).
  if (config_.encoder_decoder() && config_.parallelism.pipeline == 1) add_norm(p);
  if (config_.has_output_layer() &&
      (!config_.tied_embeddings || config_.parallelism.pipeline > 1)) {
    p.add(sizes_.vocab * sizes_.h);
  }
  for (const int64_t n : task_head_tensors(config_, sizes_.t))
    p.add(n);
  return p;
}

}  // namespace upsim::transformer_emit

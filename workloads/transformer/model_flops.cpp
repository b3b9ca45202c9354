#include "workloads/transformer/model_flops.h"

#include "workloads/transformer/encoder_decoder.h"

namespace upsim {

double transformer_model_flops(const TransformerConfig& c) {
  const double h = static_cast<double>(c.hidden);
  const double s = static_cast<double>(c.attention_sequences().length);
  const double gated = gated_activation(c.activation) ? 1.5 : 1.0;
  // Per token, forward and backward (3 x the forward's 2 FLOPs per multiply-add): the QKV
  // projection h x (q + 2 kv), the output projection q x h, scores and values 2 x s x q. With
  // q = h and kv = h x kv_heads / heads it is Megatron's 12 h^2 (1 + kv_heads / heads + s / h).
  const double q = static_cast<double>(c.heads * c.head_dim());
  const double kv = static_cast<double>(c.kv_heads * c.head_dim());
  const double scores_and_values = 12.0 * s * q;
  double attention = 6.0 * h * (q + 2.0 * kv) + 6.0 * q * h + scores_and_values;
  if (c.mla.enabled()) {
    attention =
        6.0 * static_cast<double>(latent_attention_matmul_weights(c.mla, c.hidden, c.heads)) +
        scores_and_values;
  }
  const auto mlp = [&](int64_t layer) {
    if (!c.is_moe_layer(layer)) return 12.0 * h * static_cast<double>(c.ffn) * gated;
    const int64_t expert_ffn = c.moe.expert_ffn > 0 ? c.moe.expert_ffn : c.ffn;
    return 12.0 * h * static_cast<double>(expert_ffn) *
           static_cast<double>(c.moe.top_k + c.moe.shared_experts) * gated;
  };
  double per_token = 0.0;
  for (int64_t layer = 0; layer < c.layers; ++layer)
    per_token += attention + mlp(layer);
  // Multi-token prediction, as Megatron-LM's num_floating_point_operations counts it
  // (megatron/training/training.py): per MTP layer a layer of the last layer's kind, its three
  // norms and eh_proj (6 x (3 h + 2 h^2)), and below one more pass of the logits.
  const auto mtp = static_cast<double>(c.mtp_layers);
  per_token += mtp * (attention + mlp(c.layers - 1) + 6.0 * (3.0 * h + 2.0 * h * h));
  const double micro_batches =
      static_cast<double>(c.global_batch) / static_cast<double>(c.micro_batch);
  if (c.encoder_decoder()) {
    return (per_token * static_cast<double>(c.micro_batch_tokens()) +
            decoder_stack_flops_per_micro_batch(c)) *
           micro_batches;
  }
  double output = 6.0 * h * static_cast<double>(c.padded_vocab()) *
                  static_cast<double>(c.vocabulary_rows()) * micro_batches * (1.0 + mtp);
  if (c.lora.enabled()) {
    // The frozen base's linears run no weight gradient: 4 of their 6 FLOPs per parameter and
    // token; the attention's scores and values all of theirs; the adapters train in full.
    const double core = scores_and_values * static_cast<double>(c.layers);
    per_token = (per_token - core) * (4.0 / 6.0) + core +
                lora_flops_per_token(c) * static_cast<double>(c.layers);
    output *= 4.0 / 6.0;
  }
  return per_token * static_cast<double>(c.micro_batch_tokens()) * micro_batches + output;
}

}  // namespace upsim

// Model FLOPs of a transformer training iteration, as Megatron-LM counts them for its reported
// TFLOP/s per GPU (NVIDIA/Megatron-LM, megatron/training/training.py,
// num_floating_point_operations; the dense form is Narayanan et al., SC21, section 5.1): the
// matrix multiplications of the forward and backward passes (3 x the forward's 2 FLOPs per
// multiply-add), without recomputation, masking savings or any elementwise work.
//
// Per layer and token (h = hidden, s = seq, a = heads, g = kv_heads, f = ffn):
//   attention   6 h (q + 2 k) + 6 q h + 12 s q       QKV and output projections, q k^T and p v
//               (q = a x head_dim, k = g x head_dim;  = 12 h^2 (1 + g / a + s / h) when q = h)
//   MLP         12 h f (3/2 with SwiGLU)            a dense layer
//               12 h f_e (top_k + shared) (3/2 ...)  a MoE layer (f_e = expert_ffn), the routed
//                                                    and shared experts each token runs
//   output      6 h V (padded vocabulary), once per token (BERT's masked-LM head: per predicted
//               position; a classification head: none; heads' other GEMMs are not counted)
// times the tokens of one iteration: global_batch x seq. With unpadded or packed samples
// (sequences: in transformer_config.h) s is the pair-weighted mean length E[l^2] / E[l], so that
// the scores count each sample's own square, and unpadded samples count their real tokens.
// An encoder-decoder model (workload.decoder) counts its encoder's layers on seq tokens without
// an output layer, then its decoder stack (encoder_decoder.h,
// decoder_stack_flops_per_micro_batch: self-attention, MLP, cross-attention and the output
// layer on the decoder's tokens). LoRA fine-tuning (lora.h) counts what its step computes: the
// frozen base's linears and output layer without their weight gradients (4 FLOPs per parameter
// and token), the attention's scores and values in full, the adapters' 6 per parameter and
// token.
#pragma once

#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// FLOPs of one training iteration of `config` over all GPUs (see the header comment).
double transformer_model_flops(const TransformerConfig& config);

}  // namespace upsim

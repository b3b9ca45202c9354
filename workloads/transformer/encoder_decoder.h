// Encoder-decoder transformers (T5: Raffel et al., JMLR 2020, arXiv 1910.10683), as Megatron-LM
// and NeMo run them (megatron/legacy/model/t5_model.py and language_model.py's
// TransformerLanguageModel with add_decoder; NeMo's MegatronTokenLevelEncoderDecoderModule):
// the encoder's `layers` attend bidirectionally over `seq` tokens and end in a final norm; the
// decoder's layers attend causally over decoder_seq tokens, then to the encoder's output
// (cross-attention: ParallelAttention with attention_type cross_attn, its query projection on
// the decoder's tokens, its key/value projection on the encoder's), then run the MLP; the
// output layer and loss run on the decoder's tokens. The word embedding is shared by encoder,
// decoder and output layer (NeMo's share_token_embeddings and
// share_decoder_tokens_head_embeddings, true in its T5 configs); learned positions are one
// table each.
//
// Under pipeline parallel, Megatron-LM puts the encoder on the first stages and the decoder on
// the rest (--pipeline-model-parallel-split-rank; megatron/legacy/model/t5_model.py's
// add_encoder / add_decoder by is_pipeline_stage_before_split): the encoder's layers split
// evenly over the first parallelism.encoder_stages, the decoder's over the rest
// (TransformerConfig::chunk_layers; by default the split of all layers evenly over the
// stages). The last encoder stage ends in the encoder's final norm; the first decoder stage embeds
// the decoder's tokens with its own copy of the shared word embedding, whose gradient the first,
// that and the last stage all-reduce (Megatron's embedding group with the split rank); a
// message between decoder stages carries the decoder's hidden state and the encoder's output
// (Megatron's two tensor shapes for decoder stages).
//
// This file holds what the decoder stack adds: its config as a decoder-only stack, the
// cross-attention's parameters, kernels and stored activations, and the stage split. The layer
// emitter's cross_attention_forward / _backward emit it (cross_attention_emitter.cpp).
#pragma once

#include <cstdint>

#include "sim/task_graph.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// The decoder stack of encoder-decoder `c` as a decoder-only config: decoder_layers causal
/// layers on decoder_seq tokens (its self-attention, MLP, output layer and loss are those of
/// a decoder-only model of that shape).
TransformerConfig decoder_stack_config(const TransformerConfig& c);

/// The first pipeline stage holding decoder layers (Megatron-LM's split rank):
/// parallelism.encoder_stages; 0 with one stage.
int64_t first_decoder_stage(const TransformerConfig& c);

/// Parameters of one cross-attention block on one tensor-parallel rank of `tensor`: its norm
/// (replicated), the query projection h x q / tensor and the key/value projection
/// h x 2 kv / tensor (column parallel), the output projection q / tensor x h (row parallel,
/// bias replicated).
int64_t cross_attention_parameters(const TransformerConfig& c, int64_t tensor);

/// Bytes one decoder layer's cross-attention keeps for its backward per micro-batch on one GPU
/// (Korthikanti et al. 2022, arXiv 2205.05198, section 4.1, term by term as
/// transformer_layer_activation_bytes counts self-attention): its norm input, the query
/// projection's input, Q over the decoder's tokens, K and V over the encoder's, the core's
/// saved tensors over decoder x encoder positions (unfused: softmax output, dropout mask and
/// output; fused: the fp32 log-sum-exp), the output projection's input and its dropout mask.
/// Full recomputation keeps the layer input alone, which the self-attention counts. The
/// encoder's output, the key/value projections' common input, is counted once per micro-batch
/// by encoder_output_bytes.
int64_t cross_attention_activation_bytes(const TransformerConfig& c);
/// The encoder's output one micro-batch keeps while the decoder runs (and until the decoder's
/// backward has used it): tokens x hidden activations.
int64_t encoder_output_bytes(const TransformerConfig& c);

/// Model FLOPs the decoder stack adds to one micro-batch of the encoder (forward and backward,
/// 3 x the forward's 2 per multiply-add, as transformer_model_flops counts): its self-attention
/// and MLP per decoder token, the cross-attention's query and output projections and its
/// scores and values over the encoder's positions per decoder token, and its key/value
/// projection per encoder token.
double decoder_stack_flops_per_micro_batch(const TransformerConfig& c);

/// The cross-attention kernels of a decoder layer on one rank, shared by every layer and
/// micro-batch; its norm, output projection and residual add are the decoder layer's own
/// (LayerKernels: the same shapes).
struct CrossAttentionKernels {
  /// Rows of the key/value projection: the encoder's tokens of one micro-batch.
  int64_t encoder_tokens = 0;
  KernelDescId q_fwd = 0, q_dgrad = 0, q_wgrad = 0;
  KernelDescId kv_fwd = 0, kv_dgrad = 0, kv_wgrad = 0;
  /// Fused attention (attention flash / cudnn): decoder queries over encoder keys, unmasked.
  KernelDescId attn_fwd = 0, attn_bwd = 0;
  /// Unfused attention: q k^T, softmax, dropout, p v and their backward.
  KernelDescId score_fwd = 0, score_dgrad_q = 0, score_dgrad_k = 0;
  KernelDescId softmax_fwd = 0, softmax_bwd = 0, dropout_fwd = 0, dropout_bwd = 0;
  KernelDescId av_fwd = 0, av_dgrad_p = 0, av_dgrad_v = 0;
  /// Autograd's sum of the layers' gradients of the encoder's output (each decoder layer's
  /// key/value projection is a consumer): one add per layer but one.
  KernelDescId encoder_grad_add = 0;
};

/// Adds the cross-attention kernels of decoder stack `decoder` (decoder_stack_config) on a rank
/// with `decoder_sizes`, over an encoder of `encoder_seq` tokens per sample.
CrossAttentionKernels add_cross_attention_kernels(const TransformerConfig& decoder,
                                                  const LayerSizes& decoder_sizes,
                                                  int64_t encoder_seq, TaskGraph& graph);

}  // namespace upsim

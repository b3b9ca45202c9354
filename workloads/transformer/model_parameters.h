// The parameter tensors of a transformer's units (the layers, the embedding, the output layer) on
// one GPU, by gradient buffer, as transformer_memory.h counts them: what the gradient
// synchronisation gathers and reduces and the optimizer steps. Under LoRA (lora.h) the trained
// ones only: a layer's adapters, nothing of the frozen embedding and head.
#pragma once

#include <cstdint>

#include "workloads/transformer/gradient_sync.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::transformer_emit {

class ModelParameters {
 public:
  /// `config` and `sizes` must outlive the object.
  ModelParameters(const TransformerConfig& config, const LayerSizes& sizes)
      : config_(config), sizes_(sizes) {}

  /// The parameter tensors of `layer` on one GPU: column- and row-parallel weights split over
  /// tensor (row-parallel biases and norms replicated), routed experts split over expert and
  /// expert tensor parallel (ParallelismConfig::expert_tensor_parallel, as the generator runs
  /// them: layer_kernels.cpp, moe_emitter.cpp). An encoder-decoder model's layers from
  /// `layers` on are its decoder's, each with its cross-attention's tensors too.
  LayerParams layer(int64_t layer) const;
  /// The word embedding and, with learned positions, the position embedding (an
  /// encoder-decoder model's encoder and decoder each have one; over several pipeline stages
  /// the decoder's, and the first decoder stage's copy of the word embedding, are in its first
  /// decoder layer's unit, and the encoder's final norm in its last layer's).
  LayerParams embedding() const;
  /// The final norm (an encoder-decoder model's encoder's too, on one stage), the output layer
  /// (the embedding's, tied, in one pipeline stage; none under a classification head) and the
  /// task head's own tensors.
  LayerParams head() const;
  /// One multi-token prediction layer (mtp_emitter.cpp): a layer like the model's last, its
  /// enorm, hnorm and final norm, and eh_proj (2 hidden x hidden / tensor); with
  /// `embedding_copy` the word embedding too, which the MTP stage holds when it is not the
  /// first and the output layer is not the embedding's (Megatron's embedding group).
  LayerParams mtp(bool embedding_copy) const;

 private:
  /// A norm's tensors: the gain, and the bias of a LayerNorm with biases
  /// (transformer_norm_parameters()).
  void add_norm(LayerParams& p) const;

  const TransformerConfig& config_;
  const LayerSizes& sizes_;
};

}  // namespace upsim::transformer_emit

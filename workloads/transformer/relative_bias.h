// T5's relative attention bias (position relative; Raffel et al., JMLR 2020, arXiv 1910.10683,
// section 2.1; HuggingFace transformers' T5Attention.compute_bias and _relative_position_bucket,
// NeMo's T5RelativePositionEmbedding): each stack (the encoder, the decoder's self-attention;
// the cross-attention has none) holds a table of kRelativeBiasBuckets x heads. Each forward
// computes every (query, key) pair's bucket (log-spaced offsets, bidirectional in the encoder)
// and gathers its heads' biases, [heads, q, k], which every layer of the stack adds to its
// attention scores before the softmax (unfused attention: the scores are materialised). In the
// backward each layer sums its score gradient over the batch into the bias's gradient, which
// is scattered into the table once.
#pragma once

#include <cstdint>

#include "sim/task_graph.h"

namespace upsim {

struct LayerSizes;
struct TransformerConfig;

/// The bias's kernels on one rank for one stack of `sizes` (0 everywhere without position
/// relative). Sizes per micro-batch: the bucket index of every (query, key) pair (q x k int64,
/// about ten elementwise operations), the gather of [heads on the rank, q, k], each layer's add
/// to the scores [b, heads, q, k] (the bias read once per sample), each layer's sum of the
/// score gradient over the batch added to the bias's gradient, the table's scatter-add.
struct RelativeBiasKernels {
  KernelDescId bucket = 0, gather = 0, add = 0, grad_sum = 0, scatter = 0;
};

/// Adds the kernels for a stack of `config` (its own queries attend over its own keys: seq
/// sizes.s) on a rank with `sizes`.
RelativeBiasKernels add_relative_bias_kernels(const TransformerConfig& config,
                                              const LayerSizes& sizes, TaskGraph& graph);

/// Bytes one stack keeps for its backward per micro-batch: the pairs' bucket indices (int64),
/// which the table's scatter reads; 0 without position relative.
int64_t relative_bias_activation_bytes(const TransformerConfig& config);

}  // namespace upsim

// The lengths of the samples a transformer trains on and how a micro-batch holds them (the
// `sequences` key): padded to `seq`, unpadded (padding removed before the first layer), or
// packed into rows of `seq` tokens with attention kept inside each sample.
#pragma once

#include <cstdint>
#include <string>

#include "sim/config/config_node.h"

namespace upsim {

/// How the samples of a micro-batch are laid out.
enum class SequenceLayout : uint8_t {
  /// Each sample padded to `seq`: every kernel runs on micro_batch x seq tokens and the
  /// attention on seq x seq per sample, the padding masked but computed (Megatron-LM, NVIDIA's
  /// DeepLearningExamples BERT in PyTorch).
  kPadded,
  /// Padding removed before the first layer: the GEMMs and pointwise kernels run on the real
  /// tokens only, and a variable-length fused attention (flash_attn_varlen_func, cuDNN's
  /// THD format) on each sample's own length (NVIDIA's MLPerf BERT "unpad" fast path,
  /// HuggingFace's unpadded FlashAttention-2 path). global_batch and micro_batch count samples.
  kUnpadded,
  /// Samples concatenated into rows of `seq` tokens, attention limited to each sample by its
  /// cumulative lengths (Megatron-Core's packed sequences / THD, NeMo's packed fine-tuning,
  /// Krell et al. arXiv 2107.02027 for BERT): the GEMMs run on micro_batch x seq tokens, the
  /// attention on each sample's length. global_batch and micro_batch count rows.
  kPacked,
};

/// The `sequences:` key. Lengths are in tokens; the mean and standard deviation describe the
/// samples' real lengths, each between 1 and `seq`.
struct SequenceLengths {
  SequenceLayout layout = SequenceLayout::kPadded;
  double mean_length = 0.0;  ///< 0: every sample is `seq` tokens long
  double length_std = 0.0;
};

/// One attention kernel's sequences: `batch` sequences of `length` tokens whose query-key pairs
/// (batch x length^2) are those of the samples they stand for, and whose tokens (batch x length)
/// are as near theirs as a whole number of equal sequences allows.
struct AttentionSequences {
  int64_t batch = 0;
  int64_t length = 0;
};

/// Reads `sequences:` (absent: padded, every sample `seq` tokens). Errors name the key: an
/// unknown layout; a mean outside [1, seq]; a deviation that lengths in [1, seq] with that mean
/// cannot have (variance above (mean - 1) (seq - mean), Bhatia and Davis 2000); unpadded or
/// packed with a mean of seq and no deviation is accepted (nothing to remove).
SequenceLengths read_sequence_lengths(const ConfigNode& sequences, int64_t seq);

/// Tokens one micro-batch of `micro_batch` rows or samples puts through the GEMMs, before any
/// context-parallel split: micro_batch x seq, padded or packed; micro_batch x mean_length
/// (rounded, at least 1) unpadded.
int64_t micro_batch_tokens(const SequenceLengths& lengths, int64_t micro_batch, int64_t seq);

/// Samples in one micro-batch: micro_batch, padded or unpadded; micro_batch x seq / mean_length
/// packed (fractional: a row holds seq / mean samples on average).
double samples_per_micro_batch(const SequenceLengths& lengths, int64_t micro_batch, int64_t seq);

/// The attention of one micro-batch (before any context-parallel split): padded, micro_batch
/// sequences of seq; unpadded or packed, samples of the mean length and deviation, which have
/// E[l^2] = mean^2 + std^2 query-key pairs each: as many sequences as micro_batch_tokens() fills
/// at the pair-weighted mean length E[l^2] / mean (rounded, at least 1), each as long as keeps
/// the pairs (at most seq). A causal mask then halves each sample's square, as it halves a
/// padded one's.
AttentionSequences attention_sequences(const SequenceLengths& lengths, int64_t micro_batch,
                                       int64_t seq);

/// "padded", "unpadded", "packed".
std::string_view sequence_layout_name(SequenceLayout layout);

/// One phrase for a run's description, e.g. "packed: samples of 256 +- 128 tokens in rows of
/// 4096, the attention priced as 13 sequences of 320 tokens per micro-batch"; empty for padded
/// samples of `seq` tokens.
std::string sequence_lengths_text(const SequenceLengths& lengths, int64_t micro_batch, int64_t seq);

}  // namespace upsim

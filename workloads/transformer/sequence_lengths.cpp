#include "workloads/transformer/sequence_lengths.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/config/config_enum.h"
#include "sim/units.h"

namespace upsim {

namespace {

constexpr std::array<std::string_view, 3> kLayoutNames = {"padded", "unpadded", "packed"};
constexpr std::array<SequenceLayout, 3> kLayouts = {
    SequenceLayout::kPadded, SequenceLayout::kUnpadded, SequenceLayout::kPacked};

double mean_or_seq(const SequenceLengths& lengths, int64_t seq) {
  return lengths.mean_length > 0.0 ? lengths.mean_length : as_double(seq);
}

}  // namespace

std::string_view sequence_layout_name(SequenceLayout layout) {
  return kLayoutNames[static_cast<size_t>(layout)];
}

SequenceLengths read_sequence_lengths(const ConfigNode& sequences, int64_t seq) {
  SequenceLengths out;
  out.layout = read_enum(sequences, "layout", kLayoutNames, kLayouts, SequenceLayout::kPadded);
  const double s = as_double(seq);
  out.mean_length = sequences.get_double_in_or("mean_length", 1.0, s, s);
  out.length_std = sequences.get_double_in_or("length_std", 0.0, s, 0.0);
  // Bhatia and Davis (2000): values in [lo, hi] with mean m have variance at most
  // (m - lo) (hi - m).
  const double max_variance = (out.mean_length - 1.0) * (s - out.mean_length);
  if (out.length_std * out.length_std > max_variance * (1.0 + 1e-12)) {
    sequences.child("length_std")
        .fail(fmt::format("{} is more than samples of 1 .. seq {} tokens with mean_length {} can "
                          "deviate (at most {:.4g})",
                          out.length_std, seq, out.mean_length, std::sqrt(max_variance)));
  }
  return out;
}

int64_t micro_batch_tokens(const SequenceLengths& lengths, int64_t micro_batch, int64_t seq) {
  if (lengths.layout != SequenceLayout::kUnpadded) return micro_batch * seq;
  const double tokens = as_double(micro_batch) * mean_or_seq(lengths, seq);
  return std::max<int64_t>(1, std::llround(tokens));
}

double samples_per_micro_batch(const SequenceLengths& lengths, int64_t micro_batch, int64_t seq) {
  if (lengths.layout != SequenceLayout::kPacked) return as_double(micro_batch);
  return as_double(micro_batch * seq) / mean_or_seq(lengths, seq);
}

AttentionSequences attention_sequences(const SequenceLengths& lengths, int64_t micro_batch,
                                       int64_t seq) {
  if (lengths.layout == SequenceLayout::kPadded) return {micro_batch, seq};
  const double mean = mean_or_seq(lengths, seq);
  const double pair_weighted = (mean * mean + lengths.length_std * lengths.length_std) / mean;
  const double tokens = as_double(micro_batch_tokens(lengths, micro_batch, seq));
  const double pairs = tokens * pair_weighted;
  AttentionSequences a;
  a.batch = std::max<int64_t>(1, std::llround(tokens / pair_weighted));
  a.length = std::clamp<int64_t>(std::llround(std::sqrt(pairs / as_double(a.batch))), 1, seq);
  return a;
}

std::string sequence_lengths_text(const SequenceLengths& lengths, int64_t micro_batch,
                                  int64_t seq) {
  const double mean = mean_or_seq(lengths, seq);
  if (lengths.layout == SequenceLayout::kPadded && mean >= as_double(seq)) return {};
  const std::string samples =
      lengths.length_std > 0.0
          ? fmt::format("samples of {:.0f} +- {:.0f} tokens", mean, lengths.length_std)
          : fmt::format("samples of {:.0f} tokens", mean);
  if (lengths.layout == SequenceLayout::kPadded) {
    return fmt::format("padded: {} in rows of {} ({:.0f}% of the tokens computed are padding)",
                       samples, seq, 100.0 * (1.0 - mean / as_double(seq)));
  }
  const AttentionSequences a = attention_sequences(lengths, micro_batch, seq);
  return fmt::format("{}: {}{}, the attention priced as {} sequences of {} tokens per micro-batch",
                     sequence_layout_name(lengths.layout), samples,
                     lengths.layout == SequenceLayout::kPacked
                         ? fmt::format(" in rows of {}", seq)
                         : fmt::format(" ({:.0f}% of seq {})", 100.0 * mean / as_double(seq), seq),
                     a.batch, a.length);
}

}  // namespace upsim

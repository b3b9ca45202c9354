#include "workloads/transformer/pipeline_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace upsim {

namespace {

/// Longest expansion a layout may have: far above any model's layers (a stage per layer of a
/// 4096-layer model is 8 K symbols), low enough that a typo such as t*99999999 is refused.
constexpr size_t kMaxExpandedLayout = size_t{1} << 20;

/// Reads the count after a '*' at text[pos]; pos ends past its digits.
size_t read_repeat(std::string_view text, size_t& pos) {
  if (pos >= text.size() || text[pos] != '*') return 0;
  ++pos;
  const size_t digits_begin = pos;
  size_t count = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    count = count * 10 + static_cast<size_t>(text[pos] - '0');
    if (count > kMaxExpandedLayout) {
      throw std::invalid_argument(fmt::format(
          "a repeat count is above {} (what the layout would expand to)", kMaxExpandedLayout));
    }
    ++pos;
  }
  if (pos == digits_begin) {
    throw std::invalid_argument("'*' must be followed by a count (e.g. t*3 or (tt|)*4)");
  }
  return count;
}

void append_repeated(std::string& out, std::string_view piece, size_t times) {
  if (out.size() + piece.size() * times > kMaxExpandedLayout) {
    throw std::invalid_argument(fmt::format("expands to more than {} symbols", kMaxExpandedLayout));
  }
  for (size_t i = 0; i < times; ++i)
    out.append(piece);
}

/// Megatron's first pass: every "(inner)*n" unrolled (inner without parentheses).
std::string unroll_groups(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const char ch = text[pos];
    if (ch == ')') throw std::invalid_argument("')' without its '('");
    if (ch != '(') {
      out.push_back(ch);
      ++pos;
      continue;
    }
    const size_t close = text.find_first_of("()", pos + 1);
    if (close == std::string_view::npos || text[close] == '(') {
      throw std::invalid_argument(close == std::string_view::npos
                                      ? "'(' without its ')'"
                                      : "nested parentheses (Megatron-Core's layout has none)");
    }
    const std::string_view inner = text.substr(pos + 1, close - pos - 1);
    if (inner.empty()) throw std::invalid_argument("'()' repeats nothing");
    pos = close + 1;
    if (pos >= text.size() || text[pos] != '*') {
      throw std::invalid_argument("a group '(...)' must be followed by '*' and a count");
    }
    append_repeated(out, inner, read_repeat(text, pos));
  }
  return out;
}

/// Megatron's second pass: every "x*n" unrolled (x any one character, '|' included).
std::string unroll_symbols(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const char ch = text[pos];
    if (ch == '*') throw std::invalid_argument("'*' must follow a symbol or a group");
    ++pos;
    if (pos < text.size() && text[pos] == '*') {
      append_repeated(out, std::string_view(&ch, 1), read_repeat(text, pos));
    } else {
      append_repeated(out, std::string_view(&ch, 1), 1);
    }
  }
  return out;
}

int64_t count_of(const std::vector<LayoutStage>& stages, char symbol) {
  int64_t n = 0;
  for (const LayoutStage& s : stages)
    n += std::count(s.begin(), s.end(), symbol);
  return n;
}

ChunkLayerSplit fail(std::string key, std::string error) {
  ChunkLayerSplit r;
  r.key = std::move(key);
  r.error = std::move(error);
  return r;
}

ChunkLayerSplit split_by_layout(const PipelineSplit& split, int64_t layers, int64_t pipeline,
                                int64_t virtual_stages) {
  const std::vector<LayoutStage> stages = expand_pipeline_layout(split.layout);
  const auto n = static_cast<int64_t>(stages.size());
  if (n % pipeline != 0) {
    return fail("pipeline_layout",
                fmt::format("has {} stages, not a multiple of pipeline {} (each rank holds "
                            "stages / pipeline model chunks)",
                            n, pipeline));
  }
  if (n / pipeline != virtual_stages) {
    return fail("pipeline_layout",
                fmt::format("has {} stages, {} model chunks per rank of pipeline {}, but "
                            "parallelism.virtual_stages is {}",
                            n, n / pipeline, pipeline, virtual_stages));
  }
  std::string flat;
  for (const LayoutStage& s : stages)
    flat += s;
  if (flat.empty() || flat.front() != 'E' || flat.back() != 'L' || count_of(stages, 'E') != 1 ||
      count_of(stages, 'L') != 1) {
    return fail("pipeline_layout",
                "must open with the embedding E and close with the loss L, each once (Megatron-"
                "Core's validate_layer_layout)");
  }
  if (count_of(stages, 't') != layers) {
    return fail("pipeline_layout", fmt::format("holds {} decoder layers (t), but the model has {}",
                                               count_of(stages, 't'), layers));
  }
  ChunkLayerSplit r;
  r.counts.reserve(stages.size());
  for (const LayoutStage& s : stages)
    r.counts.push_back(std::count(s.begin(), s.end(), 't'));
  const int64_t mtp = count_of(stages, 'm');
  if (mtp == 0) return r;
  if (flat.find('t', flat.find('m')) != std::string::npos) {
    return fail("pipeline_layout", "places a decoder layer (t) after an MTP layer (m)");
  }
  for (int64_t vs = 0; vs < n; ++vs) {
    const int64_t m = std::count(stages[static_cast<size_t>(vs)].begin(),
                                 stages[static_cast<size_t>(vs)].end(), 'm');
    if (m == 0) continue;
    if (vs / pipeline != virtual_stages - 1 || m != mtp) {
      return fail("pipeline_layout",
                  "places MTP layers (m) other than all in one rank's last model chunk (Megatron-"
                  "Core's validate_layer_layout)");
    }
  }
  r.mtp_counts.reserve(stages.size());
  for (const LayoutStage& s : stages)
    r.mtp_counts.push_back(std::count(s.begin(), s.end(), 'm'));
  return r;
}

ChunkLayerSplit split_first_last(const PipelineSplit& split, int64_t layers, int64_t pipeline,
                                 int64_t virtual_stages) {
  const int64_t first = split.first_stage_layers.value_or(0);
  const int64_t last = split.last_stage_layers.value_or(0);
  const std::string key = split.first_stage_layers ? "first_stage_layers" : "last_stage_layers";
  const int64_t middle_ranks =
      pipeline - (split.first_stage_layers ? 1 : 0) - (split.last_stage_layers ? 1 : 0);
  const int64_t rest = layers - first - last;
  if (rest < 0 || (middle_ranks == 0 && rest != 0)) {
    return fail(key, fmt::format("first {} + last {} layers leave {} of the model's {} for the {} "
                                 "other pipeline ranks",
                                 first, last, rest, layers, middle_ranks));
  }
  const int64_t middle = middle_ranks > 0 ? rest / middle_ranks : 0;
  if (middle_ranks > 0 && rest % middle_ranks != 0) {
    return fail(key, fmt::format("leaves {} layers for {} other pipeline ranks, which do not split "
                                 "them evenly",
                                 rest, middle_ranks));
  }
  const auto per_rank = [&](int64_t rank) {
    if (rank == 0 && split.first_stage_layers) return first;
    if (rank == pipeline - 1 && split.last_stage_layers) return last;
    return middle;
  };
  for (int64_t rank = 0; rank < pipeline; ++rank) {
    if (per_rank(rank) % virtual_stages != 0) {
      const std::string rank_key = rank == 0 && split.first_stage_layers ? "first_stage_layers"
                                   : rank == pipeline - 1 && split.last_stage_layers
                                       ? "last_stage_layers"
                                       : key;
      return fail(rank_key, fmt::format("gives pipeline rank {} {} layers, not divisible by its {} "
                                        "virtual stages",
                                        rank, per_rank(rank), virtual_stages));
    }
  }
  ChunkLayerSplit r;
  r.counts.reserve(static_cast<size_t>(pipeline * virtual_stages));
  for (int64_t chunk = 0; chunk < virtual_stages; ++chunk) {
    for (int64_t rank = 0; rank < pipeline; ++rank)
      r.counts.push_back(per_rank(rank) / virtual_stages);
  }
  return r;
}

ChunkLayerSplit split_accounting(const PipelineSplit& split, int64_t layers, int64_t pipeline,
                                 int64_t virtual_stages) {
  const int64_t embedding = split.account_for_embedding ? 1 : 0;
  const int64_t loss = split.account_for_loss ? 1 : 0;
  const std::string key =
      split.account_for_embedding ? "account_for_embedding" : "account_for_loss";
  const int64_t counted = layers + embedding + loss;
  const int64_t chunks = pipeline * virtual_stages;
  if (counted % chunks != 0) {
    return fail(key, fmt::format("counts {} layers ({} decoder{}{}), not divisible by pipeline {} "
                                 "x virtual_stages {} = {}",
                                 counted, layers, embedding ? " + embedding" : "",
                                 loss ? " + loss" : "", pipeline, virtual_stages, chunks));
  }
  ChunkLayerSplit r;
  r.counts.assign(static_cast<size_t>(chunks), counted / chunks);
  r.counts.front() -= embedding;
  r.counts.back() -= loss;
  if (r.counts.front() < 0 || r.counts.back() < 0) {
    return fail(key, fmt::format("leaves the first or last model chunk fewer than no decoder "
                                 "layers ({} per chunk)",
                                 counted / chunks));
  }
  return r;
}

}  // namespace

std::vector<LayoutStage> expand_pipeline_layout(std::string_view text) {
  std::string cleaned;
  cleaned.reserve(text.size());
  for (const char ch : text) {
    if (ch != ',') cleaned.push_back(ch);
  }
  const std::string flat = unroll_symbols(unroll_groups(cleaned));
  std::vector<LayoutStage> stages(1);
  for (const char ch : flat) {
    if (ch == '|') {
      stages.emplace_back();
    } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L') {
      stages.back().push_back(ch);
    } else {
      throw std::invalid_argument(
          fmt::format("'{}' is not a layer symbol (E embedding, t decoder layer, m MTP layer, L "
                      "loss; '|' between stages, x*n and (...)*n repeat)",
                      ch));
    }
  }
  return stages;
}

ChunkLayerSplit split_chunk_layers(const PipelineSplit& split, int64_t layers, int64_t pipeline,
                                   int64_t virtual_stages) {
  if (!split.layout.empty()) {
    if (split.account_for_embedding || split.account_for_loss || split.first_stage_layers ||
        split.last_stage_layers) {
      return fail("pipeline_layout",
                  "states every chunk's layers itself: leave account_for_embedding, "
                  "account_for_loss, first_stage_layers and last_stage_layers out");
    }
    try {
      return split_by_layout(split, layers, pipeline, virtual_stages);
    } catch (const std::invalid_argument& e) {
      return fail("pipeline_layout", e.what());
    }
  }
  if (split.first_stage_layers || split.last_stage_layers) {
    if (split.account_for_embedding || split.account_for_loss) {
      return fail(split.account_for_embedding ? "account_for_embedding" : "account_for_loss",
                  "cannot be combined with first_stage_layers / last_stage_layers (Megatron-Core "
                  "asserts the same)");
    }
    return split_first_last(split, layers, pipeline, virtual_stages);
  }
  if (split.account_for_embedding || split.account_for_loss) {
    return split_accounting(split, layers, pipeline, virtual_stages);
  }
  const int64_t chunks = pipeline * virtual_stages;
  if (layers % chunks != 0) {
    return fail("virtual_stages",
                fmt::format("{} layers are not divisible by pipeline {} x virtual_stages {} = {}",
                            layers, pipeline, virtual_stages, chunks));
  }
  ChunkLayerSplit r;
  r.counts.assign(static_cast<size_t>(chunks), layers / chunks);
  return r;
}

std::string describe_pipeline_split(const PipelineSplit& split) {
  if (!split.layout.empty()) return fmt::format("layout {}", split.layout);
  if (split.first_stage_layers || split.last_stage_layers) {
    std::string out;
    if (split.first_stage_layers)
      out = fmt::format("first stage {} layers", *split.first_stage_layers);
    if (split.last_stage_layers) {
      out +=
          fmt::format("{}last stage {} layers", out.empty() ? "" : ", ", *split.last_stage_layers);
    }
    return out;
  }
  if (split.account_for_embedding && split.account_for_loss) {
    return "embedding and loss counted as layers";
  }
  if (split.account_for_embedding) return "embedding counted as a layer";
  if (split.account_for_loss) return "loss counted as a layer";
  return "";
}

}  // namespace upsim

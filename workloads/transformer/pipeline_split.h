// Megatron-Core's uneven pipeline splits: which decoder layers each model chunk holds when they
// are not split evenly over pipeline x virtual stages. Megatron-Core (Megatron-LM @ d98e8a6)
// has three ways, each a key of `parallelism` here:
// - `pipeline_layout` (--pipeline-model-parallel-layout;
//   megatron/core/transformer/pipeline_parallel_layer_layout.py): a string of stages split by
//   '|', each a run of layer symbols: E the embedding, t a decoder layer, m a multi-token
//   prediction layer, L the loss; `x*n` and `(...)*n` repeat, commas are cosmetic, a stage may
//   be empty. Stage i is pipeline rank i mod pipeline, model chunk i / pipeline, so the string
//   also fixes the virtual stages (stages / pipeline). E must open the first stage and L close
//   the last, once each; the t's must be the model's layers, the m's its multi-token prediction
//   layers (workload.mtp_layers; here only in the last stage, beside L). Megatron-Bridge's
//   DeepSeek-V3 H100 recipe runs "Et|(tt|)*30mL" on pipeline 8.
// - `account_for_embedding` / `account_for_loss` (--account-for-embedding-in-pipeline-split,
//   --account-for-loss-in-pipeline-split; transformer_block.py get_num_layers_to_build): the
//   embedding, the loss, each counts as one layer of an even split of layers + 1 (+ 1), and the
//   first (last) model chunk builds one decoder layer fewer. Megatron-Bridge's Qwen3-235B-A22B
//   recipes (94 layers on pipeline 8 x virtual 4) use both.
// - `first_stage_layers` / `last_stage_layers` (--decoder-first-pipeline-num-layers,
//   --decoder-last-pipeline-num-layers): the first (last) pipeline rank holds that many, split
//   evenly over its virtual stages; the other ranks split the rest evenly
//   (transformer_layer.py get_transformer_layer_offset).
// Layers are numbered in Megatron's order: virtual stage vs = chunk x pipeline + rank, the
// chunks' layers consecutive in vs order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace upsim {

/// The uneven-split keys as read (TransformerConfig's parallelism.split). Nothing stated: the
/// even split.
struct PipelineSplit {
  std::string layout;  ///< pipeline_layout as given; empty: none
  bool account_for_embedding = false;
  bool account_for_loss = false;
  std::optional<int64_t> first_stage_layers;
  std::optional<int64_t> last_stage_layers;
  bool stated() const { return !stated_key().empty(); }
  /// The first key stated (below parallelism), for an error about the split as a whole; empty
  /// when none is.
  std::string_view stated_key() const {
    if (!layout.empty()) return "pipeline_layout";
    if (first_stage_layers) return "first_stage_layers";
    if (last_stage_layers) return "last_stage_layers";
    if (account_for_embedding) return "account_for_embedding";
    if (account_for_loss) return "account_for_loss";
    return {};
  }
};

/// One stage of a pipeline layout: its symbols in order (E, t, m, L).
using LayoutStage = std::string;

/// Pure: `text` (Megatron-Core's layout syntax) expanded to its stages, in layout order.
/// Throws std::invalid_argument naming what is wrong: a symbol other than E, t, m, L, '|', ',',
/// '(', ')', '*'; a repeat without a count or of nothing; unbalanced or nested parentheses.
std::vector<LayoutStage> expand_pipeline_layout(std::string_view text);

/// The decoder layers of each model chunk, or why there is no such split.
struct ChunkLayerSplit {
  /// Layers per virtual stage (index chunk x pipeline + rank); empty when `error` is set.
  std::vector<int64_t> counts;
  /// Multi-token prediction layers per virtual stage (a layout's m's); empty without any.
  std::vector<int64_t> mtp_counts;
  std::string error;
  /// The key `error` is about (below parallelism): "pipeline_layout", "first_stage_layers", ...
  std::string key;
};

/// Pure: the chunks' decoder layers under `split` for `layers` decoder layers over `pipeline`
/// ranks of `virtual_stages` chunks each (a layout's own when it states one), with Megatron-
/// Core's checks: a layout's stage count a multiple of pipeline, E first and L last once each,
/// its t's equal to `layers`, its m's all in one last chunk of a rank (not the first rank's)
/// after every t; account_for_* not beside first / last_stage_layers; every rank's layers
/// divisible by its virtual stages, the middle ranks' remainder by their count; no chunk below
/// zero. `split` not stated: the even split (an error where it does not divide).
ChunkLayerSplit split_chunk_layers(const PipelineSplit& split, int64_t layers, int64_t pipeline,
                                   int64_t virtual_stages);

/// Pure: the split's description for a run's header, e.g. "layout Et|(tt|)*30mL",
/// "embedding and loss counted as layers", "first stage 2 layers, last 3"; empty when none.
std::string describe_pipeline_split(const PipelineSplit& split);

}  // namespace upsim

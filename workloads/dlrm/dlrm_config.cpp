#include "workloads/dlrm/dlrm_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/dlrm/hybrid_embedding.h"
#include "workloads/dlrm/sharding_search_space.h"

namespace upsim {

namespace {

/// Bounds the expanded table list (and the T x T interaction) to sizes a run can hold; real
/// DLRMs have at most a few thousand tables (the seed's tasks: 36 to 66).
constexpr int64_t kMaxTables = 65536;

// Input bounds, so that every size derived from them fits in 64 bits (table bytes <= 2^40 rows
// x 2^16 x 4 B = 2^58; activations <= 2^31 samples x 2^20 x 4 B = 2^53; weights <= 2^42) and the
// two totals that can still overflow (all tables' bytes, the embedding all-to-all's bytes) are
// checked below. Real models are far inside: production tables reach ~10^10 rows, dims 512.
constexpr int64_t kMaxRows = int64_t{1} << 40;
constexpr int64_t kMaxDim = int64_t{1} << 16;
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 31;
/// Bytes a total may reach (2^62: a quarter of int64, leaving room for sums of a few totals);
/// totals are checked in double precision, ample for a bound.
constexpr double kMaxTotalBytes = 4.611686018427387904e18;
/// Mean indices per bag (pooling, the seed's pooling factor, and their spread pooling_std):
/// real bags hold tens to thousands of indices; 10^6 is far past any and keeps global_batch x
/// pooling (< 2^31 x 2^20 = 2^51) an exact count in a double.
constexpr double kMaxPooling = 1e6;
/// The seed's `index`, the table's id in its data set (recorded, not used): a 31-bit id.
constexpr int64_t kMaxSeedIndex = (int64_t{1} << 31) - 1;
/// The widest element the tables or the all-to-all hold (fp32): the size bounds hold for all.
constexpr int64_t kMaxElementBytes = 4;
/// The most bytes one table element takes with its optimizer state (fp32 weight and Adam's two
/// fp32 moments).
constexpr int64_t kMaxTableElementBytes = 12;
/// The same for a data-parallel table, on every rank: fp32 weight, its dense fp32 gradient and
/// Adam's two fp32 moments.
constexpr int64_t kMaxDataParallelElementBytes = 16;

/// `node`'s integer value, or an error naming it when above `bound`.
int64_t at_most(const ConfigNode& node, int64_t value, int64_t bound, std::string_view what) {
  if (value > bound) {
    node.fail(fmt::format("{} is above the supported {} ({})", value, bound, what));
  }
  return value;
}

std::vector<int64_t> read_widths(const ConfigNode& workload, std::string_view key,
                                 size_t min_entries, std::string_view what) {
  const ConfigNode node = workload.child(key);
  std::vector<int64_t> widths = workload.get_int_list(key);
  if (widths.size() < min_entries) {
    node.fail(
        fmt::format("needs at least {} entries ({}), got {}", min_entries, what, widths.size()));
  }
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] <= 0) {
      node.fail(fmt::format("entry {} is {}; layer widths must be positive", i, widths[i]));
    }
    if (widths[i] > kMaxWidth) {
      node.fail(fmt::format("entry {} is {}; layer widths are at most {} (2^20)", i, widths[i],
                            kMaxWidth));
    }
  }
  return widths;
}

DType read_dtype(const ConfigNode& workload) {
  constexpr std::array<std::string_view, 4> kNames = {"fp32", "tf32", "fp16", "bf16"};
  constexpr std::array<DType, 4> kTypes = {DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16};
  const std::string name = workload.get_choice_or("dtype", kNames, "fp32");
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return kTypes[i];
  }
  workload.child("dtype").fail(fmt::format("unknown dtype `{}`", name));
}

/// fp32 | fp16 | bf16 at `key` (the storage types FBGEMM's embeddings and NCCL's all-to-all
/// carry; tf32 is a matmul mode, not a storage type).
DType read_storage_dtype(const ConfigNode& node, std::string_view key, DType default_value) {
  constexpr std::array<std::string_view, 3> kNames = {"fp32", "fp16", "bf16"};
  constexpr std::array<DType, 3> kTypes = {DType::kFp32, DType::kFp16, DType::kBf16};
  const std::string name = node.get_choice_or(key, kNames, dtype_name(default_value));
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return kTypes[i];
  }
  node.child(key).fail(fmt::format("unknown dtype `{}`", name));
}

ShardingStrategy read_sharding(const ConfigNode& workload) {
  const std::span<const ShardingStrategy> all = sharding_strategies();
  std::vector<std::string_view> names;
  for (const ShardingStrategy strategy : all)
    names.push_back(sharding_strategy_name(strategy));
  const std::string name = workload.get_choice_or(
      "sharding", names, sharding_strategy_name(ShardingStrategy::kSizeLookupGreedy));
  if (const std::optional<ShardingStrategy> s = sharding_strategy_named(name)) return *s;
  workload.child("sharding").fail(fmt::format("unknown sharder `{}`", name));
}

/// A reuse histogram at `node`: kReuseHistogramBins fractions (each in [0, 1]: bin_fractions,
/// bin_keys) summing to 1 (within 1%, the seed's files round them; rescaled to 1 exactly).
std::vector<double> read_histogram(const ConfigNode& node, const std::vector<double>& values) {
  if (values.size() != kReuseHistogramBins) {
    node.fail(
        fmt::format("a reuse histogram has {} bins, got {}", kReuseHistogramBins, values.size()));
  }
  double sum = 0.0;
  for (const double v : values)
    sum += v;
  if (std::abs(sum - 1.0) > 0.01) {
    node.fail(
        fmt::format("bin fractions must sum to 1 (fractions of the distinct rows), got {}", sum));
  }
  std::vector<double> out = values;
  for (double& v : out)
    v /= sum;
  return out;
}

/// A reuse histogram's bins as a list: fractions of the distinct rows, each in [0, 1].
std::vector<double> bin_fractions(const ConfigNode& node) {
  std::vector<double> out;
  if (!node.is_sequence()) node.fail("expected a sequence of numbers");
  for (const ConfigNode& item : node.items())
    out.push_back(item.as_double_in(0.0, 1.0));
  return out;
}

/// The histogram as bin_0 .. bin_16 keys of `group` (a CSV's columns, the seed's files), each in
/// [0, 1]; empty when none is given.
std::vector<double> bin_keys(const ConfigNode& group) {
  std::vector<double> bins;
  for (size_t b = 0; b < kReuseHistogramBins; ++b) {
    const std::string key = fmt::format("bin_{}", b);
    if (group.has(key)) bins.push_back(group.get_double_in(key, 0.0, 1.0));
  }
  return bins;
}

/// One entry of `embeddings.tables` (or of a tables_file): upsim's keys (count, rows, pooling,
/// pooling_std, reuse, access, zipf_alpha) or, when it has `num_embeddings`, the seed's
/// table-config keys (Lin et al., TPDS 2024 table configs: index, num_embeddings,
/// embedding_dim, pooling_factor, pooling_factor_std, bin_0 .. bin_16, rfs_<batch>, all_zero),
/// whose histogram is rfs_<global batch> when the file has one (the mean over 50 batches of that
/// size) and bin_0 .. bin_16 (one batch) otherwise.
/// nullopt: a seed table marked all_zero in a random task's pool (config.random_task), which the
/// seed drops; elsewhere such a table is an error.
std::optional<EmbeddingTable> read_table(const ConfigNode& group, const DlrmConfig& config) {
  const bool seed = group.has("num_embeddings");
  EmbeddingTable t;
  const std::string rows_key = seed ? "num_embeddings" : "rows";
  t.rows = group.get_int_in(rows_key, 1, kMaxRows);
  const std::string pooling_key = seed ? "pooling_factor" : "pooling";
  t.pooling = group.get_double_in(pooling_key, 0.0, kMaxPooling);
  const std::string std_key = seed ? "pooling_factor_std" : "pooling_std";
  if (group.has(std_key)) t.pooling_std = group.get_double_in(std_key, 0.0, kMaxPooling);
  if (seed) {
    group.get_int_in_or("index", 0, kMaxSeedIndex, 0);
    if (group.has("embedding_dim") &&
        group.get_int_in("embedding_dim", 1, kMaxDim) != config.embedding_dim) {
      group.child("embedding_dim")
          .fail(fmt::format("is {}, but the model's embeddings.dim is {} (one dim for all tables)",
                            group.get_int("embedding_dim"), config.embedding_dim));
    }
    const bool all_zero = group.get_bool_or("all_zero", false);
    if (all_zero && !config.random_task) {
      group.child("all_zero").fail("an all-zero table has no lookups (the seed drops them)");
    }
    const std::vector<double> bins = bin_keys(group);
    if (!bins.empty()) t.reuse_histogram = read_histogram(group, bins);
    for (const std::string& key : group.map_keys()) {
      if (!key.starts_with("rfs_")) continue;
      const ConfigNode rfs = group.child(key);
      const std::vector<double> h = read_histogram(rfs, bin_fractions(rfs));
      if (key == fmt::format("rfs_{}", config.global_batch)) t.reuse_histogram = h;
    }
    if (all_zero) return std::nullopt;
    return t;
  }
  if (group.has("reuse")) {
    const ConfigNode reuse = group.child("reuse");
    t.reuse_histogram = read_histogram(reuse, bin_fractions(reuse));
  }
  // The histogram as bin_0 .. bin_16 keys (a CSV's columns), as the seed's files write it.
  const std::vector<double> bins = bin_keys(group);
  if (!bins.empty()) {
    if (group.has("reuse")) group.child("bin_0").fail("give `reuse` or bin_0 .. bin_16, not both");
    t.reuse_histogram = read_histogram(group, bins);
  }
  if (group.get_choice_or("access", {"uniform", "zipf"}, "uniform") == "zipf") {
    if (!t.reuse_histogram.empty()) {
      group.child("access").fail("a table with a measured `reuse` histogram takes no access law");
    }
    t.zipf_alpha = group.get_double_in_or("zipf_alpha", 0.01, 10.0, 1.0);
  }
  return t;
}

/// `key` of a plan as a count that must equal `expected` (`what` says whose count it is).
void check_plan_count(const ConfigNode& plan, std::string_view key, size_t expected,
                      std::string_view what) {
  const int64_t count = plan.get_int(key);
  if (count < 0 || static_cast<uint64_t>(count) != expected) {
    plan.child(key).fail(
        fmt::format("the plan is for {} {}, but {} has {}", count, key, what, expected));
  }
}

/// A hybrid table's split: `frequent_rows` and `frequent_share` as stated (both or neither),
/// else derived from its access law (hybrid_split); refused on other types.
void read_hybrid_split(const ConfigNode& group, EmbeddingTable& table, const DlrmConfig& config,
                       uint32_t ranks) {
  const bool hybrid = table.sharding_type == EmbeddingShardingType::kHybrid;
  const bool rows_given = group.has("frequent_rows");
  const bool share_given = group.has("frequent_share");
  if (!hybrid) {
    for (const char* key : {"frequent_rows", "frequent_share"}) {
      if (group.has(key)) {
        group.child(key).fail(fmt::format("applies to hybrid tables only; this group is {}",
                                          embedding_sharding_type_name(table.sharding_type)));
      }
    }
    return;
  }
  if (rows_given != share_given) {
    group.child(rows_given ? "frequent_rows" : "frequent_share")
        .fail(
            "give frequent_rows and frequent_share together (the frequent rows and the share "
            "of the lookups that hit them), or neither to derive both from the access law");
  }
  if (rows_given) {
    table.frequent_rows = group.get_int_in("frequent_rows", 0, table.rows);
    table.frequent_share = group.get_double_in("frequent_share", 0.0, 1.0);
    return;
  }
  const std::optional<HybridSplit> split = hybrid_split(table, config.global_batch, ranks);
  if (!split) {
    group.child("sharding_type")
        .fail(
            "hybrid splits the frequent rows from the rest by their access counts, and a "
            "measured reuse histogram does not say which rows are hot: give frequent_rows and "
            "frequent_share, or the table's access law (access: zipf)");
  }
  table.frequent_rows = split->frequent_rows;
  table.frequent_share = split->frequent_share;
}

void read_embeddings(const ConfigNode& workload, DlrmConfig& config, uint32_t ranks) {
  const ConfigNode emb = workload.child("embeddings");
  config.embedding_dim = emb.get_int_in("dim", 1, kMaxDim);
  config.embedding_dtype = read_storage_dtype(emb, "dtype", DType::kFp32);
  config.index_bytes = emb.get_int_or("index_bytes", 8);
  if (config.index_bytes != 4 && config.index_bytes != 8) {
    emb.child("index_bytes")
        .fail(fmt::format("must be 8 (int64 indices) or 4 (int32), got {}", config.index_bytes));
  }
  const ConfigNode tables = dlrm_tables_node(workload);
  const std::vector<ConfigNode> groups = tables.items();
  if (!tables.is_sequence() || groups.empty()) {
    tables.fail(
        "needs at least one group of tables, e.g. - {count: 8, rows: 1000000, pooling: 20}");
  }
  int64_t total = 0;
  double total_bytes = 0.0;
  // The sharding types' names, and `auto`.
  std::vector<std::string_view> type_names;
  for (const EmbeddingShardingType t : embedding_sharding_types())
    type_names.push_back(embedding_sharding_type_name(t));
  type_names.push_back("auto");
  if (emb.has("random_task")) {
    const ConfigNode task = emb.child("random_task");
    RandomTaskSpec spec;
    spec.seed = static_cast<uint64_t>(
        task.get_int_in_or("seed", 0, std::numeric_limits<int64_t>::max(), 0));
    spec.task = static_cast<uint32_t>(task.get_int_in_or("task", 0, 1'000'000, 0));
    spec.heavy = task.get_bool_or("heavy", false);
    spec.heavy_pooling = task.get_double_in_or("heavy_pooling", 0.0, 1e6, 20.0);
    spec.tables_per_gpu = task.get_int_in_or("tables_per_gpu", 1, 4096, 13);
    spec.memory_fraction = task.get_double_in_or("memory_fraction", 1e-6, 1.0, 0.8);
    config.random_task = spec;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const ConfigNode& group = groups[g];
    const int64_t count =
        group.has("num_embeddings") ? 1 : group.get_int_in_or("count", 1, kMaxTables, 1);
    // A pool drops the tables the seed's datasets mark all-zero (no lookups), as the seed does.
    std::optional<EmbeddingTable> read = read_table(group, config);
    const bool type_given = group.states("sharding_type");
    const std::string type_name = group.get_choice_or("sharding_type", type_names, "table_wise");
    if (!read) continue;
    EmbeddingTable table = std::move(*read);
    const int64_t rows = table.rows;
    table.sharding_type =
        embedding_sharding_type_named(type_name).value_or(EmbeddingShardingType::kTableWise);
    // Table-wise until choose_sharding_types (or a plan) decides with the platform's memory.
    table.auto_sharding_type = type_name == "auto";
    table.sharding_type_stated = type_given && !table.auto_sharding_type;
    if (table.sharding_type == EmbeddingShardingType::kColumnWise) {
      table.column_shards = group.get_int_in_or("column_shards", 1, kMaxDim, 2);
      if (config.embedding_dim % table.column_shards != 0) {
        group.child("column_shards")
            .fail(fmt::format("{} shards do not divide embeddings.dim = {} (each column shard "
                              "holds dim / column_shards columns)",
                              table.column_shards, config.embedding_dim));
      }
    } else if (group.has("column_shards")) {
      group.child("column_shards")
          .fail(fmt::format("applies to column_wise tables only; this group is {}", type_name));
    }
    read_hybrid_split(group, table, config, ranks);
    total += count;
    if (total > kMaxTables) {
      group.child("count").fail(
          fmt::format("makes {} tables; at most {} are supported", total, kMaxTables));
    }
    const int64_t element_bytes = table.sharding_type == EmbeddingShardingType::kDataParallel ||
                                          table.sharding_type == EmbeddingShardingType::kHybrid
                                      ? kMaxDataParallelElementBytes
                                      : kMaxTableElementBytes;
    total_bytes += static_cast<double>(count) * static_cast<double>(rows) *
                   static_cast<double>(config.embedding_dim * element_bytes);
    if (total_bytes > kMaxTotalBytes) {
      group.child("rows").fail(fmt::format(
          "makes the tables hold over 2^62 bytes of weights and optimizer state ({} tables of {} "
          "rows x {} x {} B)",
          total, rows, config.embedding_dim, element_bytes));
    }
    config.tables.insert(config.tables.end(), static_cast<size_t>(count), table);
    config.group_of_table.insert(config.group_of_table.end(), static_cast<size_t>(count),
                                 static_cast<uint32_t>(g));
  }
}

/// `model` (dlrm), `mode` and `global_batch`, which must divide among `ranks`.
void read_mode_and_batch(const ConfigNode& workload, uint32_t ranks, DlrmConfig& config) {
  workload.get_choice("model", {"dlrm"});
  if (workload.get_choice_or("mode", {"train", "inference"}, "train") == "inference") {
    config.mode = DlrmMode::kInference;
  }

  config.global_batch =
      at_most(workload.child("global_batch"), workload.get_positive_int("global_batch"),
              kMaxGlobalBatch, "2^31 samples per iteration");
  if (config.global_batch % ranks != 0) {
    workload.child("global_batch")
        .fail(fmt::format("{} samples do not divide evenly among {} ranks (each rank trains on "
                          "global_batch / ranks samples)",
                          config.global_batch, ranks));
  }
}

/// The totals the tables' bounds leave unchecked: the all-to-all's bytes and the lookups'.
void check_embedding_totals(const ConfigNode& workload, const DlrmConfig& config) {
  // The embedding all-to-all moves global_batch x tables x dim fp32 values per iteration.
  const double exchanged = static_cast<double>(config.global_batch) *
                           static_cast<double>(config.tables.size()) *
                           static_cast<double>(config.embedding_dim * kMaxElementBytes);
  if (exchanged > kMaxTotalBytes) {
    workload.child("global_batch")
        .fail(fmt::format("{} samples x {} tables x {} values x 4 B is over 2^62 bytes per "
                          "embedding all-to-all",
                          config.global_batch, config.tables.size(), config.embedding_dim));
  }
  // The lookups gather global_batch x pooling rows of dim values (and as many indices) per table.
  double pooling_sum = 0.0;
  for (const EmbeddingTable& t : config.tables)
    pooling_sum += t.pooling;
  const double gathered =
      static_cast<double>(config.global_batch) * pooling_sum *
      static_cast<double>(std::max(config.embedding_dim * kMaxElementBytes, config.index_bytes));
  if (gathered > kMaxTotalBytes) {
    workload.child("global_batch")
        .fail(fmt::format("{} samples x {} lookups per sample (the tables' pooling summed) x {} "
                          "values x 4 B is over 2^62 bytes of embedding lookups per iteration",
                          config.global_batch, pooling_sum, config.embedding_dim));
  }
}

/// `master_weights` and `grad_scaler` (on by default for fp16 training with master weights).
void read_mixed_precision(const ConfigNode& workload, DlrmConfig& config) {
  config.master_weights = workload.get_bool_or("master_weights", false);
  if (config.master_weights && dtype_bytes(config.dtype) != 2) {
    workload.child("master_weights")
        .fail(fmt::format("mixed precision keeps fp32 master weights for a 16-bit dtype; dtype "
                          "is {}",
                          dtype_name(config.dtype)));
  }
  const bool training = config.mode == DlrmMode::kTrain;
  config.grad_scaler = workload.get_bool_or(
      "grad_scaler", training && config.master_weights && config.dtype == DType::kFp16);
  if (config.grad_scaler && !training) {
    workload.child("grad_scaler").fail("GradScaler scales a loss for backward; mode is inference");
  }
  if (config.grad_scaler && !config.master_weights) {
    workload.child("grad_scaler")
        .fail("GradScaler unscales fp32 master gradients; set master_weights: true with it");
  }
}

/// `input_dist` and `train_pipeline` (after `input` and `mode`).
void read_input_distribution(const ConfigNode& workload, DlrmConfig& config) {
  if (workload.get_choice_or("input_dist", {"local", "all_to_all"}, "local") == "all_to_all") {
    config.input_dist = InputDistribution::kAllToAll;
  }
  const std::string pipeline =
      workload.get_choice_or("train_pipeline", {"none", "sparse_dist", "semi_sync"}, "none");
  if (pipeline == "none") return;
  const ConfigNode key = workload.child("train_pipeline");
  if (config.mode != DlrmMode::kTrain) {
    key.fail(pipeline +
             " overlaps the next training batch's input distribution with this step's forward "
             "and backward; mode is inference");
  }
  if (config.input_dist != InputDistribution::kAllToAll) {
    key.fail(pipeline +
             " pipelines TorchRec's input distribution; set input_dist: all_to_all with it");
  }
  if (config.input != InputPipeline::kPrefetch) {
    key.fail(pipeline +
             " copies a later batch on a memcpy stream while batch i runs; set input: prefetch "
             "with it");
  }
  config.train_pipeline =
      pipeline == "semi_sync" ? TrainPipeline::kSemiSync : TrainPipeline::kSparseDist;
}

/// `loss_to_host`, `input` (blocking; prefetch in training; preloaded in inference) and
/// `cuda_graphs`.
void read_input_pipeline(const ConfigNode& workload, DlrmConfig& config, uint32_t ranks) {
  const bool training = config.mode == DlrmMode::kTrain;
  const std::string input =
      workload.get_choice_or("input", {"blocking", "prefetch", "preloaded"}, "blocking");
  if (input == "prefetch") {
    if (!training) {
      workload.child("input").fail(
          "prefetch copies the next batch after a training step's optimizer; mode inference "
          "copies each served batch as it comes (input: blocking) or finds it on the device "
          "(input: preloaded)");
    }
    config.input = InputPipeline::kPrefetch;
  }
  if (input == "preloaded") {
    if (training) {
      workload.child("input").fail(
          "preloaded is an inference step whose batch is on the device before it starts; a "
          "training step copies its batch (input: blocking or prefetch)");
    }
    config.input = InputPipeline::kPreloaded;
  }
  read_input_distribution(workload, config);
  // TorchRec's TrainPipelineSparseDist.progress returns the output without reading the loss.
  config.loss_to_host =
      workload.get_bool_or("loss_to_host", config.train_pipeline == TrainPipeline::kNone);
  config.cuda_graphs = workload.get_bool_or("cuda_graphs", false);
  if (!config.cuda_graphs) return;
  if (config.input_dist == InputDistribution::kAllToAll) {
    workload.child("cuda_graphs")
        .fail(
            "input_dist: all_to_all reads the splits all-to-all back on the host (.tolist()) "
            "inside the forward, which a capture cannot; TorchRec does not capture it either");
  }
  // A capture may not synchronise the host (CUDA forbids it on a capturing stream): what the
  // captured forward and backward would wait for must happen outside them.
  if (training && config.input != InputPipeline::kPrefetch) {
    workload.child("cuda_graphs")
        .fail(
            "a captured training step copies its batch into the graph's static inputs from a "
            "prefetched batch (DeepLearningExamples' CudaGraphWrapper); with input: blocking "
            "the loss would copy the targets inside the capture and wait for them: set input: "
            "prefetch");
  }
  if (training && config.loss_to_host) {
    workload.child("cuda_graphs")
        .fail(
            "loss_to_host copies the loss to the host inside the captured forward and waits "
            "for it, which a capture cannot; DeepLearningExamples keeps the loss on the GPU: "
            "set loss_to_host: false");
  }
  if (!training && ranks > 1) {
    workload.child("cuda_graphs")
        .fail(fmt::format("a captured forward is modelled on one rank (DeepLearningExamples' "
                          "graphed inference benchmark); this run has {} ranks",
                          ranks));
  }
}

/// The MLPs (`bottom_mlp`, its placement, `top_mlp`), the interaction and the kernels of both.
void read_dense_network(const ConfigNode& workload, DlrmConfig& config) {
  config.bottom_mlp = read_widths(workload, "bottom_mlp", 2, "input features, then layer widths");
  if (workload.get_choice_or("bottom_mlp_placement", {"data_parallel", "first_rank"},
                             "data_parallel") == "first_rank") {
    config.bottom_mlp_placement = BottomMlpPlacement::kFirstRank;
    if (config.input_dist == InputDistribution::kAllToAll) {
      workload.child("bottom_mlp_placement")
          .fail(
              "first_rank is DeepLearningExamples' hybrid parallel, whose loader gives each "
              "rank its own tables' indices (input_dist: local); TorchRec's input_dist: "
              "all_to_all runs the bottom MLP data-parallel");
    }
  }
  if (config.bottom_mlp.back() != config.embedding_dim) {
    workload.child("bottom_mlp")
        .fail(fmt::format("ends with {}, but the interaction stacks the bottom MLP output with "
                          "the pooled embeddings, so it must equal embeddings.dim = {}",
                          config.bottom_mlp.back(), config.embedding_dim));
  }
  config.top_mlp = read_widths(workload, "top_mlp", 1, "layer widths");
  if (config.top_mlp.back() != 1) {
    workload.child("top_mlp").fail(fmt::format(
        "ends with {}, but binary_cross_entropy needs one output (1)", config.top_mlp.back()));
  }
  if (workload.get_choice_or("interaction", {"dot", "dcnv2"}, "dot") == "dcnv2") {
    config.interaction = DlrmInteraction::kDcnV2;
    config.cross_layers = workload.get_int_in_or("cross_layers", 1, 64, 3);
    config.cross_rank = workload.get_int_in_or("cross_rank", 1, int64_t{1} << 16, 512);
  }
  const std::string interaction_kernel =
      workload.get_choice_or("interaction_kernel", {"aten", "fused", "xla"}, "aten");
  if (interaction_kernel == "fused") config.interaction_kernel = InteractionKernel::kFused;
  if (interaction_kernel == "xla") {
    if (config.interaction != DlrmInteraction::kDcnV2) {
      workload.child("interaction_kernel")
          .fail(
              "xla is DCN V2's cross network as XLA compiles TensorFlow's Cross layer; the dot "
              "interaction has no XLA model (aten or fused)");
    }
    config.interaction_kernel = InteractionKernel::kXla;
  }
  const std::string mlp_kernels =
      workload.get_choice_or("mlp_kernels", {"aten", "apex_fused", "cublaslt_fused"}, "aten");
  if (mlp_kernels == "cublaslt_fused") config.mlp_kernels = MlpKernels::kCublasLtFused;
  if (mlp_kernels == "apex_fused") {
    config.mlp_kernels = MlpKernels::kApexFused;
  }
}

/// `sharding`, `sharding_seed` and, for sharding: plan, the plan file checked against the tables
/// and the `ranks`.
void read_sharding_choice(const ConfigNode& workload, uint32_t ranks, DlrmConfig& config) {
  config.sharding = read_sharding(workload);
  const int64_t seed = workload.get_int_or("sharding_seed", 0);
  if (seed < 0) {
    workload.child("sharding_seed").fail(fmt::format("must be >= 0, got {}", seed));
  }
  config.sharding_seed = static_cast<uint64_t>(seed);
  const bool has_plan = workload.has("sharding_plan") && !workload.child("sharding_plan").is_null();
  if (config.sharding == ShardingStrategy::kPlan) {
    if (!has_plan) {
      workload.child("sharding")
          .fail(
              "`plan` places tables as workload.sharding_plan says; give that file (upsim shard "
              "writes one)");
    }
    if (config.random_task) {
      workload.child("sharding_plan")
          .fail(
              "a plan places a fixed table list, but embeddings.random_task draws the tables "
              "for the platform; rank the sharders on the task with `upsim shard`");
    }
    const ConfigNode plan = workload.load_reference("sharding_plan");
    config.sharding_plan =
        read_sharding_plan(plan, config.tables, config.embedding_dim, config.global_batch, ranks);
    const uint32_t tableless = dlrm_tableless_ranks(config, ranks);
    const bool by_rank = plan.has("rank_of_table");
    for (size_t t = 0; t < config.sharding_plan.size(); ++t) {
      for (const uint32_t rank : config.sharding_plan[t].ranks) {
        if (rank >= tableless) continue;
        const ConfigNode at =
            by_rank ? plan.child("rank_of_table") : plan.child("placement").items()[t];
        at.fail(
            fmt::format("entry {} (table {}) is on rank {}, which runs the bottom MLP alone "
                        "and holds no table (bottom_mlp_placement: first_rank on more than "
                        "{} ranks)",
                        t, t, rank, kHybridTablelessAbove));
      }
    }
  } else if (has_plan) {
    workload.child("sharding_plan")
        .fail(fmt::format("is read only with sharding: plan, but workload.sharding is `{}`",
                          sharding_strategy_name(config.sharding)));
  }
}

/// DDP's bucket capacities (`ddp_bucket`, `ddp_first_bucket`).
void read_ddp_buckets(const ConfigNode& workload, DlrmConfig& config) {
  config.ddp_bucket_bytes = workload.get_bytes_or("ddp_bucket", pytorch::kDefaultDdpBucketBytes);
  if (config.ddp_bucket_bytes <= 0) workload.child("ddp_bucket").fail("must be positive");
  config.ddp_first_bucket_bytes =
      workload.get_bytes_or("ddp_first_bucket", pytorch::kDefaultDdpFirstBucketBytes);
  if (config.ddp_first_bucket_bytes <= 0) {
    workload.child("ddp_first_bucket").fail("must be positive");
  }
}

/// The dense `optimizer`, the embeddings' fused optimizer (the dense one's by default; adamw's
/// fused counterpart is adam) and the embeddings' `update`.
void read_optimizers(const ConfigNode& workload, DlrmConfig& config) {
  const std::string dense =
      workload.get_choice_or("optimizer", {"sgd", "adagrad", "adam", "adamw"}, "sgd");
  config.dense_optimizer = dense == "sgd"       ? OptimizerKind::kSgd
                           : dense == "adagrad" ? OptimizerKind::kAdagrad
                           : dense == "adam"    ? OptimizerKind::kAdam
                                                : OptimizerKind::kAdamW;
  const ConfigNode emb = workload.child("embeddings");
  const bool optimizer_given = emb.has("optimizer");
  const std::string fused =
      emb.get_choice_or("optimizer", {"sgd", "adagrad", "rowwise_adagrad", "adam"},
                        dense == "adamw" ? std::string("adam") : dense);
  config.optimizer = fused == "sgd"               ? EmbeddingOptimizer::kSgd
                     : fused == "adagrad"         ? EmbeddingOptimizer::kAdagrad
                     : fused == "rowwise_adagrad" ? EmbeddingOptimizer::kRowWiseAdagrad
                                                  : EmbeddingOptimizer::kAdam;
  if (emb.get_choice_or("update", {"fused", "sparse"}, "fused") == "sparse") {
    if (config.optimizer != EmbeddingOptimizer::kSgd) {
      emb.child("update").fail(
          fmt::format("a sparse gradient is applied by torch.optim.SGD's index_add_, but "
                      "embeddings.optimizer is {}{}; use update: fused for it",
                      fused, optimizer_given ? "" : " (the dense optimizer's, as none is given)"));
    }
    config.embedding_update = EmbeddingUpdate::kScatterAdd;
  }
}

/// `embeddings.two_d` (TorchRec's DMPCollection, two_d_parallel.h): the sharding group size,
/// which must divide the `ranks`, the sync interval and the group layout.
void read_two_d(const ConfigNode& workload, uint32_t ranks, DlrmConfig& config) {
  const ConfigNode emb = workload.child("embeddings");
  if (!emb.has("two_d") || emb.child("two_d").is_null()) return;
  const ConfigNode two_d = emb.child("two_d");
  const auto size = static_cast<uint32_t>(two_d.get_int_in("sharding_group_size", 1, 1 << 20));
  if (ranks % size != 0) {
    two_d.child("sharding_group_size")
        .fail(fmt::format("{} does not divide the run's {} ranks (DMPCollection makes "
                          "world size / sharding_group_size replicas of one sharding group)",
                          size, ranks));
  }
  config.two_d.sharding_group_size = size;
  config.two_d.sync_interval =
      static_cast<uint32_t>(two_d.get_int_in_or("sync_interval", 1, 1'000'000, 1));
  config.two_d.inter_host_allreduce = two_d.get_bool_or("inter_host_allreduce", false);
  config.two_d.sync_optimizer_state = two_d.get_bool_or("sync_optimizer_state", true);
}

/// Refuses what `embeddings.two_d` is not modelled with (after every other key is read).
void check_two_d(const ConfigNode& workload, const DlrmConfig& config) {
  if (config.two_d.sharding_group_size == 0) return;
  const ConfigNode two_d = workload.child("embeddings").child("two_d");
  for (size_t t = 0; t < config.tables.size(); ++t) {
    const EmbeddingShardingType type = config.tables[t].sharding_type;
    if (type != EmbeddingShardingType::kTableRowWise && type != EmbeddingShardingType::kHybrid) {
      continue;
    }
    const std::vector<ConfigNode> groups = dlrm_tables_node(workload).items();
    const uint32_t group = config.group_of_table[t];
    const std::string why = fmt::format(
        "is {}, which is not modelled under embeddings.two_d ({}); use table_wise, row_wise, "
        "column_wise or data_parallel",
        embedding_sharding_type_name(type),
        type == EmbeddingShardingType::kHybrid
            ? "HugeCTR's split is no TorchRec sharding type"
            : "its node groups would have to follow the sharding groups' layout");
    if (group < groups.size() && groups[group].has("sharding_type")) {
      groups[group].child("sharding_type").fail(why);
    }
    two_d.fail(fmt::format("table {} {}", t, why));
  }
  if (config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank) {
    workload.child("bottom_mlp_placement")
        .fail(
            "first_rank is DeepLearningExamples' hybrid parallel; embeddings.two_d is "
            "TorchRec's DMPCollection, whose bottom MLP is data-parallel");
  }
  if (config.cuda_graphs) {
    workload.child("cuda_graphs")
        .fail(
            "a captured step is not modelled with embeddings.two_d (TorchRec's pipeline runs "
            "the replica sync eagerly between backward and the optimizer)");
  }
  if (config.embedding_update == EmbeddingUpdate::kScatterAdd) {
    workload.child("embeddings")
        .child("update")
        .fail(
            "sparse is PyTorch's sparse gradient; embeddings.two_d syncs TorchRec's fused "
            "FBGEMM tables (update: fused)");
  }
  if (config.two_d.sync_optimizer_state && config.optimizer == EmbeddingOptimizer::kAdam &&
      config.mode == DlrmMode::kTrain) {
    two_d.child("sync_optimizer_state")
        .fail(
            "DMPCollection._sync averages each fused optimizer state's \"sum\" tensor, which "
            "adam's state (exp_avg, exp_avg_sq) lacks; set sync_optimizer_state: false or use "
            "sgd, adagrad or rowwise_adagrad");
  }
}

}  // namespace

ConfigNode dlrm_tables_node(const ConfigNode& workload) {
  // The tables inline, or a file of them (table statistics: upsim's keys or the seed's table
  // configs, whose JSON is YAML). A null `tables` counts as absent (so that --set can switch a
  // scenario to a file).
  const ConfigNode emb = workload.child("embeddings");
  const bool inline_tables = emb.has("tables") && !emb.child("tables").is_null();
  if (inline_tables && emb.has("tables_file")) {
    emb.child("tables_file").fail("give `tables` or `tables_file`, not both");
  }
  if (!emb.has("tables_file")) return emb.child("tables");
  // A CSV file loads as the list itself (one table group per line).
  const ConfigNode loaded = emb.load_reference("tables_file");
  if (loaded.is_sequence()) return loaded;
  loaded.expect_map(
      "a tables file: a `tables` list in YAML or JSON, or a CSV table under a header line");
  return loaded.child("tables");
}

int64_t DlrmConfig::interaction_pairs() const {
  const auto t = static_cast<int64_t>(tables.size());
  return t * (t + 1) / 2;
}

DlrmConfig parse_dlrm_config(const ConfigNode& workload, uint32_t ranks) {
  if (ranks == 0) workload.fail("a DLRM run needs at least one rank");
  DlrmConfig config;
  read_mode_and_batch(workload, ranks, config);
  config.dtype = read_dtype(workload);
  read_two_d(workload, ranks, config);
  // The tables are sharded over one sharding group's ranks (all of them without two_d).
  const uint32_t shard_ranks = config.sharding_ranks(ranks);
  read_embeddings(workload, config, shard_ranks);
  config.all_to_all_dtype =
      read_storage_dtype(workload, "all_to_all_dtype", config.embedding_dtype);
  check_embedding_totals(workload, config);
  read_mixed_precision(workload, config);
  read_input_pipeline(workload, config, ranks);
  read_dense_network(workload, config);
  read_sharding_choice(workload, shard_ranks, config);
  read_ddp_buckets(workload, config);
  read_optimizers(workload, config);
  check_two_d(workload, config);
  return config;
}

namespace {

/// The `rank_of_table` form: every table table-wise, on the rank listed.
std::vector<PlannedTable> read_rank_of_table(const ConfigNode& plan,
                                             std::span<EmbeddingTable> tables, uint32_t ranks) {
  const ConfigNode list = plan.child("rank_of_table");
  const std::vector<int64_t> values = plan.get_int_list("rank_of_table");
  if (values.size() != tables.size()) {
    list.fail(fmt::format("lists {} ranks, one per table is needed: the model has {} tables",
                          values.size(), tables.size()));
  }
  std::vector<PlannedTable> out(values.size());
  for (size_t t = 0; t < values.size(); ++t) {
    if (values[t] < 0 || values[t] >= static_cast<int64_t>(ranks)) {
      list.fail(fmt::format("entry {} (table {}) is rank {}; the run's ranks are 0-{}", t, t,
                            values[t], ranks - 1));
    }
    const EmbeddingShardingType type = tables[t].sharding_type;
    if (tables[t].sharding_type_stated && type != EmbeddingShardingType::kTableWise) {
      list.fail(fmt::format(
          "entry {} (table {}) places a {} table; a rank_of_table plan places table-wise "
          "tables only (give its group sharding_type: table_wise or auto, or write the plan's "
          "`placement` list)",
          t, t, embedding_sharding_type_name(type)));
    }
    out[t].ranks = {static_cast<uint32_t>(values[t])};
  }
  return out;
}

/// One entry of the `placement` form: {type, rank | ranks | node}.
PlannedTable read_placement_entry(const ConfigNode& entry, size_t t, const EmbeddingTable& table,
                                  int64_t dim, uint32_t ranks) {
  entry.expect_map(
      "a table's placement: {type: table_wise, rank: 0}, {type: column_wise, "
      "ranks: [0, 1]}, {type: row_wise}, {type: data_parallel} or "
      "{type: table_row_wise, node: 0}");
  std::vector<std::string_view> names;
  for (const EmbeddingShardingType type : embedding_sharding_types())
    names.push_back(embedding_sharding_type_name(type));
  const std::string name = entry.get_choice("type", names);
  PlannedTable out;
  out.type = *embedding_sharding_type_named(name);
  if (table.sharding_type_stated && out.type != table.sharding_type) {
    entry.child("type").fail(fmt::format(
        "table {}'s group states sharding_type: {}, which a plan keeps; this entry makes it {} "
        "(leave the group's sharding_type out, or set it to auto, to let a plan choose)",
        t, embedding_sharding_type_name(table.sharding_type), name));
  }
  const auto rank_at = [&](const ConfigNode& at, int64_t value) {
    if (value < 0 || value >= static_cast<int64_t>(ranks)) {
      at.fail(fmt::format("table {}: rank {}; the run's ranks are 0-{}", t, value, ranks - 1));
    }
    return static_cast<uint32_t>(value);
  };
  const auto refuse = [&](std::string_view key, std::string_view why) {
    if (entry.has(key)) {
      entry.child(key).fail(fmt::format("table {} is {}: {}", t, name, why));
    }
  };
  switch (out.type) {
    case EmbeddingShardingType::kTableWise:
      refuse("ranks", "give its one `rank`");
      refuse("node", "it has a rank, not a node");
      out.ranks = {rank_at(entry.child("rank"), entry.get_int("rank"))};
      break;
    case EmbeddingShardingType::kColumnWise: {
      refuse("rank", "give `ranks`, one per column shard");
      refuse("node", "its shards have ranks, not a node");
      const ConfigNode list = entry.child("ranks");
      const std::vector<int64_t> values = entry.get_int_list("ranks");
      const auto shards = static_cast<int64_t>(values.size());
      if (shards < 1 || dim % shards != 0) {
        list.fail(
            fmt::format("table {}: {} column shards (one rank each) do not divide "
                        "embeddings.dim = {}",
                        t, shards, dim));
      }
      if (table.sharding_type_stated && shards != table.column_shards) {
        list.fail(fmt::format("table {}'s group states {} column shards; this entry lists {} ranks",
                              t, table.column_shards, shards));
      }
      const std::vector<ConfigNode> items = list.items();
      for (size_t k = 0; k < values.size(); ++k)
        out.ranks.push_back(rank_at(items[k], values[k]));
      break;
    }
    case EmbeddingShardingType::kTableRowWise: {
      refuse("rank", "its rows span a node's ranks; give its `node`");
      refuse("ranks", "its rows span a node's ranks; give its `node`");
      // The node count comes with the platform: shard_tables checks the upper bound.
      const int64_t node = entry.get_int_in("node", 0, static_cast<int64_t>(ranks) - 1);
      out.node = static_cast<uint32_t>(node);
      break;
    }
    case EmbeddingShardingType::kRowWise:
    case EmbeddingShardingType::kDataParallel:
    case EmbeddingShardingType::kHybrid:
      refuse("rank", "it spans every rank");
      refuse("ranks", "it spans every rank");
      refuse("node", "it spans every rank");
      break;
  }
  return out;
}

/// The `placement` form: one entry per table, each with its type.
std::vector<PlannedTable> read_placement(const ConfigNode& plan, std::span<EmbeddingTable> tables,
                                         int64_t dim, uint32_t ranks) {
  const ConfigNode list = plan.child("placement");
  const std::vector<ConfigNode> items = list.items();
  if (!list.is_sequence() || items.size() != tables.size()) {
    list.fail(
        fmt::format("needs one entry per table, in table-id order: the model has {} tables, "
                    "the list {}",
                    tables.size(), items.size()));
  }
  std::vector<PlannedTable> out;
  out.reserve(items.size());
  double total_bytes = 0.0;
  for (size_t t = 0; t < items.size(); ++t) {
    out.push_back(read_placement_entry(items[t], t, tables[t], dim, ranks));
    const EmbeddingShardingType type = out.back().type;
    const int64_t element_bytes =
        type == EmbeddingShardingType::kDataParallel || type == EmbeddingShardingType::kHybrid
            ? kMaxDataParallelElementBytes
            : kMaxTableElementBytes;
    total_bytes += static_cast<double>(tables[t].rows) * static_cast<double>(dim * element_bytes);
    if (total_bytes > kMaxTotalBytes) {
      items[t].fail(
          fmt::format("makes the tables hold over 2^62 bytes of weights, gradients and "
                      "optimizer state (table {}: {} rows x {} x {} B)",
                      t, tables[t].rows, dim, element_bytes));
    }
  }
  return out;
}

}  // namespace

std::vector<PlannedTable> read_sharding_plan(const ConfigNode& plan,
                                             std::span<EmbeddingTable> model_tables, int64_t dim,
                                             int64_t global_batch, uint32_t ranks) {
  plan.expect_map(
      "a sharding plan, as `upsim shard` writes it: tables: N, ranks: N and rank_of_table: "
      "[...] or placement: [...]");
  check_plan_count(plan, "tables", model_tables.size(), "the model");
  check_plan_count(plan, "ranks", ranks, "the run");
  const bool by_rank = plan.has("rank_of_table");
  if (by_rank == plan.has("placement")) {
    plan.fail(by_rank ? "give `rank_of_table` or `placement`, not both"
                      : "needs `rank_of_table` (table-wise tables: one rank each) or `placement` "
                        "(one {type, rank | ranks | node} per table)");
  }
  std::vector<PlannedTable> out = by_rank ? read_rank_of_table(plan, model_tables, ranks)
                                          : read_placement(plan, model_tables, dim, ranks);
  // The plan decides each table's type (a stated one it matches, checked above); a table it
  // makes hybrid splits by its access law (a group stating hybrid has its split already).
  std::vector<TypeChoice> types;
  for (const PlannedTable& p : out)
    types.push_back({p.type, p.type == EmbeddingShardingType::kColumnWise
                                 ? static_cast<int64_t>(p.ranks.size())
                                 : 1});
  try {
    apply_type_choices(model_tables, types, global_batch, ranks);
  } catch (const ShardingError& e) {
    plan.child("placement")
        .items()
        .at(e.table().value_or(0))
        .fail(std::string(e.what()) +
              " (state sharding_type: hybrid with frequent_rows and frequent_share in its group)");
  }
  return out;
}

std::string sharding_plan_entry(const PlannedTable& entry) {
  std::string out = fmt::format("{{type: {}", embedding_sharding_type_name(entry.type));
  if (entry.type == EmbeddingShardingType::kTableWise) {
    out += fmt::format(", rank: {}", entry.ranks.at(0));
  } else if (entry.type == EmbeddingShardingType::kColumnWise) {
    out += fmt::format(", ranks: [{}]", fmt::join(entry.ranks, ", "));
  } else if (entry.type == EmbeddingShardingType::kTableRowWise) {
    out += fmt::format(", node: {}", entry.node);
  }
  return out + "}";
}

ShardingInput dlrm_sharding_input(const DlrmConfig& config,
                                  std::span<const int64_t> rank_capacity_bytes) {
  ShardingInput input{config.tables,
                      config.embedding_dim,
                      config.optimizer,
                      rank_capacity_bytes,
                      dtype_bytes(config.embedding_dtype),
                      config.sharding_plan};
  input.dense_optimizer = config.dense_optimizer;
  return input;
}

uint32_t dlrm_tableless_ranks(const DlrmConfig& config, uint32_t ranks) {
  return config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank &&
                 ranks > kHybridTablelessAbove
             ? 1
             : 0;
}

void draw_dlrm_random_task(DlrmConfig& config, uint32_t gpus, int64_t gpu_memory_bytes) {
  if (!config.random_task || config.pool_tables != 0) return;
  const std::vector<uint32_t> drawn = draw_random_task(config.tables, config.embedding_dim,
                                                       *config.random_task, gpus, gpu_memory_bytes);
  std::vector<EmbeddingTable> task;
  std::vector<uint32_t> groups;
  task.reserve(drawn.size());
  for (const uint32_t t : drawn) {
    task.push_back(config.tables[t]);
    groups.push_back(config.group_of_table[t]);
  }
  config.pool_tables = config.tables.size();
  config.task_tables = drawn;
  config.tables = std::move(task);
  config.group_of_table = std::move(groups);
}

void choose_sharding_types(DlrmConfig& config, uint32_t ranks, int64_t rank_capacity_bytes) {
  if (ranks <= 1) return;
  const int64_t wire = dtype_bytes(config.all_to_all_dtype);
  const int64_t weight = dtype_bytes(config.embedding_dtype);
  double total_work = 0.0;  // sum over tables of pooling x dim: the lookups' bytes per sample
  for (const EmbeddingTable& t : config.tables)
    total_work += t.pooling * static_cast<double>(config.embedding_dim);
  const double per_rank_work = total_work / static_cast<double>(ranks);
  for (EmbeddingTable& t : config.tables) {
    if (!t.auto_sharding_type) continue;
    const int64_t bytes = table_memory_bytes(t, config.embedding_dim, config.optimizer, weight);
    const double work = t.pooling * static_cast<double>(config.embedding_dim);
    // The table's share of the exchange: its pooled rows out and their gradients back.
    const int64_t exchanged = 2 * config.global_batch * config.embedding_dim * wire;
    const int64_t replica = t.rows * config.embedding_dim *
                            (2 * weight + 4 * dense_optimizer_states(config.dense_optimizer));
    if (t.rows * config.embedding_dim * weight <= exchanged &&
        replica <= rank_capacity_bytes / 16) {
      t.sharding_type = EmbeddingShardingType::kDataParallel;
    } else if (bytes > rank_capacity_bytes / 2 || work > 2.0 * per_rank_work) {
      t.sharding_type = EmbeddingShardingType::kRowWise;
    } else {
      t.sharding_type = EmbeddingShardingType::kTableWise;
    }
  }
}

TablePlacement place_dlrm_tables(const DlrmConfig& config,
                                 std::span<const int64_t> rank_capacity_bytes,
                                 uint32_t ranks_per_node) {
  ShardingInput input = dlrm_sharding_input(config, rank_capacity_bytes);
  input.ranks_per_node = ranks_per_node;
  // The sharder keeps table-wise tables and column-wise shards off the tableless ranks (row-wise
  // and data-parallel tables still span them); a plan numbers the run's ranks.
  input.tableless_ranks =
      dlrm_tableless_ranks(config, static_cast<uint32_t>(rank_capacity_bytes.size()));
  return shard_tables(input, config.sharding, config.sharding_seed);
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> dlrm_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"mode", "a training step (train) or a served batch, forward only (inference)"},
      {"global_batch", "samples per iteration over all ranks"},
      {"dtype", "element type of the MLP parameters, activations and gradients"},
      {"bottom_mlp[]", "dense input features, then the bottom MLP's layer widths"},
      {"top_mlp[]", "the top MLP's layer widths; the last is 1 (the logit)"},
      {"interaction", "how the bottom MLP output meets the pooled embeddings: dot or DCN V2"},
      {"interaction_kernel",
       "interaction as ATen ops, or fused: DeepLearningExamples' dot kernel, HugeCTR's cross "
       "layer; or xla: TensorFlow's cross layer as XLA fuses it"},
      {"mlp_kernels",
       "MLP layers as ATen addmm + relu, apex's fused MLP, or HugeCTR's cuBLASLt-epilogue "
       "layers"},
      {"master_weights",
       "mixed precision as torch.autocast runs it: fp32 parameters and optimizer"},
      {"grad_scaler",
       "torch.cuda.amp.GradScaler: scaled loss, unscale and found_inf read per step"},
      {"cuda_graphs", "the step replayed as a captured CUDA graph (DeepLearningExamples' DLRM)"},
      {"loss_to_host",
       "the loss is copied to the host every step (the host waits for the forward)"},
      {"input",
       "how a batch reaches the GPU: blocking copies, prefetched on a side stream, or already "
       "there (inference)"},
      {"input_dist",
       "how ranks get their lookups' indices: loaded locally, or TorchRec's all-to-alls"},
      {"train_pipeline",
       "none, or TorchRec's TrainPipelineSparseDist (next batch's input distribution overlapped) "
       "or TrainPipelineSemiSync (also the next batch's embedding exchange overlapped)"},
      {"bottom_mlp_placement",
       "bottom MLP data-parallel on every rank, or on rank 0 alone (DeepLearningExamples' hybrid "
       "parallel)"},
      {"all_to_all_dtype", "element type of the embedding all-to-all's payload"},
      {"embeddings.dim", "embedding vector width, every table"},
      {"embeddings.dtype", "element type of the table weights and lookups"},
      {"embeddings.index_bytes", "bytes per lookup index (8: int64, 4: int32)"},
      {"embeddings.optimizer", "optimizer fused into the embedding backward (FBGEMM)"},
      {"embeddings.update",
       "fused: FBGEMM's backward updates each row once; sparse: PyTorch's sparse gradient"},
      {"embeddings.two_d.sharding_group_size",
       "TorchRec 2D parallel (DMPCollection): ranks each sharding group spans"},
      {"embeddings.two_d.sync_interval",
       "iterations between the replicas' weight averaging (dmp_collection_sync_interval_batches)"},
      {"embeddings.two_d.inter_host_allreduce",
       "sharding groups contiguous and replica groups strided (use_inter_host_allreduce)"},
      {"embeddings.two_d.sync_optimizer_state",
       "the fused optimizer's state averaged with the weights (include_optimizer_state)"},
      {"embeddings.tables[].count", "identical tables in this group"},
      {"embeddings.tables[].rows", "rows per table of this group"},
      {"embeddings.tables[].pooling", "mean lookups per bag (per sample and table)"},
      {"embeddings.tables[].access", "access law of a batch's lookups: uniform or zipf"},
      {"embeddings.tables[].sharding_type",
       "how each table of the group is split over ranks (TorchRec's ShardingType)"},
      {"sharding", "the sharder that places table-wise tables and column shards on ranks"},
      {"sharding_seed", "seed of the random sharder"},
      {"ddp_bucket", "DDP gradient bucket size (bucket_cap_mb)"},
      {"ddp_first_bucket", "DDP first-bucket size limit"},
      {"optimizer", "dense MLP optimizer (torch.optim, foreach)"},
      {"cross_layers", "DCN V2 cross layers"},
      {"cross_rank", "DCN V2 low-rank projection width"},
      {"embeddings.tables[].pooling_std", "standard deviation of the lookups per bag (recorded)"},
      {"embeddings.tables[].zipf_alpha", "exponent of the zipf access law"},
      {"embeddings.tables[].reuse[]", "the seed's 17-bin reuse histogram of a batch's lookups"},
      {"embeddings.tables[].column_shards", "column_wise: shards per table"},
      {"embeddings.tables[].frequent_rows", "hybrid: rows replicated on every rank"},
      {"embeddings.tables[].frequent_share", "hybrid: share of lookups that hit the frequent rows"},
      {"sharding_plan.tables", "tables the plan places (the model's table count)"},
      {"sharding_plan.ranks", "ranks the plan places on (the run's)"},
      {"sharding_plan.placement[].type", "the table's sharding type"},
      {"sharding_plan.placement[].rank", "table_wise: its rank"},
      {"sharding_plan.placement[].ranks[]", "column_wise: a rank per shard"},
      {"embeddings.tables_file",
       "instead of tables: a file of table groups (YAML, the seed's JSON, or CSV)"},
      {"embeddings.tables_file[].*",
       "a table group's statistic, as the same key under embeddings.tables"},
      {"embeddings.random_task.seed", "random task: seed of the draw"},
      {"embeddings.random_task.task", "random task: which accepted draw"},
      {"embeddings.random_task.heavy",
       "random task: draw only tables with pooling >= heavy_pooling"},
      {"embeddings.random_task.heavy_pooling", "random task: the pooling a heavy table reaches"},
      {"embeddings.random_task.tables_per_gpu", "random task: mean tables drawn per GPU"},
      {"embeddings.random_task.memory_fraction",
       "random task: share of all GPUs' memory the drawn fp32 tables may take"},
  };
  return kMeanings;
}

}  // namespace upsim

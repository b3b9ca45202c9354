#include "workloads/dlrm/sharders.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

namespace upsim {

namespace {

/// "2.048 GB": decimal gigabytes for messages, next to the exact byte count.
std::string gigabytes(int64_t bytes) {
  return fmt::format("{:.3f} GB", static_cast<double>(bytes) * 1e-9);
}

/// What the sharder places: the pieces (table-wise tables and column-wise shards) as tables of
/// their own width, their names for messages, and the memory each candidate rank has left.
struct Pieces {
  std::vector<EmbeddingTable> tables;
  std::vector<std::string> names;
  /// The table each piece is (of): an id into ShardingInput::tables.
  std::vector<uint32_t> table_of_piece;
  int64_t dim = 0;
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kSgd;
  int64_t weight_bytes = 4;
  /// Candidate ranks' capacity left after the row-wise and data-parallel tables.
  std::vector<int64_t> capacity;
  /// What those tables took on each candidate rank (for messages).
  std::vector<int64_t> reserved;
  /// The rank of candidate 0 (candidate r is rank first_rank + r).
  uint32_t first_rank = 0;
  /// kPlan: the candidate rank of each piece (shard_tables has checked it).
  std::vector<uint32_t> plan;

  int64_t bytes(uint32_t p) const {
    return table_memory_bytes(tables[p], dim, optimizer, weight_bytes);
  }
};

/// Where the sharder put each piece (candidate-rank indices) and the bytes per candidate rank.
struct PiecePlacement {
  std::vector<uint32_t> rank_of_piece;
  std::vector<int64_t> memory_bytes;
};

std::string describe_piece(const Pieces& in, uint32_t p) {
  const int64_t bytes = in.bytes(p);
  return fmt::format("{} ({} rows x dim {}: {} bytes, {})", in.names[p], in.tables[p].rows,
                     table_dim(in.tables[p], in.dim), bytes, gigabytes(bytes));
}

/// ", after 123 bytes of row-wise and data-parallel tables" when rank `r` reserved any.
std::string reserved_note(const Pieces& in, size_t r) {
  if (in.reserved[r] == 0) return "";
  return fmt::format(" left after {} bytes of row-wise, table-row-wise and data-parallel tables",
                     in.reserved[r]);
}

[[noreturn]] void fail_no_room(const Pieces& in, uint32_t p, std::span<const int64_t> used) {
  int64_t best_free = std::numeric_limits<int64_t>::min();
  size_t best = 0;
  for (size_t r = 0; r < used.size(); ++r) {
    const int64_t free = in.capacity[r] - used[r];
    if (free > best_free) {
      best_free = free;
      best = r;
    }
  }
  throw ShardingError(
      fmt::format("{} fits on no rank: the most free table memory on any rank is {} bytes of a {} "
                  "byte ({}) capacity{}; more tables than memory allows",
                  describe_piece(in, p), best_free, in.capacity[best], gigabytes(in.capacity[best]),
                  reserved_note(in, best)),
      in.table_of_piece[p]);
}

void check_input(const ShardingInput& in) {
  if (in.rank_capacity_bytes.empty()) throw ShardingError("sharding needs at least one rank");
  if (in.dim <= 0)
    throw ShardingError(fmt::format("embedding dim must be positive, got {}", in.dim));
  if (in.ranks_per_node != 0 && in.rank_capacity_bytes.size() % in.ranks_per_node != 0) {
    throw ShardingError(fmt::format("{} ranks are no whole number of nodes of {} ranks",
                                    in.rank_capacity_bytes.size(), in.ranks_per_node));
  }
  if (in.tableless_ranks >= in.rank_capacity_bytes.size()) {
    throw ShardingError(fmt::format("{} of {} ranks may hold no table-wise table",
                                    in.tableless_ranks, in.rank_capacity_bytes.size()));
  }
  for (size_t t = 0; t < in.tables.size(); ++t) {
    const EmbeddingTable& table = in.tables[t];
    if (table.rows <= 0 || !(table.pooling >= 0.0) || table.dim < 0) {
      throw ShardingError(
          fmt::format("table {} has {} rows, dim {} and pooling {}; rows must be positive, the "
                      "dim positive (or 0: the model's) and pooling non-negative",
                      t, table.rows, table.dim, table.pooling));
    }
    if (table.sharding_type == EmbeddingShardingType::kHybrid &&
        (table.frequent_rows < 0 || table.frequent_rows > table.rows ||
         !(table.frequent_share >= 0.0 && table.frequent_share <= 1.0))) {
      throw ShardingError(fmt::format(
          "table {} (hybrid) has {} frequent rows of {} and a frequent share of {}; the rows must "
          "be 0 .. rows and the share 0 .. 1",
          t, table.frequent_rows, table.rows, table.frequent_share));
    }
    const int64_t dim = table_dim(table, in.dim);
    const bool column_wise = table.sharding_type == EmbeddingShardingType::kColumnWise;
    if (column_wise ? (table.column_shards < 1 || dim % table.column_shards != 0)
                    : table.column_shards != 1) {
      throw ShardingError(fmt::format(
          "table {} ({}) has {} column shards; a column-wise table needs a number >= 1 that "
          "divides its dim {}, other types 1",
          t, embedding_sharding_type_name(table.sharding_type), table.column_shards, dim));
    }
  }
  if (in.tables.size() > std::numeric_limits<uint32_t>::max()) {
    throw ShardingError("too many embedding tables");
  }
}

/// kPlan: one entry per table, of the table's type, with one rank per table-wise table and per
/// column-wise shard, each in tableless_ranks .. n - 1, and a node below the node count for a
/// table-row-wise table.
void check_plan(const ShardingInput& in, ShardingStrategy strategy) {
  if (strategy != ShardingStrategy::kPlan) return;
  if (in.plan.size() != in.tables.size()) {
    throw ShardingError(fmt::format("the sharding plan places {} tables, but the model has {}",
                                    in.plan.size(), in.tables.size()));
  }
  const auto ranks = static_cast<uint32_t>(in.rank_capacity_bytes.size());
  const uint32_t nodes = in.ranks_per_node == 0 ? 1 : ranks / in.ranks_per_node;
  for (uint32_t t = 0; t < in.tables.size(); ++t) {
    const EmbeddingTable& table = in.tables[t];
    const PlannedTable& entry = in.plan[t];
    if (entry.type != table.sharding_type) {
      throw ShardingError(fmt::format("the sharding plan places table {} as {}, but it is {}", t,
                                      embedding_sharding_type_name(entry.type),
                                      embedding_sharding_type_name(table.sharding_type)),
                          t);
    }
    const size_t want = table.sharding_type == EmbeddingShardingType::kTableWise ? 1
                        : table.sharding_type == EmbeddingShardingType::kColumnWise
                            ? static_cast<size_t>(table.column_shards)
                            : 0;
    if (entry.ranks.size() != want) {
      throw ShardingError(
          fmt::format("the sharding plan gives table {} ({}) {} rank{}; it needs {}", t,
                      embedding_sharding_type_name(table.sharding_type), entry.ranks.size(),
                      entry.ranks.size() == 1 ? "" : "s",
                      want == 0 ? std::string("none (it spans the ranks)")
                      : table.sharding_type == EmbeddingShardingType::kTableWise
                          ? std::string("1")
                          : fmt::format("{} (one per column shard)", want)),
          t);
    }
    for (const uint32_t rank : entry.ranks) {
      if (rank >= ranks) {
        throw ShardingError(
            fmt::format("the sharding plan puts table {} on rank {}, but the run has {} ranks "
                        "(0-{})",
                        t, rank, ranks, ranks - 1),
            t);
      }
      if (rank < in.tableless_ranks) {
        throw ShardingError(
            fmt::format("the sharding plan puts table {} on rank {}, which holds no table-wise "
                        "table (ranks 0-{} are tableless)",
                        t, rank, in.tableless_ranks - 1),
            t);
      }
    }
    const bool on_node = table.sharding_type == EmbeddingShardingType::kTableRowWise;
    if (on_node && entry.node >= nodes) {
      throw ShardingError(
          fmt::format(
              "the sharding plan puts table {} (table_row_wise) on node {}, but the run has {} "
              "node{} (0-{})",
              t, entry.node == kNoSingleRank ? std::string("(none)") : std::to_string(entry.node),
              nodes, nodes == 1 ? "" : "s", nodes - 1),
          t);
    }
    if (!on_node && entry.node != kNoSingleRank) {
      throw ShardingError(
          fmt::format(
              "the sharding plan gives table {} ({}) node {}; only a table_row_wise table has one",
              t, embedding_sharding_type_name(table.sharding_type), entry.node),
          t);
    }
  }
}

PiecePlacement empty_placement(const Pieces& in) {
  PiecePlacement p;
  p.rank_of_piece.assign(in.tables.size(), 0);
  p.memory_bytes.assign(in.capacity.size(), 0);
  return p;
}

bool fits(const Pieces& in, const PiecePlacement& p, uint32_t rank, int64_t bytes) {
  return bytes <= in.capacity[rank] - p.memory_bytes[rank];
}

void place(PiecePlacement& p, uint32_t piece, uint32_t rank, int64_t bytes) {
  p.rank_of_piece[piece] = rank;
  p.memory_bytes[rank] += bytes;
}

/// Puts `piece` on candidate rank `r` of a fixed split, or fails naming the split.
void place_fixed(const Pieces& in, PiecePlacement& p, uint32_t piece, uint32_t r,
                 std::string_view sharder) {
  const int64_t bytes = in.bytes(piece);
  if (!fits(in, p, r, bytes)) {
    throw ShardingError(
        fmt::format("{} sharding puts {} on rank {}, which has {} of its {} bytes ({}){} free; "
                    "more tables than memory allows",
                    sharder, describe_piece(in, piece), r + in.first_rank,
                    in.capacity[r] - p.memory_bytes[r], in.capacity[r], gigabytes(in.capacity[r]),
                    reserved_note(in, r)),
        in.table_of_piece[piece]);
  }
  place(p, piece, r, bytes);
}

/// Round robin (DreamShard `naive_shard`: table x on device x mod n).
PiecePlacement shard_naive(const Pieces& in) {
  PiecePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.capacity.size());
  for (uint32_t piece = 0; piece < in.tables.size(); ++piece)
    place_fixed(in, p, piece, piece % ranks, "naive");
  return p;
}

/// The original DLRM split (extend_distributed.py `get_split_lengths`): n pieces on k ranks,
/// the first n mod k ranks get floor(n / k) + 1 contiguous pieces, the others floor(n / k).
PiecePlacement shard_naive_chunk(const Pieces& in) {
  PiecePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.capacity.size());
  const auto n = static_cast<uint32_t>(in.tables.size());
  uint32_t piece = 0;
  for (uint32_t r = 0; r < ranks; ++r) {
    const uint32_t count = n / ranks + (r < n % ranks ? 1 : 0);
    for (uint32_t i = 0; i < count; ++i, ++piece)
      place_fixed(in, p, piece, r, "naive_chunk");
  }
  return p;
}

PiecePlacement shard_random(const Pieces& in, uint64_t seed) {
  PiecePlacement p = empty_placement(in);
  std::mt19937_64 rng(seed);
  const auto ranks = static_cast<uint32_t>(in.capacity.size());
  std::vector<uint32_t> candidates;
  for (uint32_t t = 0; t < in.tables.size(); ++t) {
    const int64_t bytes = in.bytes(t);
    candidates.clear();
    for (uint32_t r = 0; r < ranks; ++r) {
      if (fits(in, p, r, bytes)) candidates.push_back(r);
    }
    if (candidates.empty()) fail_no_room(in, t, p.memory_bytes);
    place(p, t, candidates[uniform_below(rng, candidates.size())], bytes);
  }
  return p;
}

/// An explicit placement: every piece (a table-wise table: shard_tables admits no other type
/// with kPlan) on the candidate rank `in.plan` gives, each rank within its capacity.
PiecePlacement shard_plan(const Pieces& in) {
  PiecePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.capacity.size());
  std::vector<int64_t> count(ranks, 0);
  for (uint32_t piece = 0; piece < in.tables.size(); ++piece) {
    place(p, piece, in.plan[piece], in.bytes(piece));
    ++count[in.plan[piece]];
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    if (p.memory_bytes[r] > in.capacity[r]) {
      throw ShardingError(fmt::format(
          "the sharding plan puts {} tables of {} bytes ({}) on rank {}, more than its {} "
          "byte ({}) table memory{}",
          count[r], p.memory_bytes[r], gigabytes(p.memory_bytes[r]), r + in.first_rank,
          in.capacity[r], gigabytes(in.capacity[r]), reserved_note(in, r)));
    }
  }
  return p;
}

PiecePlacement shard_greedy(const Pieces& in, ShardingStrategy strategy) {
  PiecePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.capacity.size());
  std::vector<double> cost(in.tables.size());
  if (strategy == ShardingStrategy::kNormLookupGreedy) {
    // Lookups and bytes, each as a share of its total over the pieces.
    std::vector<double> lookups(in.tables.size());
    std::vector<double> bytes(in.tables.size());
    double lookups_total = 0.0;
    double bytes_total = 0.0;
    for (size_t t = 0; t < in.tables.size(); ++t) {
      lookups[t] = sharding_cost(ShardingStrategy::kLookupGreedy, in.tables[t], in.dim,
                                 in.optimizer, in.weight_bytes);
      bytes[t] = static_cast<double>(in.bytes(static_cast<uint32_t>(t)));
      lookups_total += lookups[t];
      bytes_total += bytes[t];
    }
    for (size_t t = 0; t < in.tables.size(); ++t) {
      cost[t] = (lookups_total > 0.0 ? lookups[t] / lookups_total : 0.0) +
                (bytes_total > 0.0 ? bytes[t] / bytes_total : 0.0);
    }
  } else {
    for (size_t t = 0; t < in.tables.size(); ++t) {
      cost[t] = sharding_cost(strategy, in.tables[t], in.dim, in.optimizer, in.weight_bytes);
    }
  }
  std::vector<uint32_t> order(in.tables.size());
  std::iota(order.begin(), order.end(), 0U);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return cost[a] > cost[b]; });

  std::vector<double> rank_cost(ranks, 0.0);
  for (uint32_t t : order) {
    const int64_t bytes = in.bytes(t);
    uint32_t best = ranks;
    for (uint32_t r = 0; r < ranks; ++r) {
      if (!fits(in, p, r, bytes)) continue;
      if (best == ranks || rank_cost[r] < rank_cost[best] ||
          (rank_cost[r] == rank_cost[best] && p.memory_bytes[r] < p.memory_bytes[best])) {
        best = r;
      }
    }
    if (best == ranks) fail_no_room(in, t, p.memory_bytes);
    rank_cost[best] += cost[t];
    place(p, t, best, bytes);
  }
  return p;
}

/// distribute_to_buckets of DeepLearningExamples' DLRM: ranks kept in a list that is re-sorted
/// (stably) by rows held after every placement; the first takes the next-largest table; a rank
/// that reaches the cap leaves the list, in the order ranks fill, before the ones left (which
/// keep their sorted order). The list position is the rank.
PiecePlacement shard_capped_size_greedy(const Pieces& in) {
  PiecePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.capacity.size());
  const size_t cap = (in.tables.size() + ranks - 1) / ranks;
  std::vector<uint32_t> order(in.tables.size());
  std::iota(order.begin(), order.end(), 0U);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return in.tables[a].rows > in.tables[b].rows; });
  std::vector<std::vector<uint32_t>> open(ranks);
  std::vector<int64_t> open_rows(ranks, 0);
  std::vector<std::vector<uint32_t>> full;
  const auto reorder = [&] {
    std::vector<size_t> idx(open.size());
    std::iota(idx.begin(), idx.end(), size_t{0});
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t a, size_t b) { return open_rows[a] < open_rows[b]; });
    std::vector<std::vector<uint32_t>> sorted_open;
    std::vector<int64_t> sorted_rows;
    for (size_t i : idx) {
      sorted_open.push_back(std::move(open[i]));
      sorted_rows.push_back(open_rows[i]);
    }
    open = std::move(sorted_open);
    open_rows = std::move(sorted_rows);
  };
  for (uint32_t t : order) {
    open.front().push_back(t);
    open_rows.front() += in.tables[t].rows;
    if (open.front().size() == cap) {
      full.push_back(std::move(open.front()));
      open.erase(open.begin());
      open_rows.erase(open_rows.begin());
    }
    reorder();
  }
  for (std::vector<uint32_t>& bucket : open)
    full.push_back(std::move(bucket));
  for (uint32_t r = 0; r < ranks; ++r) {
    for (uint32_t t : full[r]) {
      const int64_t bytes = in.bytes(t);
      if (!fits(in, p, r, bytes)) fail_no_room(in, t, p.memory_bytes);
      place(p, t, r, bytes);
    }
  }
  return p;
}

/// The table-row-wise tables of `in` on nodes (see shard_tables), adding their row blocks to
/// out.memory_bytes.
void place_table_row_wise(const ShardingInput& in, ShardingStrategy strategy, TablePlacement& out) {
  const uint32_t local = out.ranks_per_node;
  const auto nodes = static_cast<uint32_t>(in.rank_capacity_bytes.size()) / local;
  std::vector<uint32_t> order;
  for (uint32_t t = 0; t < in.tables.size(); ++t) {
    if (in.tables[t].sharding_type == EmbeddingShardingType::kTableRowWise) order.push_back(t);
  }
  out.table_row_wise = order;
  const auto cost = [&](uint32_t t) {
    return sharding_cost(ShardingStrategy::kLookupGreedy, in.tables[t], in.dim, in.optimizer,
                         in.weight_bytes);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return cost(a) > cost(b); });
  std::vector<double> node_cost(nodes, 0.0);
  const auto block_bytes = [&](uint32_t t, uint32_t local_rank) {
    EmbeddingTable block = in.tables[t];
    block.rows = row_wise_shard_rows(block.rows, local_rank, local);
    return table_memory_bytes(block, in.dim, in.optimizer, in.weight_bytes);
  };
  const bool planned = strategy == ShardingStrategy::kPlan;
  for (const uint32_t t : order) {
    uint32_t best = nodes;
    for (uint32_t k = 0; k < nodes; ++k) {
      if (planned && k != in.plan[t].node) continue;
      bool room = true;
      for (uint32_t j = 0; j < local && room; ++j) {
        const uint32_t r = k * local + j;
        room = block_bytes(t, j) <= in.rank_capacity_bytes[r] - out.memory_bytes[r];
      }
      if (room && (best == nodes || node_cost[k] < node_cost[best])) best = k;
    }
    if (best == nodes) {
      const EmbeddingTable& table = in.tables[t];
      throw ShardingError(
          fmt::format("table {} (table_row_wise, {} rows x dim {}) needs {} bytes ({}) on each of "
                      "a node's {} ranks, and {} has that free on every rank; more tables "
                      "than memory allows",
                      t, table.rows, table_dim(table, in.dim), block_bytes(t, 0),
                      gigabytes(block_bytes(t, 0)), local,
                      planned ? fmt::format("the sharding plan's node {}", in.plan[t].node)
                              : std::string("no node")),
          t);
    }
    node_cost[best] += cost(t);
    out.node_of_table[t] = best;
    for (uint32_t j = 0; j < local; ++j)
      out.memory_bytes[best * local + j] += block_bytes(t, j);
  }
}

PiecePlacement place_pieces(const Pieces& in, ShardingStrategy strategy, uint64_t seed) {
  switch (strategy) {
    case ShardingStrategy::kNaive:
      return shard_naive(in);
    case ShardingStrategy::kNaiveChunk:
      return shard_naive_chunk(in);
    case ShardingStrategy::kRandom:
      return shard_random(in, seed);
    case ShardingStrategy::kSizeGreedy:
    case ShardingStrategy::kLookupGreedy:
    case ShardingStrategy::kNormLookupGreedy:
    case ShardingStrategy::kSizeLookupGreedy:
      return shard_greedy(in, strategy);
    case ShardingStrategy::kCappedSizeGreedy:
      return shard_capped_size_greedy(in);
    case ShardingStrategy::kPlan:
      return shard_plan(in);
  }
  throw ShardingError("unknown sharding strategy");
}

}  // namespace

uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  if (bound <= 1) return 0;
  const int bits = std::bit_width(bound - 1);
  for (;;) {
    const uint64_t x = rng() >> (64 - bits);
    if (x < bound) return x;
  }
}

std::string_view sharding_strategy_name(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::kNaive:
      return "naive";
    case ShardingStrategy::kNaiveChunk:
      return "naive_chunk";
    case ShardingStrategy::kRandom:
      return "random";
    case ShardingStrategy::kSizeGreedy:
      return "size_greedy";
    case ShardingStrategy::kLookupGreedy:
      return "lookup_greedy";
    case ShardingStrategy::kNormLookupGreedy:
      return "norm_lookup_greedy";
    case ShardingStrategy::kSizeLookupGreedy:
      return "size_lookup_greedy";
    case ShardingStrategy::kCappedSizeGreedy:
      return "capped_size_greedy";
    case ShardingStrategy::kPlan:
      return "plan";
  }
  return "unknown";
}

std::span<const ShardingStrategy> sharding_strategies() {
  static constexpr std::array<ShardingStrategy, 9> kAll = {ShardingStrategy::kNaive,
                                                           ShardingStrategy::kNaiveChunk,
                                                           ShardingStrategy::kRandom,
                                                           ShardingStrategy::kSizeGreedy,
                                                           ShardingStrategy::kLookupGreedy,
                                                           ShardingStrategy::kNormLookupGreedy,
                                                           ShardingStrategy::kSizeLookupGreedy,
                                                           ShardingStrategy::kCappedSizeGreedy,
                                                           ShardingStrategy::kPlan};
  return kAll;
}

std::optional<ShardingStrategy> sharding_strategy_named(std::string_view name) {
  for (const ShardingStrategy s : sharding_strategies()) {
    if (sharding_strategy_name(s) == name) return s;
  }
  return std::nullopt;
}

std::span<const EmbeddingShardingType> embedding_sharding_types() {
  static constexpr std::array<EmbeddingShardingType, 6> kAll = {
      EmbeddingShardingType::kTableWise,    EmbeddingShardingType::kRowWise,
      EmbeddingShardingType::kColumnWise,   EmbeddingShardingType::kDataParallel,
      EmbeddingShardingType::kTableRowWise, EmbeddingShardingType::kHybrid};
  return kAll;
}

std::optional<EmbeddingShardingType> embedding_sharding_type_named(std::string_view name) {
  for (const EmbeddingShardingType t : embedding_sharding_types()) {
    if (embedding_sharding_type_name(t) == name) return t;
  }
  return std::nullopt;
}

std::string_view embedding_sharding_type_name(EmbeddingShardingType type) {
  switch (type) {
    case EmbeddingShardingType::kTableWise:
      return "table_wise";
    case EmbeddingShardingType::kRowWise:
      return "row_wise";
    case EmbeddingShardingType::kColumnWise:
      return "column_wise";
    case EmbeddingShardingType::kDataParallel:
      return "data_parallel";
    case EmbeddingShardingType::kTableRowWise:
      return "table_row_wise";
    case EmbeddingShardingType::kHybrid:
      return "hybrid";
  }
  return "unknown";
}

int64_t table_memory_bytes(const EmbeddingTable& table, int64_t dim, EmbeddingOptimizer optimizer,
                           int64_t weight_bytes) {
  const int64_t columns = table_dim(table, dim);
  int64_t optimizer_state_bytes = 0;
  switch (optimizer) {
    case EmbeddingOptimizer::kSgd:
      optimizer_state_bytes = 0;
      break;
    case EmbeddingOptimizer::kAdagrad:
      optimizer_state_bytes = table.rows * columns * 4;
      break;
    case EmbeddingOptimizer::kRowWiseAdagrad:
      optimizer_state_bytes = table.rows * 4;
      break;
    case EmbeddingOptimizer::kAdam:
      optimizer_state_bytes = 2 * table.rows * columns * 4;
      break;
  }
  return table.rows * columns * weight_bytes + optimizer_state_bytes;
}

int64_t row_wise_shard_rows(int64_t rows, uint32_t rank, uint32_t ranks) {
  if (ranks == 0 || rows <= 0) return 0;
  const int64_t block = (rows + ranks - 1) / ranks;
  const int64_t start = block * rank;
  return std::clamp<int64_t>(rows - start, 0, block);
}

int64_t dense_optimizer_states(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgdMomentum:
    case OptimizerKind::kAdagrad:
      return 1;
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
    case OptimizerKind::kLamb:
      return 2;
    case OptimizerKind::kUnspecified:
    case OptimizerKind::kSgd:
      return 0;
  }
  return 0;
}

int64_t rank_table_memory_bytes(const EmbeddingTable& table, const ShardingInput& input,
                                uint32_t rank) {
  const auto ranks = static_cast<uint32_t>(input.rank_capacity_bytes.size());
  switch (table.sharding_type) {
    case EmbeddingShardingType::kRowWise: {
      EmbeddingTable shard = table;
      shard.rows = row_wise_shard_rows(table.rows, rank, ranks);
      return table_memory_bytes(shard, input.dim, input.optimizer, input.weight_bytes);
    }
    case EmbeddingShardingType::kDataParallel: {
      const int64_t elements = table.rows * table_dim(table, input.dim);
      return elements *
             (2 * input.weight_bytes + 4 * dense_optimizer_states(input.dense_optimizer));
    }
    case EmbeddingShardingType::kHybrid: {
      EmbeddingTable frequent = table;
      frequent.sharding_type = EmbeddingShardingType::kDataParallel;
      frequent.rows = table.frequent_rows;
      EmbeddingTable infrequent = table;
      infrequent.sharding_type = EmbeddingShardingType::kRowWise;
      infrequent.rows = table.rows - table.frequent_rows;
      return rank_table_memory_bytes(frequent, input, rank) +
             rank_table_memory_bytes(infrequent, input, rank);
    }
    case EmbeddingShardingType::kTableWise:
    case EmbeddingShardingType::kColumnWise:
    case EmbeddingShardingType::kTableRowWise:
      return 0;
  }
  return 0;
}

double sharding_cost(ShardingStrategy strategy, const EmbeddingTable& table, int64_t dim,
                     EmbeddingOptimizer optimizer, int64_t weight_bytes) {
  const auto d = static_cast<double>(table_dim(table, dim));
  switch (strategy) {
    case ShardingStrategy::kSizeGreedy:
      return static_cast<double>(table_memory_bytes(table, dim, optimizer, weight_bytes));
    case ShardingStrategy::kLookupGreedy:
      return d * table.pooling;
    case ShardingStrategy::kSizeLookupGreedy:
      return d * table.pooling * std::log10(static_cast<double>(table.rows));
    case ShardingStrategy::kCappedSizeGreedy:
      return static_cast<double>(table.rows);
    case ShardingStrategy::kNaive:
    case ShardingStrategy::kNaiveChunk:
    case ShardingStrategy::kRandom:
    case ShardingStrategy::kNormLookupGreedy:
    case ShardingStrategy::kPlan:
      return 0.0;
  }
  return 0.0;
}

TablePlacement shard_tables(const ShardingInput& input, ShardingStrategy strategy, uint64_t seed) {
  check_input(input);
  check_plan(input, strategy);
  const auto ranks = static_cast<uint32_t>(input.rank_capacity_bytes.size());
  TablePlacement out;
  out.rank_of_table.assign(input.tables.size(), kNoSingleRank);
  out.tables_of_rank.resize(ranks);
  out.pieces_of_rank.resize(ranks);
  out.memory_bytes.assign(ranks, 0);
  out.node_of_table.assign(input.tables.size(), kNoSingleRank);
  out.ranks_per_node = input.ranks_per_node == 0 ? ranks : input.ranks_per_node;

  // Row-wise, data-parallel and hybrid tables: their share on every rank, before anything is
  // placed.
  for (uint32_t t = 0; t < input.tables.size(); ++t) {
    const EmbeddingTable& table = input.tables[t];
    const EmbeddingShardingType type = table.sharding_type;
    if (type == EmbeddingShardingType::kRowWise) {
      out.row_wise.push_back(t);
    } else if (type == EmbeddingShardingType::kDataParallel) {
      out.data_parallel.push_back(t);
    } else if (type == EmbeddingShardingType::kHybrid) {
      out.hybrid.push_back(t);
    } else {
      continue;
    }
    for (uint32_t r = 0; r < ranks; ++r) {
      const int64_t bytes = rank_table_memory_bytes(table, input, r);
      if (bytes > input.rank_capacity_bytes[r] - out.memory_bytes[r]) {
        throw ShardingError(
            fmt::format("table {} ({}, {} rows x dim {}) needs {} bytes ({}) on rank {}, which has "
                        "{} of its {} bytes ({}) free; more tables than memory allows",
                        t, embedding_sharding_type_name(type), table.rows,
                        table_dim(table, input.dim), bytes, gigabytes(bytes), r,
                        input.rank_capacity_bytes[r] - out.memory_bytes[r],
                        input.rank_capacity_bytes[r], gigabytes(input.rank_capacity_bytes[r])),
            t);
      }
      out.memory_bytes[r] += bytes;
    }
  }

  place_table_row_wise(input, strategy, out);

  // The pieces, in table-id then shard order, on the candidate ranks' memory left.
  Pieces pieces;
  pieces.dim = input.dim;
  pieces.optimizer = input.optimizer;
  pieces.weight_bytes = input.weight_bytes;
  pieces.first_rank = input.tableless_ranks;
  for (uint32_t t = 0; t < input.tables.size(); ++t) {
    const EmbeddingTable& table = input.tables[t];
    if (table.sharding_type == EmbeddingShardingType::kTableWise) {
      out.pieces.push_back(TablePiece{t, 0, table_dim(table, input.dim), 0});
      pieces.tables.push_back(EmbeddingTable{table.rows, table.pooling, table.dim});
      pieces.names.push_back(fmt::format("table {}", t));
      pieces.table_of_piece.push_back(t);
    } else if (table.sharding_type == EmbeddingShardingType::kColumnWise) {
      const int64_t dim = table_dim(table, input.dim) / table.column_shards;
      for (int64_t k = 0; k < table.column_shards; ++k) {
        out.pieces.push_back(TablePiece{t, static_cast<uint32_t>(k), dim, 0});
        pieces.tables.push_back(EmbeddingTable{table.rows, table.pooling, dim});
        pieces.names.push_back(
            fmt::format("table {} column shard {} of {}", t, k, table.column_shards));
        pieces.table_of_piece.push_back(t);
      }
    }
  }
  if (strategy == ShardingStrategy::kPlan) {
    // check_plan: a table-wise entry has one rank, a column-wise one a rank per shard; pieces are
    // in table-id then shard order.
    for (uint32_t t = 0; t < input.tables.size(); ++t) {
      for (const uint32_t rank : input.plan[t].ranks)
        pieces.plan.push_back(rank - input.tableless_ranks);
    }
  }
  for (uint32_t r = input.tableless_ranks; r < ranks; ++r) {
    pieces.capacity.push_back(input.rank_capacity_bytes[r] - out.memory_bytes[r]);
    pieces.reserved.push_back(out.memory_bytes[r]);
  }
  const PiecePlacement placed = place_pieces(pieces, strategy, seed);

  for (uint32_t p = 0; p < out.pieces.size(); ++p) {
    TablePiece& piece = out.pieces[p];
    piece.rank = placed.rank_of_piece[p] + input.tableless_ranks;
    out.pieces_of_rank[piece.rank].push_back(p);
    std::vector<uint32_t>& tables = out.tables_of_rank[piece.rank];
    if (tables.empty() || tables.back() != piece.table) tables.push_back(piece.table);
    if (input.tables[piece.table].sharding_type == EmbeddingShardingType::kTableWise) {
      out.rank_of_table[piece.table] = piece.rank;
    }
  }
  for (uint32_t r = input.tableless_ranks; r < ranks; ++r) {
    out.memory_bytes[r] += placed.memory_bytes[r - input.tableless_ranks];
  }
  for (auto& tables : out.tables_of_rank) {
    std::sort(tables.begin(), tables.end());
    tables.erase(std::unique(tables.begin(), tables.end()), tables.end());
  }
  return out;
}

std::vector<PlannedTable> planned_tables(const TablePlacement& placement,
                                         std::span<const EmbeddingTable> tables) {
  std::vector<PlannedTable> plan(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    plan[t].type = tables[t].sharding_type;
    if (tables[t].sharding_type == EmbeddingShardingType::kTableRowWise) {
      plan[t].node = placement.node_of_table.at(t);
    }
  }
  // Pieces are in table-id then shard order.
  for (const TablePiece& piece : placement.pieces)
    plan.at(piece.table).ranks.push_back(piece.rank);
  return plan;
}

}  // namespace upsim

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

/// Uniform integer in [0, bound) from the high bits of the generator, rejecting values past
/// `bound` (no modulo, no std:: distribution: both are what make the draw platform-independent).
/// Draws nothing when bound == 1.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  if (bound <= 1) return 0;
  const int bits = std::bit_width(bound - 1);
  for (;;) {
    const uint64_t x = rng() >> (64 - bits);
    if (x < bound) return x;
  }
}

/// "2.048 GB": decimal gigabytes for messages, next to the exact byte count.
std::string gigabytes(int64_t bytes) {
  return fmt::format("{:.3f} GB", static_cast<double>(bytes) * 1e-9);
}

std::string describe_table(const ShardingInput& in, uint32_t t) {
  const int64_t bytes = table_memory_bytes(in.tables[t], in.dim, in.optimizer, in.weight_bytes);
  return fmt::format("table {} ({} rows x dim {}: {} bytes, {})", t, in.tables[t].rows, in.dim,
                     bytes, gigabytes(bytes));
}

[[noreturn]] void fail_no_room(const ShardingInput& in, uint32_t t, std::span<const int64_t> used) {
  int64_t best_free = std::numeric_limits<int64_t>::min();
  int64_t capacity = 0;
  for (size_t r = 0; r < used.size(); ++r) {
    const int64_t free = in.rank_capacity_bytes[r] - used[r];
    if (free > best_free) {
      best_free = free;
      capacity = in.rank_capacity_bytes[r];
    }
  }
  throw ShardingError(fmt::format(
      "{} fits on no rank: the most free table memory on any rank is {} bytes of a {} byte "
      "({}) capacity; more tables than memory allows",
      describe_table(in, t), best_free, capacity, gigabytes(capacity)));
}

void check_input(const ShardingInput& in) {
  if (in.rank_capacity_bytes.empty()) throw ShardingError("sharding needs at least one rank");
  if (in.dim <= 0)
    throw ShardingError(fmt::format("embedding dim must be positive, got {}", in.dim));
  for (size_t t = 0; t < in.tables.size(); ++t) {
    if (in.tables[t].rows <= 0 || !(in.tables[t].pooling >= 0.0)) {
      throw ShardingError(
          fmt::format("table {} has {} rows and pooling {}; rows must be "
                      "positive and pooling non-negative",
                      t, in.tables[t].rows, in.tables[t].pooling));
    }
  }
  if (in.tables.size() > std::numeric_limits<uint32_t>::max()) {
    throw ShardingError("too many embedding tables");
  }
}

TablePlacement empty_placement(const ShardingInput& in) {
  TablePlacement p;
  p.rank_of_table.assign(in.tables.size(), 0);
  p.tables_of_rank.resize(in.rank_capacity_bytes.size());
  p.memory_bytes.assign(in.rank_capacity_bytes.size(), 0);
  return p;
}

bool fits(const ShardingInput& in, const TablePlacement& p, uint32_t rank, int64_t bytes) {
  return bytes <= in.rank_capacity_bytes[rank] - p.memory_bytes[rank];
}

void place(TablePlacement& p, uint32_t table, uint32_t rank, int64_t bytes) {
  p.rank_of_table[table] = rank;
  p.tables_of_rank[rank].push_back(table);
  p.memory_bytes[rank] += bytes;
}

void finish(TablePlacement& p) {
  for (auto& tables : p.tables_of_rank)
    std::sort(tables.begin(), tables.end());
}

/// The original DLRM split (dlrm_s_pytorch.py `get_split_lengths`): n tables on k ranks,
/// the first n mod k ranks get floor(n / k) + 1 contiguous tables, the others floor(n / k).
TablePlacement shard_naive(const ShardingInput& in) {
  TablePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.rank_capacity_bytes.size());
  const auto n = static_cast<uint32_t>(in.tables.size());
  uint32_t table = 0;
  for (uint32_t r = 0; r < ranks; ++r) {
    const uint32_t count = n / ranks + (r < n % ranks ? 1 : 0);
    for (uint32_t i = 0; i < count; ++i, ++table) {
      const int64_t bytes =
          table_memory_bytes(in.tables[table], in.dim, in.optimizer, in.weight_bytes);
      if (!fits(in, p, r, bytes)) {
        throw ShardingError(fmt::format(
            "naive sharding puts {} on rank {}, which has {} of its {} bytes ({}) free; more "
            "tables than memory allows",
            describe_table(in, table), r, in.rank_capacity_bytes[r] - p.memory_bytes[r],
            in.rank_capacity_bytes[r], gigabytes(in.rank_capacity_bytes[r])));
      }
      place(p, table, r, bytes);
    }
  }
  return p;
}

TablePlacement shard_random(const ShardingInput& in, uint64_t seed) {
  TablePlacement p = empty_placement(in);
  std::mt19937_64 rng(seed);
  const auto ranks = static_cast<uint32_t>(in.rank_capacity_bytes.size());
  std::vector<uint32_t> candidates;
  for (uint32_t t = 0; t < in.tables.size(); ++t) {
    const int64_t bytes = table_memory_bytes(in.tables[t], in.dim, in.optimizer, in.weight_bytes);
    candidates.clear();
    for (uint32_t r = 0; r < ranks; ++r) {
      if (fits(in, p, r, bytes)) candidates.push_back(r);
    }
    if (candidates.empty()) fail_no_room(in, t, p.memory_bytes);
    place(p, t, candidates[uniform_below(rng, candidates.size())], bytes);
  }
  finish(p);
  return p;
}

/// An explicit placement: every table where `in.plan` says, each rank within its capacity.
TablePlacement shard_plan(const ShardingInput& in) {
  if (in.plan.size() != in.tables.size()) {
    throw ShardingError(fmt::format("the sharding plan places {} tables, but the model has {}",
                                    in.plan.size(), in.tables.size()));
  }
  TablePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.rank_capacity_bytes.size());
  for (uint32_t t = 0; t < in.tables.size(); ++t) {
    if (in.plan[t] >= ranks) {
      throw ShardingError(
          fmt::format("the sharding plan puts table {} on rank {}, but the run "
                      "has {} ranks (0-{})",
                      t, in.plan[t], ranks, ranks - 1));
    }
    place(p, t, in.plan[t],
          table_memory_bytes(in.tables[t], in.dim, in.optimizer, in.weight_bytes));
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    if (p.memory_bytes[r] > in.rank_capacity_bytes[r]) {
      throw ShardingError(fmt::format(
          "the sharding plan puts {} tables of {} bytes ({}) on rank {}, more than its {} "
          "byte ({}) table memory",
          p.tables_of_rank[r].size(), p.memory_bytes[r], gigabytes(p.memory_bytes[r]), r,
          in.rank_capacity_bytes[r], gigabytes(in.rank_capacity_bytes[r])));
    }
  }
  return p;
}

TablePlacement shard_greedy(const ShardingInput& in, ShardingStrategy strategy) {
  TablePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.rank_capacity_bytes.size());
  std::vector<double> cost(in.tables.size());
  for (size_t t = 0; t < in.tables.size(); ++t) {
    cost[t] = sharding_cost(strategy, in.tables[t], in.dim, in.optimizer, in.weight_bytes);
  }
  std::vector<uint32_t> order(in.tables.size());
  std::iota(order.begin(), order.end(), 0U);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return cost[a] > cost[b]; });

  std::vector<double> rank_cost(ranks, 0.0);
  for (uint32_t t : order) {
    const int64_t bytes = table_memory_bytes(in.tables[t], in.dim, in.optimizer, in.weight_bytes);
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
  finish(p);
  return p;
}

/// distribute_to_buckets of DeepLearningExamples' DLRM: ranks kept in a list that is re-sorted
/// (stably) by rows held after every placement; the first takes the next-largest table; a rank
/// that reaches the cap leaves the list, in the order ranks fill, before the ones left (which
/// keep their sorted order). The list position is the rank.
TablePlacement shard_capped_size_greedy(const ShardingInput& in) {
  TablePlacement p = empty_placement(in);
  const auto ranks = static_cast<uint32_t>(in.rank_capacity_bytes.size());
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
      const int64_t bytes = table_memory_bytes(in.tables[t], in.dim, in.optimizer, in.weight_bytes);
      if (!fits(in, p, r, bytes)) fail_no_room(in, t, p.memory_bytes);
      place(p, t, r, bytes);
    }
  }
  finish(p);
  return p;
}

}  // namespace

std::string_view sharding_strategy_name(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::kNaive:
      return "naive";
    case ShardingStrategy::kRandom:
      return "random";
    case ShardingStrategy::kSizeGreedy:
      return "size_greedy";
    case ShardingStrategy::kLookupGreedy:
      return "lookup_greedy";
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
  static constexpr std::array<ShardingStrategy, 7> kAll = {ShardingStrategy::kNaive,
                                                           ShardingStrategy::kRandom,
                                                           ShardingStrategy::kSizeGreedy,
                                                           ShardingStrategy::kLookupGreedy,
                                                           ShardingStrategy::kSizeLookupGreedy,
                                                           ShardingStrategy::kCappedSizeGreedy,
                                                           ShardingStrategy::kPlan};
  return kAll;
}

int64_t table_memory_bytes(const EmbeddingTable& table, int64_t dim, EmbeddingOptimizer optimizer,
                           int64_t weight_bytes) {
  int64_t optimizer_state_bytes = 0;
  switch (optimizer) {
    case EmbeddingOptimizer::kSgd:
      optimizer_state_bytes = 0;
      break;
    case EmbeddingOptimizer::kAdagrad:
      optimizer_state_bytes = table.rows * dim * 4;
      break;
    case EmbeddingOptimizer::kRowWiseAdagrad:
      optimizer_state_bytes = table.rows * 4;
      break;
    case EmbeddingOptimizer::kAdam:
      optimizer_state_bytes = 2 * table.rows * dim * 4;
      break;
  }
  return table.rows * dim * weight_bytes + optimizer_state_bytes;
}

double sharding_cost(ShardingStrategy strategy, const EmbeddingTable& table, int64_t dim,
                     EmbeddingOptimizer optimizer, int64_t weight_bytes) {
  const auto d = static_cast<double>(dim);
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
    case ShardingStrategy::kRandom:
    case ShardingStrategy::kPlan:
      return 0.0;
  }
  return 0.0;
}

TablePlacement shard_tables(const ShardingInput& input, ShardingStrategy strategy, uint64_t seed) {
  check_input(input);
  switch (strategy) {
    case ShardingStrategy::kNaive:
      return shard_naive(input);
    case ShardingStrategy::kRandom:
      return shard_random(input, seed);
    case ShardingStrategy::kSizeGreedy:
    case ShardingStrategy::kLookupGreedy:
    case ShardingStrategy::kSizeLookupGreedy:
      return shard_greedy(input, strategy);
    case ShardingStrategy::kCappedSizeGreedy:
      return shard_capped_size_greedy(input);
    case ShardingStrategy::kPlan:
      return shard_plan(input);
  }
  throw ShardingError("unknown sharding strategy");
}

}  // namespace upsim

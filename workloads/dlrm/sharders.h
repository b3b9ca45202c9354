// Table-wise placement of DLRM embedding tables on ranks (Lin et al., TPDS 2024).
//
// Contract:
//  - Pure functions: the same tables, capacities, strategy and seed give the same placement on
//    every platform (the random sharder draws from std::mt19937_64, whose output the C++
//    standard fixes, through upsim's own bounded mapping, never a std:: distribution).
//  - Every table goes to exactly one rank; a rank may hold no table.
//  - A rank never holds more table bytes (table_memory_bytes) than its capacity. A table that
//    cannot be placed throws ShardingError naming the table, its bytes and the capacity.
//  - Table ids are indices into the table list; ranks are indices 0..n-1 into the capacity list.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"

namespace upsim {

/// The sharders of the seed paper's experiments (Lin et al., TPDS 2024; the `naive_chunk`,
/// `norm_lookup_greedy` and `dim_greedy` variants are not implemented: their definitions are
/// unknown or, with one embedding dim for every table, degenerate).
enum class ShardingStrategy : uint8_t {
  kNaive,             ///< contiguous table ids, near-equal counts, first ranks get one more
  kRandom,            ///< each table on a uniformly drawn rank among those with room for it
  kSizeGreedy,        ///< greedy on cost = table bytes
  kLookupGreedy,      ///< greedy on cost = dim x mean pooling
  kSizeLookupGreedy,  ///< greedy on cost = dim x mean pooling x log10(rows); the seed's default
  /// NVIDIA DeepLearningExamples' DLRM (dlrm/utils/distributed.py, distribute_to_buckets): tables
  /// by rows, largest first, each to the rank holding the fewest rows so far, at most
  /// ceil(tables / ranks) per rank (a full rank takes no more); memory is checked, not balanced.
  kCappedSizeGreedy,
  kPlan,  ///< an explicit table -> rank list (ShardingInput::plan), e.g. `upsim shard`'s
};
std::string_view sharding_strategy_name(ShardingStrategy strategy);

/// Every strategy, in declaration order: the values `workload.sharding` accepts. All but kPlan
/// place tables by themselves; kPlan needs ShardingInput::plan.
std::span<const ShardingStrategy> sharding_strategies();

/// Optimizer that updates the embedding tables (fused into the FBGEMM backward kernel).
using EmbeddingOptimizer = FusedEmbeddingOptimizer;

/// One embedding table. Every table of a DLRM has the model's embedding dim.
struct EmbeddingTable {
  int64_t rows = 0;
  /// Mean number of indices per bag (the seed's pooling factor L).
  double pooling = 0.0;
  /// Measured reuse histogram of a batch (table_statistics.h); empty: none measured.
  std::vector<double> reuse_histogram{};
  /// Zipf exponent of the accesses when no histogram is given; 0: uniform.
  double zipf_alpha = 0.0;
  /// Standard deviation of the pooling factor over batches (informational: kernels are priced
  /// at the mean, as the seed's model does).
  double pooling_std = 0.0;
};

/// Bytes a table occupies in GPU memory: rows x dim weights of `weight_bytes` each (FBGEMM's
/// table-batched embedding stores fp32, fp16 or bf16 weights: SparseType of
/// split_table_batched_embeddings_ops) plus the fused optimizer's fp32 state: none for SGD,
/// rows x dim for Adagrad, rows for row-wise Adagrad, 2 x rows x dim for Adam.
int64_t table_memory_bytes(const EmbeddingTable& table, int64_t dim, EmbeddingOptimizer optimizer,
                           int64_t weight_bytes = 4);

/// Cost a greedy sharder balances (Lin et al., TPDS 2024, NeuroShard `sharders.py`):
/// kSizeGreedy -> table bytes, kLookupGreedy -> dim x pooling, kSizeLookupGreedy ->
/// dim x pooling x log10(rows). Zero for kNaive, kRandom and kPlan, which use no cost.
double sharding_cost(ShardingStrategy strategy, const EmbeddingTable& table, int64_t dim,
                     EmbeddingOptimizer optimizer, int64_t weight_bytes = 4);

/// A table that cannot be placed, or an invalid sharding request.
class ShardingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShardingInput {
  std::span<const EmbeddingTable> tables;
  int64_t dim = 0;
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kSgd;
  /// Bytes of table memory each rank may use; its size is the number of ranks (>= 1).
  std::span<const int64_t> rank_capacity_bytes;
  /// Bytes of one weight element (4 fp32, 2 fp16 / bf16).
  int64_t weight_bytes = 4;
  /// kPlan only: plan[t] is the rank of table t (one entry per table, each below the rank count).
  std::span<const uint32_t> plan = {};
};

struct TablePlacement {
  /// rank_of_table[t] is the rank holding table t.
  std::vector<uint32_t> rank_of_table;
  /// tables_of_rank[r] lists the tables on rank r in ascending id order.
  std::vector<std::vector<uint32_t>> tables_of_rank;
  /// Table bytes placed on each rank (table_memory_bytes summed).
  std::vector<int64_t> memory_bytes;
};

/// Places every table. `seed` is used by kRandom only.
///
/// Greedy strategies: tables in decreasing cost (ties: lower table id first); each goes to the
/// rank with the smallest cumulative cost among ranks with room for it, ties broken by smaller
/// cumulative bytes, then by lower rank. kRandom visits tables in id order and draws among the
/// ranks with room, in rank order. kNaive ignores costs and fails if its fixed split overflows
/// a rank. kPlan puts each table where `plan` says and fails when the plan has the wrong length,
/// names a rank that does not exist, or gives a rank more table bytes than its capacity.
TablePlacement shard_tables(const ShardingInput& input, ShardingStrategy strategy,
                            uint64_t seed = 0);

}  // namespace upsim

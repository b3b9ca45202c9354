// Placement of DLRM embedding tables on ranks: TorchRec's sharding types per table
// (https://pytorch.org/torchrec/, torchrec/distributed/sharding/{tw,rw,cw,dp}_sharding.py), with
// the table-wise pieces placed by the seed paper's sharders (Lin et al., TPDS 2024).
//
// Contract:
//  - Pure functions: the same tables, capacities, strategy and seed give the same placement on
//    every platform (the random sharder draws from std::mt19937_64, whose output the C++
//    standard fixes, through upsim's own bounded mapping, never a std:: distribution).
//  - Row-wise and data-parallel tables span every rank: their bytes on each rank
//    (rank_table_memory_bytes) are reserved first, in table-id order. Then the sharder places
//    the table-wise tables and the column-wise shards ("pieces"), each on exactly one rank, in
//    the memory left; a rank may hold no piece.
//  - A rank never holds more table bytes than its capacity. A table or piece that cannot be
//    placed throws ShardingError naming the table (and shard), its bytes and the capacity.
//  - Table ids are indices into the table list; ranks are indices 0..n-1 into the capacity list.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"

namespace upsim {

/// The sharders of the seed paper's experiments (Lin et al., TPDS 2024, run_random_experiments.sh:
/// naive, naive_chunk, random, size_greedy, lookup_greedy, norm_lookup_greedy,
/// size_lookup_greedy; its fork holding them is not public). The greedy ones and `naive` follow
/// the public DreamShard / NeuroShard `sharders.py` the seed's task generator was adapted from.
/// `dim_greedy` is not offered: with one embedding dim for every table it is degenerate.
enum class ShardingStrategy : uint8_t {
  /// Round robin: piece p on rank p mod n (DreamShard / NeuroShard `naive_shard`).
  kNaive,
  /// Contiguous piece ids, near-equal counts, the first ranks one more: the original DLRM split
  /// (facebookresearch/dlrm extend_distributed.py get_split_lengths / get_my_slice). The seed's
  /// definition is unpublished; "chunk" names this contiguous split.
  kNaiveChunk,
  kRandom,        ///< each table on a uniformly drawn rank among those with room for it
  kSizeGreedy,    ///< greedy on cost = table bytes
  kLookupGreedy,  ///< greedy on cost = dim x mean pooling
  /// Greedy on lookups and bytes, each normalized by its total over the pieces:
  /// cost = dim x pooling / sum(dim x pooling) + bytes / sum(bytes). upsim's definition (the
  /// seed's is unpublished; a constant normalization of lookup_greedy's cost would not change
  /// its placement, so "normalized" must weigh lookups against something, and memory is the
  /// other resource a placement spends).
  kNormLookupGreedy,
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
/// The strategy whose sharding_strategy_name is `name`, or nullopt.
std::optional<ShardingStrategy> sharding_strategy_named(std::string_view name);

/// Optimizer that updates the embedding tables (fused into the FBGEMM backward kernel).
using EmbeddingOptimizer = FusedEmbeddingOptimizer;

/// How a table is split over the ranks (TorchRec ShardingType; table_column_wise and grid_shard
/// are not modelled).
enum class EmbeddingShardingType : uint8_t {
  kTableWise,     ///< the whole table on one rank, chosen by the sharder (tw_sharding.py)
  kRowWise,       ///< rows in blocks of ceil(rows / n) over all n ranks (rw_sharding.py)
  kColumnWise,    ///< column_shards shards of dim / column_shards columns, each placed by the
                  ///< sharder like a table (cw_sharding.py)
  kDataParallel,  ///< replicated on every rank, gradients all-reduced (dp_sharding.py)
  /// On one node, rows in blocks of ceil(rows / local ranks) over that node's ranks
  /// (twrw_sharding.py); the node is chosen by lookup cost (shard_tables).
  kTableRowWise,
  /// HugeCTR's hybrid embedding (hybrid_embedding.h): the frequent rows replicated on every rank
  /// like a data-parallel table, the others in row-wise blocks over all ranks.
  kHybrid,
};
/// "table_wise", "row_wise", "column_wise", "data_parallel", "table_row_wise" (TorchRec's
/// ShardingType values), "hybrid".
std::string_view embedding_sharding_type_name(EmbeddingShardingType type);
/// Every sharding type, in declaration order.
std::span<const EmbeddingShardingType> embedding_sharding_types();
/// The type whose embedding_sharding_type_name is `name`, or nullopt.
std::optional<EmbeddingShardingType> embedding_sharding_type_named(std::string_view name);

/// One embedding table, or one piece of a table that a sharder places.
struct EmbeddingTable {
  int64_t rows = 0;
  /// Mean number of indices per bag (the seed's pooling factor L).
  double pooling = 0.0;
  /// Columns; 0 = the model's embedding dim (ShardingInput::dim). A column-wise shard has
  /// dim / column_shards.
  int64_t dim = 0;
  EmbeddingShardingType sharding_type = EmbeddingShardingType::kTableWise;
  /// kColumnWise: number of shards, >= 1, dividing the dim; 1 for the other types.
  int64_t column_shards = 1;
  /// The scenario left the type to choose_sharding_types (sharding_type: auto).
  bool auto_sharding_type = false;
  /// The scenario stated the type (not `auto`, not left out): a plan and `upsim shard` keep it
  /// (TorchRec's ParameterConstraints.sharding_types, one type).
  bool sharding_type_stated = false;
  /// kHybrid: the frequent rows (replicated, 0 .. rows) and the share of the lookups that hit
  /// them (0 .. 1; hybrid_embedding.h).
  int64_t frequent_rows = 0;
  double frequent_share = 0.0;
  /// Measured reuse histogram of a batch (table_statistics.h); empty: none measured.
  std::vector<double> reuse_histogram{};
  /// Zipf exponent of the accesses when no histogram is given; 0: uniform.
  double zipf_alpha = 0.0;
  /// Standard deviation of the pooling factor over batches (informational: kernels are priced
  /// at the mean, as the seed's model does).
  double pooling_std = 0.0;
};

/// The table's columns: table.dim, or `dim` when that is 0.
inline int64_t table_dim(const EmbeddingTable& table, int64_t dim) {
  return table.dim > 0 ? table.dim : dim;
}

/// Bytes a table (or piece) occupies in GPU memory when one rank holds all of it: rows x
/// table_dim weights of `weight_bytes` each (FBGEMM's table-batched embedding stores fp32, fp16
/// or bf16 weights: SparseType of split_table_batched_embeddings_ops) plus the fused optimizer's
/// fp32 state: none for SGD, rows x dim for Adagrad, rows for row-wise Adagrad, 2 x rows x dim
/// for Adam. Ignores sharding_type (see rank_table_memory_bytes).
int64_t table_memory_bytes(const EmbeddingTable& table, int64_t dim, EmbeddingOptimizer optimizer,
                           int64_t weight_bytes = 4);

/// Rows rank `rank` of `ranks` holds of a row-wise table: TorchRec's blocks of
/// ceil(rows / ranks), the last ones shorter or empty (torchrec/distributed/sharding_plan.py
/// _calculate_rw_shard_sizes_and_offsets: 10 rows on 4 ranks -> 3, 3, 3, 1; 5 on 4 -> 2, 2, 1, 0).
int64_t row_wise_shard_rows(int64_t rows, uint32_t rank, uint32_t ranks);

/// Elements of fp32 dense-optimizer state per parameter element (torch.optim): SGD 0, SGD with
/// momentum and Adagrad 1, Adam(W) 2.
int64_t dense_optimizer_states(OptimizerKind kind);

/// Cost a greedy sharder balances (Lin et al., TPDS 2024, NeuroShard `sharders.py`):
/// kSizeGreedy -> table bytes, kLookupGreedy -> dim x pooling, kSizeLookupGreedy ->
/// dim x pooling x log10(rows), with dim = table_dim(table, dim) (a column-wise shard's own);
/// kCappedSizeGreedy -> rows. Zero for kNaive, kNaiveChunk, kRandom and kPlan, which use no
/// cost, and for kNormLookupGreedy, whose cost depends on all pieces (shard_tables computes it).
double sharding_cost(ShardingStrategy strategy, const EmbeddingTable& table, int64_t dim,
                     EmbeddingOptimizer optimizer, int64_t weight_bytes = 4);

/// A table that cannot be placed, or an invalid sharding request.
class ShardingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  /// Table `table` (an id into ShardingInput::tables) does not fit the table memory left.
  ShardingError(const std::string& message, uint32_t table)
      : std::runtime_error(message), table_(table) {}
  /// The table that did not fit, when one did not (else the request as a whole is at fault).
  std::optional<uint32_t> table() const { return table_; }

 private:
  std::optional<uint32_t> table_;
};

/// No single rank: the table is row-wise, column-wise or data-parallel.
inline constexpr uint32_t kNoSingleRank = UINT32_MAX;

/// One table's entry in an explicit placement (ShardingStrategy::kPlan): where its pieces go.
/// The table itself carries the same sharding type and column shards (a plan reader applies
/// them to the tables before sharding).
struct PlannedTable {
  EmbeddingShardingType type = EmbeddingShardingType::kTableWise;
  /// kTableWise: its one rank; kColumnWise: the rank of each shard, in shard order (a rank may
  /// hold several); other types: empty (row-wise and data-parallel tables span every rank).
  std::vector<uint32_t> ranks;
  /// kTableRowWise: the node whose ranks hold its row blocks; kNoSingleRank for other types.
  uint32_t node = kNoSingleRank;

  bool operator==(const PlannedTable&) const = default;
};

struct ShardingInput {
  std::span<const EmbeddingTable> tables;
  int64_t dim = 0;
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kSgd;
  /// Bytes of table memory each rank may use; its size is the number of ranks (>= 1).
  std::span<const int64_t> rank_capacity_bytes;
  /// Bytes of one weight element (4 fp32, 2 fp16 / bf16).
  int64_t weight_bytes = 4;
  /// kPlan only: plan[t] places table t (one entry per table, of the table's own type; each rank
  /// below the rank count and not below tableless_ranks, each node below the node count).
  std::span<const PlannedTable> plan = {};
  /// Optimizer of the data-parallel tables (the dense one: torch.optim over DDP gradients).
  OptimizerKind dense_optimizer = OptimizerKind::kSgd;
  /// Ranks 0 .. tableless_ranks - 1 take no table-wise table or column-wise shard
  /// (DeepLearningExamples' hybrid parallel); row-wise and data-parallel tables still span them.
  uint32_t tableless_ranks = 0;
  /// Ranks per node: nodes are consecutive blocks of this many ranks (it must divide the rank
  /// count); 0 = all ranks are one node. Only table-row-wise tables depend on it.
  uint32_t ranks_per_node = 0;
};

/// Bytes rank `rank` of `ranks` holds of `table` when the table spans the ranks: row-wise, its
/// row_wise_shard_rows(rows, rank, ranks) rows with the fused optimizer's state
/// (table_memory_bytes of the shard); data-parallel, the whole table's weights, its dense
/// gradient (DDP reduces a dense rows x dim gradient: FBGEMM's
/// DenseTableBatchedEmbeddingBagsCodegen) and the dense optimizer's fp32 state
/// (dense_optimizer_states x rows x dim x 4 B); hybrid, its frequent rows as a data-parallel
/// table holds them and its row-wise block of the other rows. 0 for table-wise and column-wise
/// tables, which the sharder places, and for table-row-wise ones, placed by node.
int64_t rank_table_memory_bytes(const EmbeddingTable& table, const ShardingInput& input,
                                uint32_t rank);

/// A piece the sharder placed: a table-wise table, or one column-wise shard.
struct TablePiece {
  uint32_t table = 0;
  /// kColumnWise: the shard, 0 .. column_shards - 1 (columns shard x dim .. (shard + 1) x dim);
  /// 0 for a table-wise table.
  uint32_t shard = 0;
  /// Columns of the piece.
  int64_t dim = 0;
  uint32_t rank = 0;
};

struct TablePlacement {
  /// rank_of_table[t] is the rank holding table-wise table t; kNoSingleRank for other types.
  std::vector<uint32_t> rank_of_table;
  /// tables_of_rank[r] lists, in ascending id order, the tables that rank r holds a table-wise
  /// table or column-wise shard of (each once).
  std::vector<std::vector<uint32_t>> tables_of_rank;
  /// Table-wise tables and column-wise shards, in table-id then shard order.
  std::vector<TablePiece> pieces;
  /// pieces_of_rank[r] lists the indices into `pieces` on rank r, ascending.
  std::vector<std::vector<uint32_t>> pieces_of_rank;
  /// Ids of the row-wise, the data-parallel and the hybrid tables, ascending (they span every
  /// rank).
  std::vector<uint32_t> row_wise;
  std::vector<uint32_t> data_parallel;
  std::vector<uint32_t> hybrid;
  /// Ids of the table-row-wise tables, ascending, and the node each spans
  /// (node_of_table[t]; kNoSingleRank for tables of other types).
  std::vector<uint32_t> table_row_wise;
  std::vector<uint32_t> node_of_table;
  /// Ranks per node the placement used (ShardingInput::ranks_per_node, 0 made the rank count).
  uint32_t ranks_per_node = 1;
  /// Table bytes on each rank: the pieces' table_memory_bytes plus rank_table_memory_bytes of
  /// every row-wise and data-parallel table.
  std::vector<int64_t> memory_bytes;
};

/// A uniform integer in [0, bound) from the high bits of `rng`, rejecting values past `bound`
/// (no modulo, no std:: distribution: both are what make a draw platform-independent). Draws
/// nothing when bound <= 1. The random sharder's and the random tasks' draw.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound);

/// Places every table. `seed` is used by kRandom only.
///
/// Row-wise and data-parallel tables first (their bytes on every rank); then the table-row-wise
/// tables, in decreasing dim x pooling (ties: lower id), each on the node with the smallest
/// cumulative dim x pooling among nodes whose every rank has room for its row block (ties: lower
/// node), whatever the strategy (TorchRec's planner places them by its own cost model); then the
/// pieces in the memory left, on ranks tableless_ranks .. n - 1. Greedy strategies: pieces in
/// decreasing cost (ties: lower piece index first); each goes to the rank with the smallest
/// cumulative cost among ranks with room for it, ties broken by smaller cumulative bytes, then by
/// lower rank. kRandom visits pieces in order and draws among the ranks with room, in rank order.
/// kNaive and kNaiveChunk ignore costs and fail if their fixed split overflows a rank. With
/// table-wise tables only, pieces are tables and the placement is the seed's. kPlan puts each
/// table-wise table and column-wise shard on the rank `plan` gives and each table-row-wise table
/// on its node, and fails when the plan has the wrong length, an entry's type is not its table's,
/// an entry lists the wrong number of ranks (one for a table-wise table, one per shard for a
/// column-wise one, none for the others), names a rank or node that does not exist or a rank
/// below tableless_ranks, or gives a rank more table bytes than its capacity.
TablePlacement shard_tables(const ShardingInput& input, ShardingStrategy strategy,
                            uint64_t seed = 0);

/// The explicit plan that reproduces `placement` of `tables` under kPlan: each table's type,
/// the ranks of its table-wise or column-wise pieces, the node of a table-row-wise table.
std::vector<PlannedTable> planned_tables(const TablePlacement& placement,
                                         std::span<const EmbeddingTable> tables);

}  // namespace upsim

// What `upsim shard` may vary per table when it searches sharding types, as TorchRec's planner
// does (torchrec/distributed/planner: its enumerator lists a sharding option per table and
// sharding type, its proposers combine them, its partitioner places the shards): the sharding
// types a table may take and the classes of identical tables the search moves together.
//
// Contract:
//  - Pure functions of the tables and the platform's shape; deterministic order everywhere.
//  - Only open tables are varied: a table whose group states its sharding_type keeps it (TorchRec's
//    ParameterConstraints.sharding_types with one type); `auto` and a type left out are open.
//  - A class holds open tables that no placement can tell apart (rows, pooling, pooling spread,
//    dim, access statistics); its ids ascend, classes are ordered by their first id.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "workloads/dlrm/sharders.h"

namespace upsim {

/// A sharding type a table may take, with its column shards (1 unless column-wise).
struct TypeChoice {
  EmbeddingShardingType type = EmbeddingShardingType::kTableWise;
  int64_t column_shards = 1;

  bool operator==(const TypeChoice&) const = default;
};

/// TorchRec's column-wise shard width (torchrec/distributed/planner/constants.py MIN_CW_DIM = 128:
/// its enumerator splits a table into shards of 128 columns): tables of at most this many columns
/// are not split by column.
inline constexpr int64_t kTorchRecColumnShardWidth = 128;

/// The types the search tries for a table of `dim` columns on `ranks` ranks in `nodes` nodes,
/// in this order: table_wise, row_wise, data_parallel (TorchRec's EmbeddingBagCollectionSharder
/// default sharding types that upsim models), column_wise with dim / 128 shards when 128 divides a
/// dim above it, table_row_wise when there is more than one node (on one node it is row_wise),
/// hybrid (HugeCTR's frequency split, hybrid_embedding.h). One rank: table_wise alone.
std::vector<TypeChoice> sharding_type_choices(int64_t dim, uint32_t ranks, uint32_t nodes);

/// The open tables in classes of identical tables (see the contract).
std::vector<std::vector<uint32_t>> open_table_classes(std::span<const EmbeddingTable> tables);

/// Each table's current type.
std::vector<TypeChoice> type_choices_of(std::span<const EmbeddingTable> tables);

/// Gives table t the type choices[t] (column shards included; a table made hybrid splits by its
/// access law, hybrid_split for `global_batch` samples on `ranks` GPUs); the tables are no longer
/// `auto`. Throws ShardingError for the table when a table made hybrid has a measured reuse
/// histogram (which does not say which rows are hot).
void apply_type_choices(std::span<EmbeddingTable> tables, std::span<const TypeChoice> choices,
                        int64_t global_batch, uint32_t ranks);

/// "84 tw, 12 rw": how many tables take each type, in type order, with TorchRec's short names
/// (tw, rw, cw, dp, twrw: its sharding modules tw_sharding.py ... twrw_sharding.py) and hybrid.
std::string type_mix(std::span<const TypeChoice> choices);

/// "column_wise x2" for a column-wise choice, else the type's name.
std::string type_choice_name(TypeChoice choice);

}  // namespace upsim

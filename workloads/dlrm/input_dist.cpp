#include "workloads/dlrm/input_dist.h"

#include <cmath>
#include <optional>

#include "sim/units.h"

namespace upsim::dlrm_emit {

namespace {

/// What one sharding type sends to each receiving rank (the same from every sender): lengths
/// and indices, as counts (doubles until rounded once).
struct PerReceiver {
  std::vector<double> lengths;
  std::vector<double> values;
  bool used = false;
};

/// The KJTAllToAll a table's features travel in: its own sharding type's, a hybrid table's in
/// the row-wise one; none for a data-parallel table.
std::optional<EmbeddingShardingType> exchanged_as(EmbeddingShardingType type) {
  switch (type) {
    case EmbeddingShardingType::kDataParallel:
      return std::nullopt;
    case EmbeddingShardingType::kHybrid:
      return EmbeddingShardingType::kRowWise;
    case EmbeddingShardingType::kTableWise:
    case EmbeddingShardingType::kRowWise:
    case EmbeddingShardingType::kColumnWise:
    case EmbeddingShardingType::kTableRowWise:
      return type;
  }
  return std::nullopt;
}

std::vector<int64_t> rounded_bytes(const std::vector<double>& counts, int64_t bytes_each) {
  std::vector<int64_t> out;
  out.reserve(counts.size());
  for (const double c : counts)
    out.push_back(std::llround(c) * bytes_each);
  return out;
}

}  // namespace

std::vector<KjtAllToAll> kjt_all_to_alls(const DlrmConfig& config, const DlrmGraph& built) {
  // Within a sharding group (every rank without two_d), ranks by position.
  const size_t n = built.sharding_groups.group_size;
  if (config.input_dist != InputDistribution::kAllToAll || n <= 1) return {};
  const TablePlacement& placement = built.placement;
  const auto b = as_double(built.local_batch);
  const auto ranks = as_double(static_cast<int64_t>(n));
  std::vector<PerReceiver> kinds(embedding_sharding_types().size());
  for (PerReceiver& k : kinds) {
    k.lengths.assign(n, 0.0);
    k.values.assign(n, 0.0);
  }
  // The order the sharding types first appear in, table by table (the order of TorchRec's
  // sharding_type_to_sharding_infos, a dict filled in table order).
  std::vector<EmbeddingShardingType> order;
  const auto note = [&](EmbeddingShardingType kind) -> PerReceiver& {
    PerReceiver& k = kinds[static_cast<size_t>(kind)];
    if (!k.used) order.push_back(kind);
    k.used = true;
    return k;
  };
  for (uint32_t t = 0; t < config.tables.size(); ++t) {
    const EmbeddingTable& table = config.tables[t];
    const std::optional<EmbeddingShardingType> kind = exchanged_as(table.sharding_type);
    if (!kind) continue;
    PerReceiver& k = note(*kind);
    switch (*kind) {
      case EmbeddingShardingType::kRowWise: {
        // Hybrid: only the lookups that miss the replicated frequent rows leave the rank.
        const double share = table.sharding_type == EmbeddingShardingType::kHybrid
                                 ? 1.0 - table.frequent_share
                                 : 1.0;
        for (size_t j = 0; j < n; ++j) {
          k.lengths[j] += b;
          k.values[j] += b * table.pooling * share / ranks;
        }
        break;
      }
      case EmbeddingShardingType::kTableRowWise: {
        const uint32_t node = placement.node_of_table[t];
        const uint32_t local = placement.ranks_per_node;
        for (uint32_t j = node * local; j < (node + 1) * local; ++j) {
          k.lengths[j] += b;
          k.values[j] += b * table.pooling / as_double(static_cast<int64_t>(local));
        }
        break;
      }
      default:  // table-wise and column-wise: by piece, below
        break;
    }
  }
  // Table-wise tables and column-wise shards: the feature's whole local batch to the piece's rank.
  for (const TablePiece& piece : placement.pieces) {
    const EmbeddingTable& table = config.tables[piece.table];
    PerReceiver& k = kinds[static_cast<size_t>(table.sharding_type)];
    k.lengths[piece.rank] += b;
    k.values[piece.rank] += b * table.pooling;
  }
  std::vector<KjtAllToAll> out;
  const std::vector<int64_t> ones(n, 1);
  for (const EmbeddingShardingType kind : order) {
    const PerReceiver& k = kinds[static_cast<size_t>(kind)];
    KjtAllToAll a2a;
    a2a.sharding = embedding_sharding_type_name(kind);
    a2a.bucketize =
        kind == EmbeddingShardingType::kRowWise || kind == EmbeddingShardingType::kTableRowWise;
    a2a.lengths = AllToAllSizes::outer(ones, rounded_bytes(k.lengths, config.index_bytes));
    a2a.values = AllToAllSizes::outer(ones, rounded_bytes(k.values, config.index_bytes));
    out.push_back(std::move(a2a));
  }
  return out;
}

}  // namespace upsim::dlrm_emit

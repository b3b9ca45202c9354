#include "workloads/dlrm/input_dist.h"

#include <cmath>

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

enum class Kind : uint8_t { kTableWise, kRowWise, kColumnWise, kTableRowWise, kCount };

constexpr std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kTableWise:
      return "table_wise";
    case Kind::kRowWise:
      return "row_wise";
    case Kind::kColumnWise:
      return "column_wise";
    case Kind::kTableRowWise:
      return "table_row_wise";
    case Kind::kCount:
      break;
  }
  return "";
}

std::optional<Kind> kind_of(EmbeddingShardingType type) {
  switch (type) {
    case EmbeddingShardingType::kTableWise:
      return Kind::kTableWise;
    case EmbeddingShardingType::kRowWise:
    case EmbeddingShardingType::kHybrid:
      return Kind::kRowWise;
    case EmbeddingShardingType::kColumnWise:
      return Kind::kColumnWise;
    case EmbeddingShardingType::kTableRowWise:
      return Kind::kTableRowWise;
    case EmbeddingShardingType::kDataParallel:
      return std::nullopt;
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
  const size_t n = built.ranks.size();
  if (config.input_dist != InputDistribution::kAllToAll || n <= 1) return {};
  const TablePlacement& placement = built.placement;
  const auto b = as_double(built.local_batch);
  const auto ranks = as_double(static_cast<int64_t>(n));
  std::vector<PerReceiver> kinds(static_cast<size_t>(Kind::kCount));
  for (PerReceiver& k : kinds) {
    k.lengths.assign(n, 0.0);
    k.values.assign(n, 0.0);
  }
  // The order the sharding types first appear in, table by table (the order of TorchRec's
  // sharding_type_to_sharding_infos, a dict filled in table order).
  std::vector<Kind> order;
  const auto note = [&](Kind kind) -> PerReceiver& {
    PerReceiver& k = kinds[static_cast<size_t>(kind)];
    if (!k.used) order.push_back(kind);
    k.used = true;
    return k;
  };
  for (uint32_t t = 0; t < config.tables.size(); ++t) {
    const EmbeddingTable& table = config.tables[t];
    const std::optional<Kind> kind = kind_of(table.sharding_type);
    if (!kind) continue;
    PerReceiver& k = note(*kind);
    switch (*kind) {
      case Kind::kRowWise: {
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
      case Kind::kTableRowWise: {
        const uint32_t node = placement.node_of_table[t];
        const uint32_t local = placement.ranks_per_node;
        for (uint32_t j = node * local; j < (node + 1) * local; ++j) {
          k.lengths[j] += b;
          k.values[j] += b * table.pooling / as_double(static_cast<int64_t>(local));
        }
        break;
      }
      case Kind::kTableWise:
      case Kind::kColumnWise:
      case Kind::kCount:
        break;
    }
  }
  // Table-wise tables and column-wise shards: the feature's whole local batch to the piece's rank.
  for (const TablePiece& piece : placement.pieces) {
    const EmbeddingTable& table = config.tables[piece.table];
    PerReceiver& k = kinds[static_cast<size_t>(
        table.sharding_type == EmbeddingShardingType::kColumnWise ? Kind::kColumnWise
                                                                  : Kind::kTableWise)];
    k.lengths[piece.rank] += b;
    k.values[piece.rank] += b * table.pooling;
  }
  std::vector<KjtAllToAll> out;
  const std::vector<int64_t> ones(n, 1);
  for (const Kind kind : order) {
    const PerReceiver& k = kinds[static_cast<size_t>(kind)];
    KjtAllToAll a2a;
    a2a.sharding = kind_name(kind);
    a2a.bucketize = kind == Kind::kRowWise || kind == Kind::kTableRowWise;
    a2a.lengths = AllToAllSizes::outer(ones, rounded_bytes(k.lengths, config.index_bytes));
    a2a.values = AllToAllSizes::outer(ones, rounded_bytes(k.values, config.index_bytes));
    out.push_back(std::move(a2a));
  }
  return out;
}

}  // namespace upsim::dlrm_emit

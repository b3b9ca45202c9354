#include "workloads/dlrm/sharding_search_space.h"

#include <fmt/format.h>

#include <array>
#include <map>
#include <optional>
#include <tuple>

#include "workloads/dlrm/hybrid_embedding.h"

namespace upsim {

std::vector<TypeChoice> sharding_type_choices(int64_t dim, uint32_t ranks, uint32_t nodes) {
  std::vector<TypeChoice> out = {{EmbeddingShardingType::kTableWise, 1}};
  if (ranks <= 1) return out;
  out.push_back({EmbeddingShardingType::kRowWise, 1});
  out.push_back({EmbeddingShardingType::kDataParallel, 1});
  if (dim > kTorchRecColumnShardWidth && dim % kTorchRecColumnShardWidth == 0) {
    out.push_back({EmbeddingShardingType::kColumnWise, dim / kTorchRecColumnShardWidth});
  }
  if (nodes > 1) out.push_back({EmbeddingShardingType::kTableRowWise, 1});
  out.push_back({EmbeddingShardingType::kHybrid, 1});
  return out;
}

std::vector<std::vector<uint32_t>> open_table_classes(std::span<const EmbeddingTable> tables) {
  // What a placement or a kernel sees of a table (its type aside, which the search sets).
  using Key = std::tuple<int64_t, double, double, int64_t, std::vector<double>, double>;
  std::map<Key, size_t> index;
  std::vector<std::vector<uint32_t>> out;
  for (uint32_t t = 0; t < tables.size(); ++t) {
    const EmbeddingTable& table = tables[t];
    if (table.sharding_type_stated) continue;
    Key key{table.rows, table.pooling,         table.pooling_std,
            table.dim,  table.reuse_histogram, table.zipf_alpha};
    const auto [it, added] = index.emplace(std::move(key), out.size());
    if (added) out.emplace_back();
    out[it->second].push_back(t);
  }
  return out;
}

std::vector<TypeChoice> type_choices_of(std::span<const EmbeddingTable> tables) {
  std::vector<TypeChoice> out;
  out.reserve(tables.size());
  for (const EmbeddingTable& t : tables)
    out.push_back({t.sharding_type, t.column_shards});
  return out;
}

void apply_type_choices(std::span<EmbeddingTable> tables, std::span<const TypeChoice> choices,
                        int64_t global_batch, uint32_t ranks) {
  for (size_t t = 0; t < tables.size() && t < choices.size(); ++t) {
    const bool becomes_hybrid = choices[t].type == EmbeddingShardingType::kHybrid &&
                                tables[t].sharding_type != EmbeddingShardingType::kHybrid;
    if (becomes_hybrid) {
      const std::optional<HybridSplit> split = hybrid_split(tables[t], global_batch, ranks);
      if (!split) {
        throw ShardingError(
            fmt::format("table {} has a measured reuse histogram, which does not say which rows "
                        "are hot: it cannot be made hybrid",
                        t),
            static_cast<uint32_t>(t));
      }
      tables[t].frequent_rows = split->frequent_rows;
      tables[t].frequent_share = split->frequent_share;
    }
    tables[t].sharding_type = choices[t].type;
    tables[t].column_shards =
        choices[t].type == EmbeddingShardingType::kColumnWise ? choices[t].column_shards : 1;
    tables[t].auto_sharding_type = false;
  }
}

std::string type_mix(std::span<const TypeChoice> choices) {
  static constexpr std::array<const char*, 6> kShort = {"tw", "rw", "cw", "dp", "twrw", "hybrid"};
  std::array<size_t, 6> count{};
  for (const TypeChoice& c : choices)
    ++count.at(static_cast<size_t>(c.type));
  std::string out;
  for (size_t k = 0; k < count.size(); ++k) {
    if (count[k] == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", count[k], kShort[k]);
  }
  return out;
}

std::string type_choice_name(TypeChoice choice) {
  if (choice.type == EmbeddingShardingType::kColumnWise) {
    return fmt::format("column_wise x{}", choice.column_shards);
  }
  return std::string(embedding_sharding_type_name(choice.type));
}

}  // namespace upsim

#include "workloads/dlrm/two_d_parallel.h"

namespace upsim {

ShardingGroups ShardingGroups::of(const TwoDParallel& two_d, uint32_t ranks) {
  ShardingGroups out;
  out.ranks = ranks;
  out.group_size = two_d.sharding_group_size == 0 ? ranks : two_d.sharding_group_size;
  out.inter_host_allreduce = two_d.inter_host_allreduce;
  return out;
}

uint32_t ShardingGroups::rank(uint32_t group, uint32_t position) const {
  return inter_host_allreduce ? group * group_size + position : group + groups() * position;
}

uint32_t ShardingGroups::group_of(uint32_t rank) const {
  return inter_host_allreduce ? rank / group_size : rank % groups();
}

uint32_t ShardingGroups::position_of(uint32_t rank) const {
  return inter_host_allreduce ? rank % group_size : rank / groups();
}

std::vector<uint32_t> ShardingGroups::sharding_group(uint32_t group) const {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < group_size; ++p)
    out.push_back(rank(group, p));
  return out;
}

std::vector<uint32_t> ShardingGroups::replica_group(uint32_t position) const {
  std::vector<uint32_t> out;
  for (uint32_t g = 0; g < groups(); ++g)
    out.push_back(rank(g, position));
  return out;
}

ReplicaSyncBytes replica_sync_bytes(const TablePlacement& placement,
                                    std::span<const EmbeddingTable> tables, int64_t dim,
                                    EmbeddingOptimizer optimizer, int64_t weight_bytes,
                                    uint32_t position) {
  // Rows and columns of each weight tensor the position holds.
  int64_t elements = 0;
  int64_t rows = 0;
  for (const uint32_t p : placement.pieces_of_rank[position]) {
    const TablePiece& piece = placement.pieces[p];
    elements += tables[piece.table].rows * piece.dim;
    rows += tables[piece.table].rows;
  }
  const auto ranks = static_cast<uint32_t>(placement.pieces_of_rank.size());
  for (const uint32_t t : placement.row_wise) {
    const int64_t block = row_wise_shard_rows(tables[t].rows, position, ranks);
    elements += block * dim;
    rows += block;
  }
  ReplicaSyncBytes out;
  out.weights = elements * weight_bytes;
  switch (optimizer) {
    case EmbeddingOptimizer::kAdagrad:
      out.optimizer_state = elements * 4;
      break;
    case EmbeddingOptimizer::kRowWiseAdagrad:
      out.optimizer_state = rows * 4;
      break;
    case EmbeddingOptimizer::kSgd:
    case EmbeddingOptimizer::kAdam:
      break;
  }
  return out;
}

}  // namespace upsim

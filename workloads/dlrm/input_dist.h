// TorchRec's input distribution of a DLRM step (input_dist: all_to_all): the bytes of the
// all-to-alls that bring every sparse feature of each rank's local batch to the ranks that look
// it up, one KJTAllToAll per sharding type (torchrec/distributed/dist_data.py).
//
// A KeyedJaggedTensor holds, per feature, one length per sample and the indices. Each sharding
// type's KJTAllToAll first exchanges its split sizes (SplitsAllToAllAwaitable: an int64 per
// tensor label, plus the stride, per pair of ranks), which the host reads back, then the lengths
// and the indices (KJTAllToAllTensorsAwaitable: one all_to_all_single per label). What each
// rank sends follows from the placement:
//  - table-wise (tw_sharding.py TwSparseFeaturesDist) and column-wise (cw_sharding.py, each shard
//    gets a copy of its feature): a feature's local batch goes whole to the rank of its table or
//    shard, after a permute that orders the features by destination;
//  - row-wise (rw_sharding.py RwSparseFeaturesDist, block_bucketize_sparse_features) and
//    table-row-wise (twrw_sharding.py, within the table's node): every rank of the span gets a
//    length for every local sample and the indices that fall into its row block;
//  - hybrid tables (HugeCTR's split, which TorchRec lacks) as row-wise for the lookups that miss
//    the replicated frequent rows; those hits stay local with the data-parallel tables, which
//    send nothing.
// ASSUMPTION: indices spread evenly over the row blocks (TorchRec's row-wise sharding expects
// hashed ids); lengths are sent in the index dtype (embeddings.index_bytes), as the offsets are.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/all_to_all_sizes.h"
#include "workloads/dlrm/dlrm_generator.h"

namespace upsim::dlrm_emit {

/// Int64 split sizes per pair in one sharding type's splits all-to-all: one per tensor label
/// (lengths, values) and the stride (SplitsAllToAllAwaitable with a fixed stride per key).
inline constexpr int64_t kSplitsPerPair = 3;
inline constexpr int64_t kSplitBytes = 8;

/// One sharding type's KJTAllToAll.
struct KjtAllToAll {
  std::string_view sharding;  ///< "table_wise", "column_wise", "row_wise", "table_row_wise"
  /// Reorders the features by destination (permute_2D_sparse_data) or splits them by row
  /// block (block_bucketize_sparse_features) before sending.
  bool bucketize = false;
  AllToAllSizes lengths;  ///< bytes rank i sends rank j
  AllToAllSizes values;
};

/// The run's KJTAllToAlls, one per sharding type that exchanges indices, in TorchRec's order of
/// sharding types (table-wise, row-wise, column-wise, table-row-wise), among one sharding
/// group's ranks by position (every rank without embeddings.two_d; each group's are the same);
/// empty on a sharding group of one rank (a world of one sends nothing) or with input_dist:
/// local.
std::vector<KjtAllToAll> kjt_all_to_alls(const DlrmConfig& config, const DlrmGraph& built);

}  // namespace upsim::dlrm_emit

// TorchRec's 2D parallel (DMPCollection) for a DLRM run: the world of W ranks split into
// G = W / S sharding groups of S ranks, each one DistributedModelParallel with the same plan
// made for S ranks, and the replica groups that average the copies of each shard.
//
// Sources (pytorch/torchrec):
//  - torchrec/distributed/model_parallel.py, DMPCollection._create_process_groups: a device mesh
//    ("replicate", "shard") whose rows are the sharding groups. By default
//    (use_inter_host_allreduce false) sharding group g is {g + G r : r = 0 .. S-1}, strided, so
//    replica group r (a mesh column) is the block {r G .. r G + G - 1}, inside one node when G <=
//    GPUs per node; with use_inter_host_allreduce, sharding group g is the block {g S .. g S + S -
//    1} and replica group r is {r + S g : g = 0 .. G-1}. Either way a rank's replica group is its
//    position in its sharding group (DMPCollection._remap_sharding_plan maps plan rank r to that
//    position).
//  - DMPCollection.sync / _sync / _allreduce_tensors: per dtype one allreduce_coalesced (ReduceOp
//    AVG) over the replica group of every embedding weight the rank holds (record_function
//    "## 2d_weight_sync ##"), then, with include_optimizer_state (default true), of the fused
//    optimizer's state["sum"] tensors ("## 2d_optimizer_sync ##"); .wait() makes the current
//    stream wait for it. Only SplitTableBatchedEmbeddingBagsCodegen modules are synced
//    (_group_sharded_modules): data-parallel tables (DenseTableBatchedEmbeddingBagsCodegen) stay
//    under DDP over the global process group, as the dense MLPs do.
//  - torchrec/distributed/train_pipeline/train_pipelines.py, TrainPipeline.sync_embeddings, which
//    TrainPipelineSparseDist.progress calls after backward and before the optimizer step when
//    the batch index % dmp_collection_sync_interval_batches (default 1) == 0, inside
//    record_function "## dmp_collection_sync ##".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "workloads/dlrm/sharders.h"

namespace upsim {

/// workload.embeddings.two_d (dlrm_config.h). sharding_group_size 0: no 2D parallel (one DMP
/// over every rank).
struct TwoDParallel {
  uint32_t sharding_group_size = 0;
  /// Iterations between replica syncs: iteration i syncs when i % sync_interval == 0.
  uint32_t sync_interval = 1;
  /// Sharding groups are contiguous blocks and replica groups strided (use_inter_host_allreduce).
  bool inter_host_allreduce = false;
  /// The fused optimizer's state is averaged after the weights (include_optimizer_state).
  bool sync_optimizer_state = true;
};

/// The sharding and replica groups of a run (DMPCollection._create_process_groups). Ranks are
/// DLRM rank indices 0 .. ranks - 1.
struct ShardingGroups {
  uint32_t ranks = 1;       ///< W
  uint32_t group_size = 1;  ///< S, dividing W
  bool inter_host_allreduce = false;

  /// `two_d` on `ranks` ranks (sharding_group_size 0: one group of every rank).
  static ShardingGroups of(const TwoDParallel& two_d, uint32_t ranks);

  /// G, the sharding groups, which is also each replica group's size.
  uint32_t groups() const { return ranks / group_size; }
  /// The rank at `position` (0 .. S-1) of sharding group `group` (0 .. G-1).
  uint32_t rank(uint32_t group, uint32_t position) const;
  uint32_t group_of(uint32_t rank) const;
  /// A rank's position in its sharding group, which is also its replica group's index.
  uint32_t position_of(uint32_t rank) const;
  /// Sharding group `group`'s ranks, by position.
  std::vector<uint32_t> sharding_group(uint32_t group) const;
  /// Replica group `position`'s ranks, by sharding group.
  std::vector<uint32_t> replica_group(uint32_t position) const;
};

/// Whether iteration `iteration` (0-based, TrainPipelineSparseDist's context index) syncs.
inline bool two_d_syncs(const TwoDParallel& two_d, uint32_t iteration) {
  return iteration % two_d.sync_interval == 0;
}

/// Bytes one replica sync averages on the ranks at `position` of their sharding groups (all
/// hold the same shards): `weights`, every table-wise table, column-wise shard and row-wise
/// block the position holds, rows x its columns x `weight_bytes`; `optimizer_state`, their
/// fused optimizer's fp32 state["sum"] (adagrad: rows x columns, rowwise_adagrad: rows, sgd:
/// none; adam keeps no "sum", dlrm_config.h refuses it). Data-parallel tables are not synced.
struct ReplicaSyncBytes {
  int64_t weights = 0;
  int64_t optimizer_state = 0;
};
ReplicaSyncBytes replica_sync_bytes(const TablePlacement& placement,
                                    std::span<const EmbeddingTable> tables, int64_t dim,
                                    EmbeddingOptimizer optimizer, int64_t weight_bytes,
                                    uint32_t position);

}  // namespace upsim

// The collectives a DLRM run's ranks launch: which embedding exchanges the run has
// (EmbeddingExchange, the same on every rank) and one iteration's collective groups
// (IterationGroups, one per sharding group under embeddings.two_d), which dlrm_generator.cpp adds
// per iteration and every rank's emitter (rank_emitter.h) launches in the same order.
#pragma once

#include <vector>

#include "sim/task_graph.h"

namespace upsim::dlrm_emit {

/// One batch's input distribution (input_dist: all_to_all, input_dist.h): its splits
/// all-to-alls (one per KJTAllToAll, or one fused for all under a train_pipeline),
/// then per KJTAllToAll its lengths and values all-to-alls. Empty without one.
struct InputDistGroups {
  std::vector<CollectiveId> splits;
  std::vector<CollectiveId> lengths;
  std::vector<CollectiveId> values;
};

/// The collectives that carry one batch's pooled embeddings forward (0 where the run has none;
/// the per-node and per-local-rank lists are empty without table-row-wise tables).
struct ForwardExchangeGroups {
  /// Table-wise tables, column-wise shards and a hybrid bottom MLP output.
  CollectiveId all_to_all = 0;
  /// Row-wise tables' partial sums.
  CollectiveId reduce_scatter = 0;
  /// Table-row-wise: per node its reduce-scatter, 0 when the node holds none of those tables or
  /// has one rank; per local rank the all-to-all among the nodes' ranks of that local rank, 0
  /// with one node.
  std::vector<CollectiveId> node_reduce_scatter;
  std::vector<CollectiveId> cross_all_to_all;
};

/// Collective groups of one iteration, which every rank launches in the same order
/// (rank_emitter.h; a group the run does not have is left at 0 and never launched).
struct IterationGroups {
  /// The input distribution of this iteration's batch; under train_pipeline: sparse_dist of the
  /// next one's (its splits before this batch's forward, its tensors after it); under
  /// semi_sync of batch it+2's (likewise).
  InputDistGroups input_dist;
  /// train_pipeline: sparse_dist or semi_sync, first iteration: the first batch's, before the
  /// loop (TrainPipelineSparseDist.fill_pipeline).
  InputDistGroups first_batch_input_dist;
  /// train_pipeline: semi_sync, first iteration: the second batch's, before the loop
  /// (TrainPipelineSemiSync.fill_pipeline).
  InputDistGroups second_batch_input_dist;
  /// This batch's forward exchange; under semi_sync the next batch's, launched between this
  /// batch's forward and backward.
  ForwardExchangeGroups forward;
  /// train_pipeline: semi_sync, first iteration: the first batch's forward exchange, before the
  /// loop (fill_pipeline's start_embedding_lookup).
  ForwardExchangeGroups first_batch_forward;
  std::vector<CollectiveId> top;
  CollectiveId a2a_backward = 0;
  CollectiveId all_gather = 0;
  std::vector<CollectiveId> bottom;
  CollectiveId data_parallel = 0;
  /// Table-row-wise backward: per node its all-gather, 0 when the node holds none of those
  /// tables or has one rank; per local rank the all-to-all among the nodes' ranks of that local
  /// rank, 0 with one node.
  std::vector<CollectiveId> node_all_gather;
  std::vector<CollectiveId> cross_a2a_backward;
  /// embeddings.two_d, an iteration that syncs: per replica group (a rank's is its position in
  /// its sharding group) the all-reduce of its weights and of its fused optimizer state, 0 where
  /// that replica holds no such bytes; empty in an iteration without a sync.
  std::vector<CollectiveId> weight_sync;
  std::vector<CollectiveId> optimizer_sync;
};

/// Which embedding collectives the run has (the same on every rank).
struct EmbeddingExchange {
  /// The all-to-all of table-wise tables, column-wise shards and a hybrid bottom MLP output.
  bool all_to_all = false;
  /// The reduce-scatter (forward) and all-gather (backward) of the row-wise tables.
  bool row_wise = false;
  /// The all-reduce of the data-parallel tables' gradients.
  bool data_parallel = false;
  /// The table-row-wise tables' exchange (some collective of it on some rank).
  bool table_row_wise = false;
};

}  // namespace upsim::dlrm_emit

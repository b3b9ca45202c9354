// What one DLRM rank runs, planned once from the run's table placement (RankPlan): its lookups
// by sharding type, its node and local rank for the table-row-wise exchange, the table counts
// its exchange sizes follow from, and its share of the bottom MLP (hybrid parallel: rank 0 runs
// it for the global batch, the others none).
#pragma once

#include <cstdint>

#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/lookup_group.h"

namespace upsim::dlrm_emit {

struct RankPlan {
  /// This rank's lookups: table-wise tables and column-wise shards (its sharding group's batch:
  /// the global batch without two_d), row-wise row blocks (the same), data-parallel replicas
  /// (local batch).
  LookupGroup pieces;
  LookupGroup row_wise;
  LookupGroup data_parallel;
  /// Table-row-wise blocks of this rank's node (global batch).
  LookupGroup table_row_wise;
  uint32_t node = 0;
  uint32_t local_rank = 0;
  /// Table-row-wise tables on this rank's node, and in the whole run.
  int64_t node_tables = 0;
  int64_t table_row_wise_tables = 0;
  int64_t row_wise_tables = 0;
  int64_t data_parallel_tables = 0;
  /// Hybrid tables (hybrid_embedding.h): their frequent rows are in `data_parallel` (local batch,
  /// their dense gradient in data_parallel_elements), their row blocks of the other rows in
  /// `row_wise` (global batch); each is one pooled vector per sample, the sum of the two parts.
  int64_t hybrid_tables = 0;
  /// Values this rank puts into the row-wise reduce-scatter and gets back in its backward
  /// all-gather (row_wise_exchange_values of the global and the local batch).
  int64_t row_wise_sent_values = 0;
  int64_t row_wise_gathered_values = 0;
  /// Elements of all data-parallel tables (rows x dim summed): their dense gradient and update.
  int64_t data_parallel_elements = 0;
  int64_t local_batch = 0;
  /// Hybrid parallel (bottom_mlp_placement first_rank): the bottom MLP runs on rank 0 alone.
  bool hybrid = false;
  /// This rank runs the bottom MLP and puts its output into the exchange.
  bool bottom_in_exchange = false;
  /// Samples this rank's bottom MLP sees (0: it runs none).
  int64_t bottom_batch = 0;
  /// The rank's position in its sharding group (its rank in the placement; its replica group
  /// under embeddings.two_d).
  uint32_t position = 0;
};

/// Values each rank puts into the row-wise reduce-scatter (`batch` = the global batch) or gets
/// back in its backward all-gather (`batch` = the local batch): batch x dim per row-wise table,
/// and per hybrid table only for the share of samples with an infrequent lookup
/// (infrequent_sample_share), rounded to a whole count. The same on every rank.
int64_t row_wise_exchange_values(const DlrmConfig& config, const TablePlacement& placement,
                                 int64_t batch);

/// The plan of DLRM rank `rank` of `built`: what its position in its sharding group holds of the
/// placement, looked up for the group's batch (built.group_batch), and its local batch.
RankPlan plan_rank(const DlrmConfig& config, const DlrmGraph& built, uint32_t rank);

}  // namespace upsim::dlrm_emit

#include "workloads/dlrm/rank_plan.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "sim/units.h"
#include "workloads/dlrm/hybrid_embedding.h"
#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

namespace {

/// Adds to `group` a lookup of `rows` rows and `dim` columns of `table` (the table, a row-wise
/// block or a column-wise shard) at `pooling` indices per bag. Its reuse histogram: the
/// table's measured one as is (a block or shard reuses its rows as the table does), else the
/// Zipf histogram (zipf_reuse_histogram) of these rows for the group's batch x pooling
/// lookups; a row-wise block is taken as a Zipf law over its own rows with its uniform share
/// of the lookups (that the hottest rows fall in the first block is not modelled); uniform
/// accesses have none (the kernel model's own expectation), and neither has a Zipf table
/// without lookups (pooling 0: no distinct rows, nothing for the law to shape), which is thus
/// priced as a uniform one.
void add_lookup(LookupGroup& group, const EmbeddingTable& table, int64_t rows, int64_t dim,
                double pooling) {
  std::vector<double> reuse = table.reuse_histogram;
  if (reuse.empty() && table.zipf_alpha > 0.0) {
    reuse = zipf_reuse_histogram(rows, as_double(group.batch) * pooling, table.zipf_alpha);
    if (std::all_of(reuse.begin(), reuse.end(), [](double h) { return h == 0.0; })) {
      reuse.clear();
    }
  }
  group.tables.push_back(EmbeddingTableShape{rows, dim, pooling, std::move(reuse)});
  group.values_per_sample += dim;
}

}  // namespace

int64_t row_wise_exchange_values(const DlrmConfig& config, const TablePlacement& placement,
                                 int64_t batch) {
  double vectors = as_double(static_cast<int64_t>(placement.row_wise.size()));
  for (uint32_t t : placement.hybrid)
    vectors += infrequent_sample_share(config.tables[t]);
  return std::llround(as_double(batch) * vectors * as_double(config.embedding_dim));
}

RankPlan plan_rank(const DlrmConfig& config, const DlrmGraph& built, uint32_t rank) {
  RankPlan plan;
  const TablePlacement& placement = built.placement;
  // The placement spans the rank's sharding group (every rank without two_d), by position.
  const uint32_t index = built.sharding_groups.position_of(rank);
  const uint32_t ranks = built.sharding_groups.group_size;
  const int64_t batch = built.group_batch;
  const int64_t dim = config.embedding_dim;
  plan.position = index;
  plan.pieces.batch = batch;
  for (uint32_t p : placement.pieces_of_rank[index]) {
    const TablePiece& piece = placement.pieces[p];
    const EmbeddingTable& table = config.tables[piece.table];
    add_lookup(plan.pieces, table, table.rows, piece.dim, table.pooling);
  }
  // Each rank looks its row block up for its sharding group's batch (the global batch without
  // two_d): a uniformly drawn index falls in it with probability shard rows / rows (pooling / n
  // for equal blocks). An empty block (TorchRec's last blocks can be) is no table of the op.
  plan.row_wise.batch = batch;
  for (uint32_t t : placement.row_wise) {
    const EmbeddingTable& table = config.tables[t];
    const int64_t rows = row_wise_shard_rows(table.rows, index, ranks);
    if (rows > 0) {
      add_lookup(plan.row_wise, table, rows, dim,
                 table.pooling * as_double(rows) / as_double(table.rows));
    }
  }
  plan.data_parallel.batch = built.local_batch;
  for (uint32_t t : placement.data_parallel) {
    const EmbeddingTable& table = config.tables[t];
    add_lookup(plan.data_parallel, table, table.rows, dim, table.pooling);
  }
  // Hybrid: the frequent rows replicated and looked up for the local batch (HugeCTR
  // frequent_embedding.cu), the others in row blocks for the global batch, each block with its
  // share of the infrequent lookups (infrequent_embedding.cu spreads them over all GPUs; the
  // blocks' access law is taken as the table's, which the hot rows no longer skew: not modelled).
  for (uint32_t t : placement.hybrid) {
    const EmbeddingTable& table = config.tables[t];
    if (table.frequent_rows > 0) {
      add_lookup(plan.data_parallel, table, table.frequent_rows, dim,
                 table.pooling * table.frequent_share);
      plan.data_parallel_elements += table.frequent_rows * dim;
    }
    const int64_t infrequent = table.rows - table.frequent_rows;
    const int64_t rows = row_wise_shard_rows(infrequent, index, ranks);
    if (rows > 0) {
      add_lookup(
          plan.row_wise, table, rows, dim,
          table.pooling * (1.0 - table.frequent_share) * as_double(rows) / as_double(infrequent));
    }
  }
  plan.hybrid_tables = static_cast<int64_t>(placement.hybrid.size());
  plan.row_wise_sent_values = row_wise_exchange_values(config, placement, batch);
  plan.row_wise_gathered_values = row_wise_exchange_values(config, placement, built.local_batch);
  // Table-row-wise: the row blocks of this node's tables, looked up for the global batch
  // (TorchRec TwRwSparseFeaturesDist sends every rank's indices of a block to its rank).
  const uint32_t local = placement.ranks_per_node;
  plan.node = index / local;
  plan.local_rank = index % local;
  plan.table_row_wise.batch = batch;
  for (uint32_t t : placement.table_row_wise) {
    if (placement.node_of_table[t] != plan.node) continue;
    ++plan.node_tables;
    const EmbeddingTable& table = config.tables[t];
    const int64_t rows = row_wise_shard_rows(table.rows, plan.local_rank, local);
    if (rows > 0) {
      add_lookup(plan.table_row_wise, table, rows, dim,
                 table.pooling * as_double(rows) / as_double(table.rows));
    }
  }
  plan.table_row_wise_tables = static_cast<int64_t>(placement.table_row_wise.size());
  plan.row_wise_tables = static_cast<int64_t>(placement.row_wise.size());
  plan.data_parallel_tables = static_cast<int64_t>(placement.data_parallel.size());
  for (uint32_t t : placement.data_parallel)
    plan.data_parallel_elements += config.tables[t].rows * dim;
  plan.local_batch = built.local_batch;
  plan.hybrid = config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && ranks > 1;
  plan.bottom_in_exchange = plan.hybrid && index == 0;
  plan.bottom_batch = !plan.hybrid ? built.local_batch : (index == 0 ? config.global_batch : 0);
  return plan;
}

}  // namespace upsim::dlrm_emit

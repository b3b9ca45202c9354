// TorchRec's input distribution (input_dist: all_to_all), TrainPipelineSparseDist
// (train_pipeline: sparse_dist) and TrainPipelineSemiSync (semi_sync): the KJTAllToAll sizes per
// sharding type, the ops each rank emits, and what each pipeline hides.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "test/unit/dlrm/dlrm_test_support.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/input_dist.h"

namespace upsim {
namespace {

using dlrm_emit::KjtAllToAll;

// Three tables, dim 2, local batch 4 on 2 ranks. size_lookup_greedy places t0 on rank 0, t1 and
// t2 on rank 1 (dlrm_generator_test.cpp's kTiny).
std::string tiny(std::string_view tables, std::string_view extra) {
  return std::string(R"(workload:
  model: dlrm
  global_batch: 8
  bottom_mlp: [4, 2]
  top_mlp: [4, 1]
  embeddings:
    dim: 2
    tables:
)") + std::string(tables) +
         std::string(extra);
}

constexpr std::string_view kTableWise = R"(      - {rows: 100, pooling: 10}
      - {rows: 50, pooling: 5}
      - {rows: 10, pooling: 1}
)";

constexpr std::string_view kAllToAll = "  input_dist: all_to_all\n";
constexpr std::string_view kPipelined =
    "  input_dist: all_to_all\n  input: prefetch\n  train_pipeline: sparse_dist\n";

using dlrm_test::config_of;
using dlrm_test::inputs_of;

std::vector<KjtAllToAll> kjts_of(const std::string& yaml, uint32_t ranks) {
  const DlrmConfig config = config_of(yaml, ranks);
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config, inputs_of(ranks, 1), g);
  return dlrm_emit::kjt_all_to_alls(config, built);
}

/// Bytes member i sends member j, as a row-major matrix.
std::vector<int64_t> matrix(const AllToAllSizes& sizes) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < sizes.members(); ++i)
    for (size_t j = 0; j < sizes.members(); ++j)
      out.push_back(sizes.at(i, j));
  return out;
}

size_t collectives_named(const TaskGraph& g, RankId rank, std::string_view fragment) {
  size_t n = 0;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank == rank && t.kind == TaskKind::kCollective &&
        g.collective_name(g.collective_of(id)).find(fragment) != std::string_view::npos) {
      ++n;
    }
  }
  return n;
}

size_t host_syncs_named(const TaskGraph& g, RankId rank, std::string_view op) {
  size_t n = 0;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank == rank && t.kind == TaskKind::kHostSync && g.name(t.op_name) == op) ++n;
  }
  return n;
}

TEST(InputDist, TableWiseFeaturesGoWholeToTheirTablesRank) {
  const std::vector<KjtAllToAll> kjts = kjts_of(tiny(kTableWise, kAllToAll), 2);
  ASSERT_EQ(kjts.size(), 1U);
  EXPECT_EQ(kjts[0].sharding, "table_wise");
  EXPECT_FALSE(kjts[0].bucketize);
  // Every rank sends its 4 samples' lengths (8 B each) of t0 to rank 0, of t1 and t2 to rank 1,
  // and their indices: 4 x 10 to rank 0, 4 x (5 + 1) to rank 1.
  EXPECT_EQ(matrix(kjts[0].lengths), (std::vector<int64_t>{32, 64, 32, 64}));
  EXPECT_EQ(matrix(kjts[0].values), (std::vector<int64_t>{320, 192, 320, 192}));
  // The local mode, and a world of one, distribute nothing.
  EXPECT_TRUE(kjts_of(tiny(kTableWise, ""), 2).empty());
  EXPECT_TRUE(kjts_of(tiny(kTableWise, kAllToAll), 1).empty());
}

TEST(InputDist, RowWiseBucketizesEverySampleOverEveryRankAndDataParallelSendsNothing) {
  const std::string tables = R"(      - {rows: 100, pooling: 10, sharding_type: row_wise}
      - {rows: 50, pooling: 5, sharding_type: column_wise, column_shards: 2}
      - {rows: 10, pooling: 1, sharding_type: data_parallel}
)";
  const std::vector<KjtAllToAll> kjts = kjts_of(tiny(tables, kAllToAll), 2);
  ASSERT_EQ(kjts.size(), 2U);  // in the order the types first appear
  EXPECT_EQ(kjts[0].sharding, "row_wise");
  EXPECT_TRUE(kjts[0].bucketize);
  // Row-wise: a length per local sample to each rank, the indices halved between the blocks.
  EXPECT_EQ(matrix(kjts[0].lengths), (std::vector<int64_t>{32, 32, 32, 32}));
  EXPECT_EQ(matrix(kjts[0].values), (std::vector<int64_t>{160, 160, 160, 160}));
  // Column-wise: each of the two shards gets the whole feature.
  EXPECT_EQ(kjts[1].sharding, "column_wise");
  EXPECT_EQ(kjts[1].lengths.sent_by(0), 2 * 32);
  EXPECT_EQ(kjts[1].values.sent_by(0), 2 * 4 * 5 * 8);
}

TEST(InputDist, HybridTablesSendOnlyTheLookupsThatMissTheFrequentRows) {
  const std::string tables =
      R"(      - {rows: 100, pooling: 10, sharding_type: hybrid, frequent_rows: 10, frequent_share: 0.75}
      - {rows: 50, pooling: 5}
)";
  const std::vector<KjtAllToAll> kjts = kjts_of(tiny(tables, kAllToAll), 2);
  ASSERT_EQ(kjts.size(), 2U);
  EXPECT_EQ(kjts[0].sharding, "row_wise");
  EXPECT_EQ(kjts[0].values.at(0, 1), 4 * 10 / 4 / 2 * 8);  // a quarter misses, over 2 blocks
}

TEST(InputDist, TheForwardDistributesItsBatchBeforeTheLookups) {
  TaskGraph local;
  generate_dlrm(config_of(tiny(kTableWise, ""), 2), inputs_of(2, 2), local);
  TaskGraph g;
  generate_dlrm(config_of(tiny(kTableWise, kAllToAll), 2), inputs_of(2, 2), g);
  for (RankId rank = 0; rank < 2; ++rank) {
    // Per iteration: the splits, lengths and values all-to-alls of the one sharding type.
    EXPECT_EQ(collectives_named(g, rank, "input_dist batch splits table_wise"), 2U);
    EXPECT_EQ(collectives_named(g, rank, "input_dist batch table_wise lengths"), 2U);
    EXPECT_EQ(collectives_named(g, rank, "input_dist batch table_wise values"), 2U);
    EXPECT_EQ(collectives_named(local, rank, "input_dist"), 0U);
    // The host reads the splits back once per iteration.
    EXPECT_EQ(host_syncs_named(g, rank, "aten::tolist"), 2U);
  }
  // The values all-to-all precedes the embedding all-to-all on the comm stream.
  const auto first_collective = [&](RankId rank, std::string_view fragment) {
    for (TaskId id = 0; id < g.task_count(); ++id) {
      const Task& t = g.task(id);
      if (t.rank == rank && t.kind == TaskKind::kCollective &&
          g.collective_name(g.collective_of(id)).find(fragment) != std::string_view::npos) {
        return id;
      }
    }
    return kNoTask;
  };
  EXPECT_LT(first_collective(0, "table_wise values"), first_collective(0, "AllToAll fwd"));
}

/// Kernels of 50 us: a step whose GPU work outlasts its host work and its collectives.
Time run_end(TaskGraph& g, uint32_t ranks) {
  const dlrm_test::UnitKernelCost kernels(50);
  const dlrm_test::UnitCollectiveCost collectives;
  const RunStats stats = dlrm_test::run_graph(g, ranks, kernels, collectives);
  EXPECT_EQ(stats.tasks_done, g.task_count());
  return stats.end;
}

TEST(InputDist, TrainPipelineSparseDistDistributesTheNextBatchDuringThisOne) {
  const DlrmConfig sequential = config_of(
      tiny(kTableWise, "  input_dist: all_to_all\n  input: prefetch\n  loss_to_host: false\n"), 2);
  TaskGraph seq;
  generate_dlrm(sequential, inputs_of(2, 4), seq);
  TaskGraph g;
  const DlrmConfig pipelined = config_of(tiny(kTableWise, kPipelined), 2);
  EXPECT_FALSE(pipelined.loss_to_host);  // progress() does not read the loss
  generate_dlrm(pipelined, inputs_of(2, 4), g);
  for (RankId rank = 0; rank < 2; ++rank) {
    // fill_pipeline distributes batch 0, then each step batch i + 1: one fused splits
    // all-to-all each.
    EXPECT_EQ(collectives_named(g, rank, "input_dist first batch splits"), 1U);
    EXPECT_EQ(collectives_named(g, rank, "input_dist next batch splits"), 4U);
    EXPECT_EQ(collectives_named(g, rank, "input_dist next batch table_wise values"), 4U);
    // No synchronize between the steps: one at the loop's end.
    EXPECT_EQ(host_syncs_named(g, rank, "torch.cuda.synchronize"), 1U);
    EXPECT_EQ(host_syncs_named(seq, rank, "torch.cuda.synchronize"), 4U);
  }
  // Per step (the run's growth from 4 to 8 steps), the pipeline hides the distribution.
  const auto per_step_us = [](const DlrmConfig& config) {
    TaskGraph four;
    generate_dlrm(config, inputs_of(2, 4), four);
    TaskGraph eight;
    generate_dlrm(config, inputs_of(2, 8), eight);
    return (run_end(eight, 2) - run_end(four, 2)).us() / 4;
  };
  const double pipelined_us = per_step_us(pipelined);
  const double sequential_us = per_step_us(sequential);
  // At least the three collectives of the distribution (20 us each) leave the critical path.
  EXPECT_LT(pipelined_us, sequential_us - 60);
  std::printf("per step: sequential %.1f us, pipelined %.1f us\n", sequential_us, pipelined_us);
}

/// Stream waits launched by host op `op`.
size_t stream_waits_by(const TaskGraph& g, std::string_view op) {
  size_t n = 0;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.kind == TaskKind::kStreamWait && g.name(g.task(g.launcher_of(id)).op_name) == op) ++n;
  }
  return n;
}

// One rank distributes nothing, but the pipelined step still waits for its batch's copy: the
// compute stream waits on the memcpy stream once a step.
TEST(InputDist, OneRankPipelinedStepWaitsForItsBatchCopy) {
  TaskGraph g;
  generate_dlrm(config_of(tiny(kTableWise, kPipelined), 1), inputs_of(1, 3), g);
  EXPECT_EQ(stream_waits_by(g, "torch.cuda.Stream.wait_stream"), 3U);
  EXPECT_EQ(collectives_named(g, 0, "input_dist"), 0U);
  EXPECT_GT(run_end(g, 1), Time::zero());
}

constexpr std::string_view kSemiSync =
    "  input_dist: all_to_all\n  input: prefetch\n  train_pipeline: semi_sync\n";

/// Where in rank `rank`'s collective launch order the first group whose name holds `fragment`
/// at or after position `from` is; the order's size if none.
size_t position_of(const TaskGraph& g, const std::vector<CollectiveId>& order,
                   std::string_view fragment, size_t from = 0) {
  for (size_t k = from; k < order.size(); ++k) {
    if (g.collective_name(order[k]).find(fragment) != std::string_view::npos) return k;
  }
  return order.size();
}

TEST(InputDist, TrainPipelineSemiSyncLooksUpTheNextBatchBeforeThisBackward) {
  TaskGraph g;
  const DlrmConfig semi_sync = config_of(tiny(kTableWise, kSemiSync), 2);
  EXPECT_FALSE(semi_sync.loss_to_host);
  generate_dlrm(semi_sync, inputs_of(2, 4), g);
  for (RankId rank = 0; rank < 2; ++rank) {
    // fill_pipeline distributes batches 0 and 1 and looks up batch 0; each step distributes
    // batch i + 2 and looks up batch i + 1.
    EXPECT_EQ(collectives_named(g, rank, "input_dist first batch splits"), 1U);
    EXPECT_EQ(collectives_named(g, rank, "input_dist second batch splits"), 1U);
    EXPECT_EQ(collectives_named(g, rank, "input_dist batch after next splits"), 4U);
    EXPECT_EQ(collectives_named(g, rank, "AllToAll fwd first batch"), 1U);
    EXPECT_EQ(collectives_named(g, rank, "AllToAll fwd next batch"), 4U);
    EXPECT_EQ(collectives_named(g, rank, "AllToAll bwd"), 4U);
    EXPECT_EQ(host_syncs_named(g, rank, "torch.cuda.synchronize"), 1U);
    // On the comm stream: batch 0's exchange before the loop; in each step batch i + 1's
    // exchange after batch i + 2's splits and before batch i's DDP all-reduces and its backward
    // exchange, which comes last.
    const std::vector<CollectiveId> order = dlrm_test::collective_order(g, rank);
    size_t at = position_of(g, order, "AllToAll fwd first batch");
    EXPECT_LT(at, position_of(g, order, "input_dist second batch splits"));
    for (int step = 0; step < 4; ++step) {
      const size_t splits = position_of(g, order, "input_dist batch after next splits", at);
      const size_t exchange = position_of(g, order, "AllToAll fwd next batch", at);
      const size_t values =
          position_of(g, order, "input_dist batch after next table_wise values", at);
      const size_t top = position_of(g, order, "AllReduce top bucket", at);
      // The backward stops at the detached embeddings: DDP's all-reduces end it, then
      // emb_backward sends the embeddings' gradients (TrainPipelineSparseDist sends them before
      // the bottom MLP's backward, so its bucket comes after).
      const size_t bottom = position_of(g, order, "AllReduce bottom bucket", at);
      const size_t backward = position_of(g, order, "AllToAll bwd", at);
      EXPECT_LT(splits, exchange) << step;
      EXPECT_LT(exchange, values) << step;
      EXPECT_LT(values, top) << step;
      EXPECT_LT(top, bottom) << step;
      EXPECT_LT(bottom, backward) << step;
      ASSERT_LT(backward, order.size()) << step;
      at = backward + 1;
    }
  }
}

/// Collectives of the tiny model: an all-to-all of 1 KiB or more (the pooled embeddings of
/// dim 64) 400 us, every other collective 20 us, a transfer 3 us.
class SlowExchangeCost final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc& d) const override {
    int64_t sent = 0;
    for (size_t i = 0; i < d.send_bytes.members(); ++i)
      sent += d.send_bytes.sent_by(i);
    return Duration::from_us(d.kind == CollectiveKind::kAllToAll && sent >= 1024 ? 400 : 20);
  }
  Duration transfer_duration(const TransferDesc&) const override { return Duration::from_us(3); }
};

/// Per-step time (the growth from 4 to 8 steps) of the dim-64 two-table model on 2 ranks with
/// `bottom_mlp`, a top MLP of 4 layers and `pipeline`, every kernel 50 us and the exchanges slow.
double slow_exchange_step_us(std::string_view pipeline, std::string_view bottom_mlp) {
  const std::string yaml = fmt::format(R"(workload:
  model: dlrm
  global_batch: 8
  bottom_mlp: {}
  top_mlp: [64, 64, 64, 1]
  input_dist: all_to_all
  input: prefetch
  train_pipeline: {}
  embeddings:
    dim: 64
    tables:
      - {{rows: 100, pooling: 10}}
      - {{rows: 50, pooling: 5}}
)",
                                       bottom_mlp, pipeline);
  const DlrmConfig config = config_of(yaml, 2);
  const dlrm_test::UnitKernelCost kernels(50);
  const SlowExchangeCost collectives;
  const auto end = [&](uint32_t iterations) {
    TaskGraph g;
    generate_dlrm(config, inputs_of(2, iterations), g);
    const RunStats stats = dlrm_test::run_graph(g, 2, kernels, collectives);
    EXPECT_EQ(stats.tasks_done, g.task_count());
    return stats.end;
  };
  return (end(8) - end(4)).us() / 4;
}

// The trade TrainPipelineSemiSync makes, exactly (kernels 50 us, the exchanges 400 us, other
// collectives 20 us): TrainPipelineSparseDist hides the forward exchange behind the bottom MLP's
// forward (addmm and relu per layer) and the backward exchange behind its backward (one layer:
// threshold_backward, the weight and bias gradients and DDP's pre-scale); semi-sync hides the
// forward exchange behind the whole backward, and exposes the backward exchange and the bottom
// MLP's DDP all-reduce, which now precedes it.
//   1 layer:  sparse_dist exposes (400 - 100) + (400 - 200) = 500 us, semi-sync 400 + 20: 80 us
//             less.
//   4 layers: sparse_dist hides both (the bottom MLP's forward alone takes 400 us), semi-sync
//             still exposes 420 us.
TEST(InputDist, TrainPipelineSemiSyncTradesTheBottomMlpOverlapForTheBackwardOne) {
  const double shallow_sparse_dist = slow_exchange_step_us("sparse_dist", "[4, 64]");
  const double shallow_semi_sync = slow_exchange_step_us("semi_sync", "[4, 64]");
  const double deep_sparse_dist = slow_exchange_step_us("sparse_dist", "[4, 64, 64, 64, 64]");
  const double deep_semi_sync = slow_exchange_step_us("semi_sync", "[4, 64, 64, 64, 64]");
  EXPECT_NEAR(shallow_semi_sync, shallow_sparse_dist - 80, 1);
  EXPECT_NEAR(deep_semi_sync, deep_sparse_dist + 420, 1);
}

// One rank distributes nothing: each lookup waits for its own batch's copy event (batch 0 in
// fill_pipeline, then batch i + 1 in step i).
TEST(InputDist, OneRankSemiSyncLookupWaitsForItsBatchCopyEvent) {
  TaskGraph g;
  generate_dlrm(config_of(tiny(kTableWise, kSemiSync), 1), inputs_of(1, 3), g);
  EXPECT_EQ(stream_waits_by(g, "torch.cuda.Stream.wait_event"), 4U);
  EXPECT_EQ(collectives_named(g, 0, "input_dist"), 0U);
  EXPECT_GT(run_end(g, 1), Time::zero());
}

TEST(InputDist, KeysThatCannotWorkTogetherAreRefusedAtTheirKey) {
  const auto refused = [](const std::string& extra, uint32_t ranks, std::string_view key) {
    try {
      config_of(tiny(kTableWise, extra), ranks);
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused("  train_pipeline: sparse_dist\n  input: prefetch\n", 2, "train_pipeline"));
  EXPECT_TRUE(
      refused("  train_pipeline: sparse_dist\n  input_dist: all_to_all\n", 2, "train_pipeline"));
  EXPECT_TRUE(
      refused("  mode: inference\n  input_dist: all_to_all\n  train_pipeline: sparse_dist\n", 2,
              "train_pipeline"));
  EXPECT_TRUE(refused("  train_pipeline: semi_sync\n  input: prefetch\n", 2, "semi_sync"));
  EXPECT_TRUE(
      refused("  train_pipeline: semi_sync\n  input_dist: all_to_all\n", 2, "train_pipeline"));
  EXPECT_TRUE(refused("  train_pipeline: async\n", 2, "train_pipeline"));
  EXPECT_TRUE(refused("  input_dist: all_to_all\n  bottom_mlp_placement: first_rank\n", 2,
                      "bottom_mlp_placement"));
  EXPECT_TRUE(
      refused("  input_dist: all_to_all\n  input: prefetch\n  loss_to_host: false\n"
              "  cuda_graphs: true\n",
              2, "cuda_graphs"));
  EXPECT_TRUE(refused("  input_dist: scatter\n", 2, "input_dist"));
}

}  // namespace
}  // namespace upsim

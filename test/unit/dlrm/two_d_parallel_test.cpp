// embeddings.two_d (TorchRec's DMPCollection): the sharding and replica groups, the embedding
// collectives within a sharding group, the replica sync's groups, bytes and schedule, and the
// keys' errors.
#include "workloads/dlrm/two_d_parallel.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sim/config/config_error.h"
#include "test/unit/dlrm/dlrm_test_support.h"
#include "workloads/dlrm/dlrm_generator.h"

namespace upsim {
namespace {

using dlrm_test::config_of;
using dlrm_test::expect_same_graph;
using dlrm_test::inputs_of;

// Three tables, dim 2, global batch 8. On a sharding group of 2 ranks size_lookup_greedy puts
// t0 (100 rows) on position 0, t1 (50) and t2 (10) on position 1; fp32 weights: 800 B and
// 480 B.
std::string tiny(const std::string& two_d, const std::string& extra = "",
                 const std::string& optimizer = "sgd") {
  return R"(workload:
  model: dlrm
  global_batch: 8
  bottom_mlp: [4, 2]
  top_mlp: [4, 1]
  embeddings:
    dim: 2
    optimizer: )" +
         optimizer + "\n" + two_d + R"(    tables:
      - {rows: 100, pooling: 10}
      - {rows: 50, pooling: 5}
      - {rows: 10, pooling: 1}
  ddp_first_bucket: 16B
  ddp_bucket: 64B
)" + extra;
}

std::string two_d(int size, const std::string& more = "") {
  return "    two_d: {sharding_group_size: " + std::to_string(size) + more + "}\n";
}

std::vector<CollectiveId> named(const TaskGraph& g, std::string_view prefix) {
  std::vector<CollectiveId> out;
  for (CollectiveId c = 0; c < g.collective_count(); ++c) {
    if (g.collective_name(c).substr(0, prefix.size()) == prefix) out.push_back(c);
  }
  return out;
}

TEST(TwoDParallel, GroupsFollowDmpCollectionsDeviceMesh) {
  // Default: sharding groups strided, replica groups contiguous blocks of W / S.
  const ShardingGroups strided = ShardingGroups::of(TwoDParallel{4, 1, false, true}, 8);
  EXPECT_EQ(strided.groups(), 2U);
  EXPECT_EQ(strided.sharding_group(0), (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_EQ(strided.sharding_group(1), (std::vector<uint32_t>{1, 3, 5, 7}));
  EXPECT_EQ(strided.replica_group(0), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(strided.replica_group(3), (std::vector<uint32_t>{6, 7}));
  // use_inter_host_allreduce: sharding groups contiguous, replica groups strided.
  const ShardingGroups blocks = ShardingGroups::of(TwoDParallel{4, 1, true, true}, 8);
  EXPECT_EQ(blocks.sharding_group(1), (std::vector<uint32_t>{4, 5, 6, 7}));
  EXPECT_EQ(blocks.replica_group(1), (std::vector<uint32_t>{1, 5}));
  for (const ShardingGroups& layout : {strided, blocks}) {
    for (uint32_t r = 0; r < 8; ++r) {
      EXPECT_EQ(layout.rank(layout.group_of(r), layout.position_of(r)), r);
    }
  }
  // Without two_d: one group of every rank, position = rank.
  const ShardingGroups plain = ShardingGroups::of(TwoDParallel{}, 8);
  EXPECT_EQ(plain.groups(), 1U);
  EXPECT_EQ(plain.position_of(5), 5U);
}

/// `yaml` with t0 row-wise.
std::string with_row_wise(std::string yaml) {
  const std::string from = "{rows: 100, pooling: 10}";
  yaml.replace(yaml.find(from), from.size(), "{rows: 100, pooling: 10, sharding_type: row_wise}");
  return yaml;
}

TEST(TwoDParallel, ShardingGroupOfEveryRankIsThePlainGraph) {
  const std::string pipelined =
      "  input: prefetch\n  input_dist: all_to_all\n  train_pipeline: sparse_dist\n";
  for (const bool row_wise : {false, true}) {
    for (const std::string& extra : {std::string(), pipelined}) {
      std::string plain_yaml = tiny("", extra);
      std::string whole_yaml = tiny(two_d(4), extra);
      if (row_wise) {
        plain_yaml = with_row_wise(plain_yaml);
        whole_yaml = with_row_wise(whole_yaml);
      }
      TaskGraph plain;
      TaskGraph whole;
      generate_dlrm(config_of(plain_yaml, 4), inputs_of(4, 2), plain);
      generate_dlrm(config_of(whole_yaml, 4), inputs_of(4, 2), whole);
      expect_same_graph(plain, whole);
    }
  }
}

// 4 ranks, S = 2: sharding groups {0, 2} and {1, 3}, replica groups {0, 1} and {2, 3}. Local
// batch 2, a group's batch 4.
TEST(TwoDParallel, EmbeddingCollectivesStayInTheShardingGroupAndTheSyncInTheReplicaGroup) {
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(tiny(two_d(2)), 4), inputs_of(4, 1), g);
  EXPECT_EQ(built.group_batch, 4);
  ASSERT_EQ(built.placement.pieces_of_rank.size(), 2U);
  EXPECT_EQ(built.placement.tables_of_rank[0], (std::vector<uint32_t>{0}));
  EXPECT_EQ(built.placement.tables_of_rank[1], (std::vector<uint32_t>{1, 2}));

  const std::vector<CollectiveId> fwd = named(g, "ncclKernel_AllToAll fwd");
  ASSERT_EQ(fwd.size(), 2U);
  EXPECT_EQ(g.collective(fwd[0]).members, (std::vector<RankId>{0, 2}));
  EXPECT_EQ(g.collective(fwd[1]).members, (std::vector<RankId>{1, 3}));
  EXPECT_EQ(g.collective_name(fwd[1]), "ncclKernel_AllToAll fwd sharding group 1");
  // Position 0 sends b x 2 values x 4 B = 16 B to each, position 1 b x 4 x 4 B = 32 B.
  EXPECT_EQ(g.collective(fwd[0]).send_bytes, AllToAllSizes::dense(2, {16, 16, 32, 32}));
  // The dense DDP buckets span every rank.
  for (const CollectiveId c : named(g, "ncclKernel_AllReduce top bucket")) {
    EXPECT_EQ(g.collective(c).members, (std::vector<RankId>{0, 1, 2, 3}));
  }
  // Rank 1 (group 1, position 0) looks t0 up for its group's 4 samples.
  bool looked_up = false;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank == 1 && t.kind == TaskKind::kKernel &&
        g.name(t.op_name) == "fbgemm::split_embedding_codegen_lookup_sgd_function") {
      EXPECT_EQ(g.kernel(id).embedding.batch, 4);
      EXPECT_EQ(g.kernel(id).embedding.per_table.size(), 1U);
      EXPECT_EQ(g.kernel(id).embedding.per_table.front().rows, 100);
      looked_up = true;
    }
  }
  EXPECT_TRUE(looked_up);

  const std::vector<CollectiveId> sync = named(g, "ncclKernel_AllReduce 2d_weight_sync");
  ASSERT_EQ(sync.size(), 2U);
  EXPECT_EQ(g.collective(sync[0]).members, (std::vector<RankId>{0, 1}));
  EXPECT_EQ(g.collective(sync[1]).members, (std::vector<RankId>{2, 3}));
  EXPECT_EQ(g.collective(sync[0]).bytes, 100 * 2 * 4);
  EXPECT_EQ(g.collective(sync[1]).bytes, (50 + 10) * 2 * 4);
  // SGD keeps no state to sync.
  EXPECT_TRUE(named(g, "ncclKernel_AllReduce 2d_optimizer_sync").empty());
  // The sync is each rank's last collective (after DDP's), and the graph runs.
  for (RankId r = 0; r < 4; ++r) {
    EXPECT_EQ(dlrm_test::collective_order(g, r).back(), sync[r / 2]) << r;
  }
  dlrm_test::UnitKernelCost kernels;
  dlrm_test::UnitCollectiveCost collectives;
  int ended = 0;
  dlrm_test::run_graph(g, 4, kernels, collectives, &ended);
  EXPECT_EQ(static_cast<size_t>(ended), g.task_count());
}

// t0 row-wise over a sharding group of 2: each position holds 50 of its rows; the group's
// reduce-scatter reduces its 4 samples (4 x dim 2 x 4 B = 32 B), the all-gather the local 2.
TEST(TwoDParallel, RowWiseBlocksSpanTheShardingGroup) {
  TaskGraph g;
  generate_dlrm(config_of(with_row_wise(tiny(two_d(2))), 4), inputs_of(4, 1), g);
  const std::vector<CollectiveId> rs = named(g, "ncclKernel_ReduceScatter row-wise fwd");
  ASSERT_EQ(rs.size(), 2U);
  EXPECT_EQ(g.collective(rs[1]).members, (std::vector<RankId>{1, 3}));
  EXPECT_EQ(g.collective(rs[0]).bytes, 4 * 2 * 4);
  const std::vector<CollectiveId> ag = named(g, "ncclKernel_AllGather row-wise bwd");
  ASSERT_EQ(ag.size(), 2U);
  EXPECT_EQ(g.collective(ag[0]).bytes, 2 * 2 * 4);
  // Position 0: t0's block and t1; position 1: t0's block and t2.
  const std::vector<CollectiveId> sync = named(g, "ncclKernel_AllReduce 2d_weight_sync");
  ASSERT_EQ(sync.size(), 2U);
  EXPECT_EQ(g.collective(sync[0]).bytes, (50 + 50) * 2 * 4);
  EXPECT_EQ(g.collective(sync[1]).bytes, (50 + 10) * 2 * 4);
}

TEST(TwoDParallel, InterHostAllReduceSwapsTheGroups) {
  TaskGraph g;
  generate_dlrm(config_of(tiny(two_d(2, ", inter_host_allreduce: true")), 4), inputs_of(4, 1), g);
  const std::vector<CollectiveId> fwd = named(g, "ncclKernel_AllToAll fwd");
  ASSERT_EQ(fwd.size(), 2U);
  EXPECT_EQ(g.collective(fwd[1]).members, (std::vector<RankId>{2, 3}));
  const std::vector<CollectiveId> sync = named(g, "ncclKernel_AllReduce 2d_weight_sync");
  ASSERT_EQ(sync.size(), 2U);
  EXPECT_EQ(g.collective(sync[1]).members, (std::vector<RankId>{1, 3}));
}

TEST(TwoDParallel, OptimizerStateSyncsItsSumTensors) {
  // rowwise_adagrad: one fp32 per row; adagrad: rows x dim fp32.
  for (const auto& [optimizer, position0, position1] :
       {std::tuple{"rowwise_adagrad", 100 * 4, 60 * 4}, std::tuple{"adagrad", 800, 480}}) {
    TaskGraph g;
    generate_dlrm(config_of(tiny(two_d(2), "", optimizer), 4), inputs_of(4, 1), g);
    const std::vector<CollectiveId> state = named(g, "ncclKernel_AllReduce 2d_optimizer_sync");
    ASSERT_EQ(state.size(), 2U) << optimizer;
    EXPECT_EQ(g.collective(state[0]).bytes, position0) << optimizer;
    EXPECT_EQ(g.collective(state[1]).bytes, position1) << optimizer;
    EXPECT_EQ(g.collective(state[0]).members, (std::vector<RankId>{0, 1}));
  }
  TaskGraph off;
  generate_dlrm(config_of(tiny(two_d(2, ", sync_optimizer_state: false"), "", "adagrad"), 4),
                inputs_of(4, 1), off);
  EXPECT_TRUE(named(off, "ncclKernel_AllReduce 2d_optimizer_sync").empty());
  EXPECT_EQ(named(off, "ncclKernel_AllReduce 2d_weight_sync").size(), 2U);
}

TEST(TwoDParallel, SyncIntervalTwoSyncsOnAlternateIterations) {
  TaskGraph g;
  generate_dlrm(config_of(tiny(two_d(2, ", sync_interval: 2")), 4), inputs_of(4, 4), g);
  // Iterations 0 and 2, one all-reduce per replica group each.
  const std::vector<CollectiveId> sync = named(g, "ncclKernel_AllReduce 2d_weight_sync");
  ASSERT_EQ(sync.size(), 4U);
  // Which iteration launched each: rank 0 launches its replica group's in iteration order,
  // between the iteration marks.
  std::vector<uint32_t> iterations;
  uint32_t it = 0;
  bool first_mark = true;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank != 0) continue;
    if (t.kind == TaskKind::kIterationMark) {
      if (!first_mark) ++it;
      first_mark = false;
    }
    if (t.kind == TaskKind::kLaunch && g.task(g.launched_task(id)).kind == TaskKind::kCollective &&
        g.collective_name(g.collective_of(g.launched_task(id))).find("2d_weight_sync") !=
            std::string_view::npos) {
      iterations.push_back(it);
    }
  }
  EXPECT_EQ(iterations, (std::vector<uint32_t>{0, 2}));
}

TEST(TwoDParallel, ShardingGroupOfOneLooksEverythingUpLocally) {
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(tiny(two_d(1)), 4), inputs_of(4, 1), g);
  EXPECT_EQ(built.group_batch, 2);
  EXPECT_TRUE(named(g, "ncclKernel_AllToAll").empty());
  const std::vector<CollectiveId> sync = named(g, "ncclKernel_AllReduce 2d_weight_sync");
  ASSERT_EQ(sync.size(), 1U);
  EXPECT_EQ(g.collective(sync[0]).members, (std::vector<RankId>{0, 1, 2, 3}));
  EXPECT_EQ(g.collective(sync[0]).bytes, 160 * 2 * 4);
}

std::string error_of(const std::string& yaml, uint32_t ranks = 4) {
  try {
    config_of(yaml, ranks);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TwoDParallel, KeysRefuseWhatIsNotModelled) {
  const std::string indivisible = error_of(tiny(two_d(3)));
  EXPECT_NE(indivisible.find("sharding_group_size"), std::string::npos) << indivisible;
  EXPECT_NE(indivisible.find("does not divide the run's 4 ranks"), std::string::npos)
      << indivisible;
  const std::string too_many = error_of(tiny(two_d(8)));
  EXPECT_NE(too_many.find("sharding_group_size"), std::string::npos) << too_many;
  EXPECT_NE(too_many.find("does not divide the run's 4 ranks"), std::string::npos) << too_many;
  EXPECT_NE(error_of(tiny(two_d(2, ", sync_interval: 0"))).find("sync_interval"),
            std::string::npos);

  std::string twrw = tiny(two_d(2));
  twrw.replace(twrw.find("{rows: 50, pooling: 5}"), 22,
               "{rows: 50, pooling: 5, sharding_type: table_row_wise}");
  const std::string twrw_error = error_of(twrw);
  EXPECT_NE(twrw_error.find("sharding_type"), std::string::npos) << twrw_error;
  EXPECT_NE(twrw_error.find("two_d"), std::string::npos) << twrw_error;

  const std::string first_rank = error_of(tiny(two_d(2), "  bottom_mlp_placement: first_rank\n"));
  EXPECT_NE(first_rank.find("bottom_mlp_placement"), std::string::npos) << first_rank;

  const std::string adam = error_of(tiny(two_d(2), "", "adam"));
  EXPECT_NE(adam.find("sync_optimizer_state"), std::string::npos) << adam;
  EXPECT_EQ(error_of(tiny(two_d(2, ", sync_optimizer_state: false"), "", "adam")), "");
}

}  // namespace
}  // namespace upsim

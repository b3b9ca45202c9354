#include "workloads/dlrm/random_tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/task_graph.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_workload.h"

namespace upsim {
namespace {

/// 200 tables: rows 1000 x (1 + i mod 50), pooling i mod 40 (100 with pooling >= 20).
std::vector<EmbeddingTable> pool() {
  std::vector<EmbeddingTable> out;
  for (int i = 0; i < 200; ++i)
    out.push_back(EmbeddingTable{1000 * (1 + i % 50), static_cast<double>(i % 40)});
  return out;
}

constexpr int64_t kGpuMemory = int64_t{40} << 30;

TEST(RandomTasks, FollowTheSeedsCountAndDrawDistinctTables) {
  const std::vector<EmbeddingTable> p = pool();
  std::set<size_t> counts;
  for (uint32_t task = 0; task < 20; ++task) {
    RandomTaskSpec spec;
    spec.task = task;
    const std::vector<uint32_t> t = draw_random_task(p, 128, spec, 4, kGpuMemory);
    // floor(13 x 4 x 0.7) = 36 .. floor(13 x 4 x 1.3) = 67, exclusive.
    EXPECT_GE(t.size(), 36U);
    EXPECT_LT(t.size(), 67U);
    EXPECT_EQ(std::set<uint32_t>(t.begin(), t.end()).size(), t.size()) << "distinct";
    counts.insert(t.size());
  }
  EXPECT_GT(counts.size(), 5U);  // the count varies from task to task
}

TEST(RandomTasks, AreDeterministicPerSeedAndTask) {
  const std::vector<EmbeddingTable> p = pool();
  RandomTaskSpec spec;
  spec.seed = 7;
  spec.task = 3;
  const std::vector<uint32_t> a = draw_random_task(p, 128, spec, 4, kGpuMemory);
  EXPECT_EQ(draw_random_task(p, 128, spec, 4, kGpuMemory), a);
  spec.task = 4;
  EXPECT_NE(draw_random_task(p, 128, spec, 4, kGpuMemory), a);
  spec.task = 3;
  spec.seed = 8;
  EXPECT_NE(draw_random_task(p, 128, spec, 4, kGpuMemory), a);
}

TEST(RandomTasks, HeavyTasksDrawOnlyTablesWithPoolingFromTwenty) {
  const std::vector<EmbeddingTable> p = pool();
  RandomTaskSpec spec;
  spec.heavy = true;
  const std::vector<uint32_t> t = draw_random_task(p, 128, spec, 4, kGpuMemory);
  for (const uint32_t i : t)
    EXPECT_GE(p[i].pooling, 20.0) << i;
}

TEST(RandomTasks, RejectDrawsOverTheMemoryShare) {
  // Half the pool is 10 M rows (5.12 GB at dim 128, fp32): 4 GPUs of 40 GB at 0.8 hold 128 GB,
  // 25 of them, while a draw of 36 .. 66 from this pool holds about half its count: the larger
  // draws are rejected, and every accepted one fits.
  std::vector<EmbeddingTable> p = pool();
  for (size_t i = 0; i < p.size(); i += 2)
    p[i].rows = 10'000'000;
  const int64_t memory = int64_t{40} * 1000 * 1000 * 1000;
  for (uint32_t task = 0; task < 3; ++task) {
    RandomTaskSpec spec;
    spec.task = task;
    double bytes = 0;
    for (const uint32_t i : draw_random_task(p, 128, spec, 4, memory))
      bytes += static_cast<double>(p[i].rows) * 128 * 4;
    EXPECT_LE(bytes, 0.8 * 4 * static_cast<double>(memory)) << task;
  }
}

TEST(RandomTasks, ErrorsNameWhatIsMissing) {
  const std::vector<EmbeddingTable> small(50, EmbeddingTable{1000, 30});
  try {
    draw_random_task(small, 128, RandomTaskSpec{}, 4, kGpuMemory);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("up to 66 tables, but the pool has 50"), std::string::npos)
        << e.what();
  }
  // No draw fits: every table is larger than the memory.
  const std::vector<EmbeddingTable> huge(100, EmbeddingTable{1'000'000'000, 30});
  EXPECT_THROW(draw_random_task(huge, 128, RandomTaskSpec{}, 4, kGpuMemory), std::invalid_argument);
}

std::string scenario(const std::string& extra, const std::string& tail = "") {
  std::string tables;
  for (int i = 0; i < 120; ++i) {
    tables += "      - {rows: " + std::to_string(1000 * (1 + i % 7)) +
              ", pooling: " + std::to_string(i % 30) + (i == 5 ? ", all_zero: true" : "") + "}\n";
  }
  // all_zero is a key of the seed's table configs: those tables use num_embeddings.
  for (std::string::size_type at = tables.find("rows: "); at != std::string::npos;
       at = tables.find("rows: ", at + 1)) {
    tables.replace(at, 5, "num_embeddings:");
  }
  for (std::string::size_type at = tables.find("pooling: "); at != std::string::npos;
       at = tables.find("pooling: ", at + 1)) {
    tables.replace(at, 8, "pooling_factor:");
  }
  return R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [13, 16]
  top_mlp: [8, 1]
  embeddings:
    dim: 16
)" + extra +
         "    tables:\n" + tables + tail;
}

TEST(RandomTasks, AScenarioDrawsItsTablesFromThePoolForItsPlatform) {
  ConfigDocument doc = ConfigDocument::parse_string(
      scenario("    random_task: {seed: 3, task: 1, heavy: true, tables_per_gpu: 4}\n"),
      "scenario.yaml");
  DlrmWorkload workload(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = 4;
  platform.device.name = "test GPU";
  platform.device.hbm_bytes = kGpuMemory;
  workload.prepare(platform);
  doc.check_all_keys_used();
  TaskGraph graph;
  const WorkloadBuild built = workload.build(platform, graph);
  const auto line = std::find_if(built.description.begin(), built.description.end(),
                                 [](const std::string& l) { return l.starts_with("random task"); });
  ASSERT_NE(line, built.description.end());
  // 119 pool tables (the all-zero one dropped); heavy: pooling >= 20.
  EXPECT_NE(line->find("random task 1 of seed 3, heavy (pooling >= 20): "), std::string::npos)
      << *line;
  EXPECT_NE(line->find("of the pool's 119 tables (4 per GPU x [0.7, 1.3))"), std::string::npos)
      << *line;

  // A plan is for fixed tables: refused with a random task.
  ConfigDocument plan = ConfigDocument::parse_string(
      scenario("    random_task: {}\n", "  sharding: plan\n  sharding_plan: plan.yaml\n"),
      "scenario.yaml");
  try {
    parse_dlrm_config(plan.root().child("workload"), 4);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.sharding_plan");
    EXPECT_NE(e.message().find("random_task draws the tables"), std::string::npos) << e.what();
  }
  // A pool too small for the platform: an error at random_task.
  ConfigDocument big = ConfigDocument::parse_string(
      scenario("    random_task: {tables_per_gpu: 100}\n"), "scenario.yaml");
  DlrmWorkload too_many(big.root().child("workload"));
  try {
    too_many.prepare(platform);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.embeddings.random_task");
    EXPECT_NE(e.message().find("but the pool has 119"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace upsim

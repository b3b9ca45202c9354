// `sharding: plan`: the plan file reader (counts, ranks, keys; errors name the plan's file, line
// and key), the kPlan sharder (each table where the plan says, each rank within its table
// memory) and the DLRM workload's error for a plan that overflows a rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/task_graph.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_workload.h"
#include "workloads/dlrm/sharders.h"

namespace upsim {
namespace {

namespace fs = std::filesystem;

/// A plan of table-wise tables: table t on ranks[t].
std::vector<PlannedTable> table_wise_plan(const std::vector<uint32_t>& ranks) {
  std::vector<PlannedTable> plan;
  for (const uint32_t r : ranks)
    plan.push_back(PlannedTable{EmbeddingShardingType::kTableWise, {r}});
  return plan;
}

/// 6 tables: two of 4 M rows (2.048 GB each at dim 128, fp32, SGD), four of 20 k rows.
std::string scenario(const std::string& sharding) {
  return R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [512, 128]
  top_mlp: [64, 1]
  embeddings:
    dim: 128
    tables:
      - {count: 2, rows: 4000000, pooling: 30}
      - {count: 4, rows: 20000, pooling: 2}
)" + sharding;
}

class ShardingPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-plan-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes plan.yaml next to the scenario; `rank_of_table` is the YAML list.
  void write_plan(int64_t tables, int64_t ranks, const std::string& rank_of_table) {
    std::ofstream(dir_ / "plan.yaml") << "# from a test\ntables: " << tables << "\nranks: " << ranks
                                      << "\nrank_of_table: " << rank_of_table << "\n";
  }

  ConfigDocument document() {
    return ConfigDocument::parse_string(scenario("  sharding: plan\n  sharding_plan: plan.yaml\n"),
                                        (dir_ / "scenario.yaml").string());
  }

  DlrmConfig parse(uint32_t ranks = 2) {
    ConfigDocument doc = document();
    DlrmConfig config = parse_dlrm_config(doc.root().child("workload"), ranks);
    doc.check_all_keys_used();
    return config;
  }

  /// The ConfigError of parsing, or a failed expectation when there is none.
  ConfigError error_of(uint32_t ranks = 2) {
    try {
      parse(ranks);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "no ConfigError";
    return ConfigError("", 0, "", "");
  }

  fs::path dir_;
};

TEST_F(ShardingPlan, GoodFilePlacesEveryTableWhereItSays) {
  write_plan(6, 2, "[0, 1, 1, 0, 1, 1]");
  const DlrmConfig config = parse();
  EXPECT_EQ(config.sharding, ShardingStrategy::kPlan);
  EXPECT_EQ(config.sharding_plan, table_wise_plan({0, 1, 1, 0, 1, 1}));
  const std::vector<int64_t> capacity(2, int64_t{4} << 30);
  const TablePlacement p = shard_tables(dlrm_sharding_input(config, capacity), config.sharding);
  EXPECT_EQ(p.rank_of_table, (std::vector<uint32_t>{0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(planned_tables(p, config.tables), config.sharding_plan);
  EXPECT_EQ(p.tables_of_rank[0], (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(p.tables_of_rank[1], (std::vector<uint32_t>{1, 2, 4, 5}));
  EXPECT_EQ(p.memory_bytes[0], 2'048'000'000 + 10'240'000);
  EXPECT_EQ(p.memory_bytes[1], 2'048'000'000 + 3 * 10'240'000);
}

TEST_F(ShardingPlan, APlanReproducesTheSharderItCameFrom) {
  write_plan(6, 2, "[0, 0, 0, 0, 0, 0]");
  DlrmConfig config = parse();
  const std::vector<int64_t> capacity(2, int64_t{4} << 30);
  config.sharding = ShardingStrategy::kSizeLookupGreedy;
  const TablePlacement greedy =
      shard_tables(dlrm_sharding_input(config, capacity), config.sharding);
  config.sharding = ShardingStrategy::kPlan;
  config.sharding_plan = planned_tables(greedy, config.tables);
  const TablePlacement plan = shard_tables(dlrm_sharding_input(config, capacity), config.sharding);
  EXPECT_EQ(plan.rank_of_table, greedy.rank_of_table);
  EXPECT_EQ(plan.tables_of_rank, greedy.tables_of_rank);
  EXPECT_EQ(plan.memory_bytes, greedy.memory_bytes);
}

TEST_F(ShardingPlan, WrongTableCountNamesThePlanFileLineAndKey) {
  write_plan(5, 2, "[0, 1, 1, 0, 1]");
  const ConfigError e = error_of();
  EXPECT_EQ(e.file(), (dir_ / "plan.yaml").string());
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.tables");
  EXPECT_NE(e.message().find("the plan is for 5 tables, but the model has 6"), std::string::npos)
      << e.what();
}

TEST_F(ShardingPlan, ListOfTheWrongLengthIsAnErrorAtTheList) {
  write_plan(6, 2, "[0, 1, 1, 0, 1]");
  const ConfigError e = error_of();
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.rank_of_table");
  EXPECT_NE(e.message().find("lists 5 ranks"), std::string::npos) << e.what();
}

TEST_F(ShardingPlan, WrongRankCountIsAnError) {
  write_plan(6, 4, "[0, 1, 2, 3, 0, 1]");
  const ConfigError e = error_of(2);
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.ranks");
  EXPECT_NE(e.message().find("the plan is for 4 ranks, but the run has 2"), std::string::npos)
      << e.what();
}

TEST_F(ShardingPlan, OutOfRangeRankIsAnErrorNamingTheTable) {
  write_plan(6, 2, "[0, 1, 2, 0, 1, 1]");
  ConfigError e = error_of();
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.rank_of_table");
  EXPECT_NE(e.message().find("entry 2 (table 2) is rank 2; the run's ranks are 0-1"),
            std::string::npos)
      << e.what();
  write_plan(6, 2, "[0, 1, -1, 0, 1, 1]");
  e = error_of();
  EXPECT_NE(e.message().find("is rank -1"), std::string::npos) << e.what();
}

TEST_F(ShardingPlan, MissingKeysAndFileAreErrors) {
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 2\n";
  EXPECT_NE(error_of().message().find("rank_of_table"), std::string::npos);
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 2\nrank_of_table: [0, 0, 0, 0, 0, 0]\n"
                                    << "rank_of_tabel: []\n";
  EXPECT_NE(error_of().message().find("rank_of_tabel"), std::string::npos);
  fs::remove(dir_ / "plan.yaml");
  EXPECT_NE(std::string(error_of().what()).find("plan.yaml"), std::string::npos);
}

TEST_F(ShardingPlan, PlanNeedsAFileAndAFileNeedsPlan) {
  ConfigDocument no_file = ConfigDocument::parse_string(scenario("  sharding: plan\n"), "s.yaml");
  try {
    parse_dlrm_config(no_file.root().child("workload"), 2);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.sharding");
    EXPECT_NE(e.message().find("sharding_plan"), std::string::npos) << e.what();
  }
  ConfigDocument other = ConfigDocument::parse_string(
      scenario("  sharding: naive\n  sharding_plan: plan.yaml\n"), "s.yaml");
  try {
    parse_dlrm_config(other.root().child("workload"), 2);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.sharding_plan");
    EXPECT_NE(e.message().find("only with sharding: plan"), std::string::npos) << e.what();
  }
  // A null plan counts as absent (how `upsim shard` runs the other sharders of a plan scenario).
  ConfigDocument null_plan =
      ConfigDocument::parse_string(scenario("  sharding: naive\n  sharding_plan: ~\n"), "s.yaml");
  EXPECT_EQ(parse_dlrm_config(null_plan.root().child("workload"), 2).sharding,
            ShardingStrategy::kNaive);
}

TEST_F(ShardingPlan, PlanThatOverflowsARankIsRefusedBySharderAndWorkload) {
  // Both 2.048 GB tables on rank 0, which has 3 GiB of table memory.
  write_plan(6, 2, "[0, 0, 1, 1, 1, 1]");
  const DlrmConfig config = parse();
  const std::vector<int64_t> capacity(2, int64_t{3} << 30);
  try {
    shard_tables(dlrm_sharding_input(config, capacity), config.sharding);
    ADD_FAILURE() << "no ShardingError";
  } catch (const ShardingError& e) {
    EXPECT_NE(std::string(e.what()).find("puts 2 tables of 4096000000 bytes (4.096 GB) on rank 0, "
                                         "more than its 3221225472 byte"),
              std::string::npos)
        << e.what();
  }

  ConfigDocument doc = document();
  DlrmWorkload workload(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = 2;
  platform.device.name = "test GPU";
  platform.device.hbm_bytes = int64_t{4} << 30;
  platform.table_memory_fraction = 0.75;  // 3 GiB
  EXPECT_EQ(dlrm_table_capacity_bytes(platform), int64_t{3} << 30);
  TaskGraph graph;
  try {
    workload.build(platform, graph);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), (dir_ / "plan.yaml").string());
    EXPECT_EQ(e.line(), 4);
    EXPECT_EQ(e.key_path(), "workload.sharding_plan.rank_of_table");
    EXPECT_NE(e.message().find("rank 0"), std::string::npos) << e.what();
  }
}

TEST_F(ShardingPlan, HybridParallelRankZeroHoldsNoTableAndAPlanReproducesItsPlacement) {
  // bottom_mlp_placement: first_rank on 8 ranks: rank 0 runs the bottom MLP and holds no table.
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 8\nrank_of_table: [1, 2, 3, 4, 5, 0]\n";
  ConfigDocument bad = ConfigDocument::parse_string(
      scenario(
          "  bottom_mlp_placement: first_rank\n  sharding: plan\n  sharding_plan: plan.yaml\n"),
      (dir_ / "scenario.yaml").string());
  try {
    parse_dlrm_config(bad.root().child("workload"), 8);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.sharding_plan.rank_of_table");
    EXPECT_NE(e.message().find("entry 5 (table 5) is on rank 0, which runs the bottom MLP alone"),
              std::string::npos)
        << e.what();
  }

  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 8\nrank_of_table: [1, 1, 1, 1, 1, 1]\n";
  ConfigDocument doc = ConfigDocument::parse_string(
      scenario(
          "  bottom_mlp_placement: first_rank\n  sharding: plan\n  sharding_plan: plan.yaml\n"),
      (dir_ / "scenario.yaml").string());
  DlrmConfig config = parse_dlrm_config(doc.root().child("workload"), 8);
  EXPECT_EQ(dlrm_tableless_ranks(config, 8), 1U);
  EXPECT_EQ(dlrm_tableless_ranks(config, 4), 0U);
  const std::vector<int64_t> capacity(8, int64_t{4} << 30);
  config.sharding = ShardingStrategy::kCappedSizeGreedy;
  const TablePlacement capped = place_dlrm_tables(config, capacity);
  EXPECT_TRUE(capped.tables_of_rank[0].empty());
  EXPECT_EQ(capped.memory_bytes[0], 0);
  config.sharding = ShardingStrategy::kPlan;
  config.sharding_plan = table_wise_plan(capped.rank_of_table);
  const TablePlacement plan = place_dlrm_tables(config, capacity);
  EXPECT_EQ(plan.rank_of_table, capped.rank_of_table);
  EXPECT_EQ(plan.tables_of_rank, capped.tables_of_rank);
  EXPECT_EQ(plan.memory_bytes, capped.memory_bytes);
}

// A rank_of_table plan places table-wise tables: a table whose group states another sharding type
// takes none (the reader names the entry and the table); the sharder refuses an entry whose type
// is not its table's.
TEST_F(ShardingPlan, ARankOfTablePlanPlacesTableWiseTablesOnly) {
  write_plan(6, 2, "[0, 1, 1, 0, 1, 1]");
  std::string typed = scenario("  sharding: plan\n  sharding_plan: plan.yaml\n");
  typed.replace(typed.find("pooling: 2}"), 11, "pooling: 2, sharding_type: data_parallel}");
  ConfigDocument doc = ConfigDocument::parse_string(typed, (dir_ / "scenario.yaml").string());
  try {
    parse_dlrm_config(doc.root().child("workload"), 2);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), (dir_ / "plan.yaml").string());
    EXPECT_EQ(e.key_path(), "workload.sharding_plan.rank_of_table");
    EXPECT_NE(e.message().find("entry 2 (table 2) places a data_parallel table; a rank_of_table "
                               "plan places table-wise tables only"),
              std::string::npos)
        << e.what();
  }

  std::vector<EmbeddingTable> tables(3, EmbeddingTable{1000, 1.0});
  tables[1].sharding_type = EmbeddingShardingType::kColumnWise;
  tables[1].column_shards = 2;
  const std::vector<int64_t> capacity(2, int64_t{1} << 30);
  const std::vector<PlannedTable> plan = table_wise_plan({0, 1, 1});
  const ShardingInput in{tables, 16, EmbeddingOptimizer::kSgd, capacity, 4, plan};
  try {
    shard_tables(in, ShardingStrategy::kPlan);
    ADD_FAILURE() << "no ShardingError";
  } catch (const ShardingError& e) {
    EXPECT_NE(std::string(e.what()).find("places table 1 as table_wise, but it is column_wise"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.table(), 1U);
  }
}

// Hybrid parallel on 8 ranks with a row-wise table: rank 0 holds no table-wise table (the
// sharder's tableless_ranks) but its block of the row-wise table, as every rank does; a plan of
// the table-wise tables keeps it so, and one that names rank 0 is refused by the sharder too.
TEST_F(ShardingPlan, HybridParallelKeepsTableWiseTablesOffRankZeroButSpansRowWiseOnes) {
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 8\nrank_of_table: [1, 1, 1, 1, 1, 1]\n";
  ConfigDocument doc = ConfigDocument::parse_string(
      scenario(
          "  bottom_mlp_placement: first_rank\n  sharding: plan\n  sharding_plan: plan.yaml\n"),
      (dir_ / "scenario.yaml").string());
  DlrmConfig config = parse_dlrm_config(doc.root().child("workload"), 8);
  const std::vector<int64_t> capacity(8, int64_t{4} << 30);
  config.sharding = ShardingStrategy::kCappedSizeGreedy;
  config.sharding_plan.clear();
  config.tables[0].sharding_type = EmbeddingShardingType::kRowWise;
  const TablePlacement typed = place_dlrm_tables(config, capacity);
  EXPECT_EQ(typed.row_wise, (std::vector<uint32_t>{0}));
  EXPECT_TRUE(typed.tables_of_rank[0].empty());
  EXPECT_TRUE(typed.pieces_of_rank[0].empty());
  // 4 M rows in blocks of 500 k rows x 128 x 4 B on every rank, rank 0 included.
  EXPECT_EQ(typed.memory_bytes[0], 256'000'000);
  for (const TablePiece& piece : typed.pieces)
    EXPECT_GE(piece.rank, 1U) << piece.table;

  // With table-wise tables only, the plan reproduces the sharder's placement off rank 0.
  config.tables[0].sharding_type = EmbeddingShardingType::kTableWise;
  const TablePlacement capped = place_dlrm_tables(config, capacity);
  config.sharding = ShardingStrategy::kPlan;
  config.sharding_plan = planned_tables(capped, config.tables);
  EXPECT_EQ(place_dlrm_tables(config, capacity).pieces_of_rank, capped.pieces_of_rank);
  config.sharding_plan[3].ranks = {0};
  try {
    place_dlrm_tables(config, capacity);
    ADD_FAILURE() << "no ShardingError";
  } catch (const ShardingError& e) {
    EXPECT_NE(std::string(e.what()).find("puts table 3 on rank 0, which holds no table-wise table"),
              std::string::npos)
        << e.what();
  }
}

// Table-row-wise tables span one node: the workload takes the nodes from the platform's fabric
// (equal blocks, or an error naming the table group), warns without one (all GPUs one node).
TEST(TableRowWise, NodesComeFromThePlatformAndMustBeEqual) {
  ConfigDocument doc =
      ConfigDocument::parse_string(scenario("  sharding: size_lookup_greedy\n"), "scenario.yaml");
  // Both big tables table-row-wise.
  doc.apply_override("workload.embeddings.tables.0.sharding_type=table_row_wise");
  WorkloadPlatform platform;
  platform.gpus = 4;
  platform.device.name = "test GPU";
  platform.device.hbm_bytes = int64_t{40} << 30;
  const DlrmConfig config = parse_dlrm_config(doc.root().child("workload"), 4);
  EXPECT_EQ(dlrm_ranks_per_node(config, platform), 0U);  // no fabric: one node
  platform.node_of_gpu = {0, 0, 1, 1};
  EXPECT_EQ(dlrm_ranks_per_node(config, platform), 2U);
  platform.node_of_gpu = {0, 0, 0, 1};
  EXPECT_THROW(dlrm_ranks_per_node(config, platform), ShardingError);
  {
    DlrmWorkload workload(doc.root().child("workload"));
    TaskGraph graph;
    try {
      workload.build(platform, graph);
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), "workload.embeddings.tables");
      EXPECT_NE(e.message().find("fill nodes unevenly (3 on the first)"), std::string::npos)
          << e.what();
    }
  }
  platform.node_of_gpu = {0, 0, 1, 1};
  {
    DlrmWorkload workload(doc.root().child("workload"));
    TaskGraph graph;
    const WorkloadBuild built = workload.build(platform, graph);
    EXPECT_TRUE(built.warnings.empty());
    EXPECT_NE(built.description.back().find("2 table_row_wise (table_row_wise over 2 nodes of 2 "
                                            "GPUs)"),
              std::string::npos)
        << built.description.back();
  }
  platform.node_of_gpu.clear();
  {
    DlrmWorkload workload(doc.root().child("workload"));
    TaskGraph graph;
    const WorkloadBuild built = workload.build(platform, graph);
    ASSERT_EQ(built.warnings.size(), 1U);
    EXPECT_NE(built.warnings[0].find("without platform.topology: the 4 GPUs count as one node"),
              std::string::npos)
        << built.warnings[0];
  }
}

// The `placement` form: one {type, rank | ranks | node} per table. The plan gives each table its
// type (a table whose group leaves the type out or says auto), and reproduces the placement a
// sharder made of the same types.
TEST_F(ShardingPlan, APlacementPlanGivesEachTableItsTypeAndReproducesTheSharder) {
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 2\nplacement:\n"
                                    << "  - {type: row_wise}\n"
                                    << "  - {type: column_wise, ranks: [1, 0]}\n"
                                    << "  - {type: data_parallel}\n"
                                    << "  - {type: table_wise, rank: 1}\n"
                                    << "  - {type: table_row_wise, node: 0}\n"
                                    << "  - {type: table_wise, rank: 0}\n";
  DlrmConfig config = parse();
  EXPECT_EQ(config.tables[0].sharding_type, EmbeddingShardingType::kRowWise);
  EXPECT_EQ(config.tables[1].sharding_type, EmbeddingShardingType::kColumnWise);
  EXPECT_EQ(config.tables[1].column_shards, 2);
  EXPECT_EQ(config.tables[2].sharding_type, EmbeddingShardingType::kDataParallel);
  EXPECT_EQ(config.tables[4].sharding_type, EmbeddingShardingType::kTableRowWise);
  const std::vector<int64_t> capacity(2, int64_t{4} << 30);
  const TablePlacement p = place_dlrm_tables(config, capacity);
  EXPECT_EQ(p.row_wise, (std::vector<uint32_t>{0}));
  EXPECT_EQ(p.data_parallel, (std::vector<uint32_t>{2}));
  EXPECT_EQ(p.table_row_wise, (std::vector<uint32_t>{4}));
  EXPECT_EQ(p.rank_of_table[3], 1U);
  EXPECT_EQ(p.rank_of_table[5], 0U);
  // Column shard 0 on rank 1, shard 1 on rank 0, as listed.
  EXPECT_EQ(p.tables_of_rank[0], (std::vector<uint32_t>{1, 5}));
  EXPECT_EQ(p.tables_of_rank[1], (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(planned_tables(p, config.tables), config.sharding_plan);

  // A sharder's placement of the same types, written as a plan, is placed the same.
  for (const ShardingStrategy strategy :
       {ShardingStrategy::kSizeLookupGreedy, ShardingStrategy::kNaive, ShardingStrategy::kRandom}) {
    DlrmConfig sharded = config;
    sharded.sharding = strategy;
    sharded.sharding_plan.clear();
    const TablePlacement by_sharder = place_dlrm_tables(sharded, capacity);
    sharded.sharding = ShardingStrategy::kPlan;
    sharded.sharding_plan = planned_tables(by_sharder, sharded.tables);
    const TablePlacement by_plan = place_dlrm_tables(sharded, capacity);
    EXPECT_EQ(by_plan.pieces_of_rank, by_sharder.pieces_of_rank);
    EXPECT_EQ(by_plan.node_of_table, by_sharder.node_of_table);
    EXPECT_EQ(by_plan.memory_bytes, by_sharder.memory_bytes);
  }
}

TEST_F(ShardingPlan, APlacementPlanKeepsAStatedTypeAndRefusesKeysItsTypeHasNoUseFor) {
  const auto placement_error = [&](const std::string& scenario_text, const std::string& entries) {
    std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 2\nplacement:\n" << entries;
    ConfigDocument doc =
        ConfigDocument::parse_string(scenario_text, (dir_ / "scenario.yaml").string());
    try {
      parse_dlrm_config(doc.root().child("workload"), 2);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "no ConfigError for " << entries;
    return ConfigError("", 0, "", "");
  };
  const std::string rest =
      "  - {type: table_wise, rank: 0}\n  - {type: table_wise, rank: 0}\n"
      "  - {type: table_wise, rank: 0}\n  - {type: table_wise, rank: 0}\n"
      "  - {type: table_wise, rank: 1}\n";
  const std::string plan_scenario = scenario("  sharding: plan\n  sharding_plan: plan.yaml\n");
  // A group that states row_wise keeps it.
  std::string stated = plan_scenario;
  stated.replace(stated.find("pooling: 30}"), 12, "pooling: 30, sharding_type: row_wise}");
  ConfigError e = placement_error(stated, "  - {type: table_wise, rank: 0}\n" + rest);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0].type");
  EXPECT_NE(e.message().find("states sharding_type: row_wise, which a plan keeps"),
            std::string::npos)
      << e.what();
  // ... while `auto` lets the plan choose.
  std::string open = plan_scenario;
  open.replace(open.find("pooling: 30}"), 12, "pooling: 30, sharding_type: auto}");
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 2\nplacement:\n"
                                    << "  - {type: row_wise}\n"
                                    << rest;
  {
    ConfigDocument doc = ConfigDocument::parse_string(open, (dir_ / "scenario.yaml").string());
    const DlrmConfig config = parse_dlrm_config(doc.root().child("workload"), 2);
    EXPECT_EQ(config.tables[0].sharding_type, EmbeddingShardingType::kRowWise);
    EXPECT_FALSE(config.tables[0].auto_sharding_type);
  }
  e = placement_error(plan_scenario, "  - {type: row_wise, rank: 1}\n" + rest);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0].rank");
  EXPECT_NE(e.message().find("table 0 is row_wise: it spans every rank"), std::string::npos)
      << e.what();
  e = placement_error(plan_scenario, "  - {type: table_wise, ranks: [1]}\n" + rest);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0].ranks");
  e = placement_error(plan_scenario, "  - {type: column_wise, ranks: [0, 1, 1]}\n" + rest);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0].ranks");
  EXPECT_NE(e.message().find("3 column shards (one rank each) do not divide embeddings.dim = 128"),
            std::string::npos)
      << e.what();
  e = placement_error(plan_scenario, "  - {type: column_wise, ranks: [0, 2]}\n" + rest);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0].ranks[1]");
  e = placement_error(plan_scenario, "  - {type: table_wise, rank: 0}\n");
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement");
  EXPECT_NE(e.message().find("the model has 6 tables, the list 1"), std::string::npos) << e.what();
  e = placement_error(plan_scenario, "  - {type: diagonal}\n" + rest);
  EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0].type");
  // Both forms, or neither.
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 2\nrank_of_table: [0, 0, 0, 0, 0, 0]\n"
                                    << "placement: []\n";
  EXPECT_NE(error_of().message().find("not both"), std::string::npos);
}

// A table-row-wise entry's node must exist on the platform (the sharder knows the nodes), and the
// workload's error names the plan's entry.
TEST_F(ShardingPlan, ATableRowWiseEntryNeedsANodeOfThePlatform) {
  std::ofstream(dir_ / "plan.yaml") << "tables: 6\nranks: 4\nplacement:\n"
                                    << "  - {type: table_row_wise, node: 2}\n"
                                    << "  - {type: table_wise, rank: 0}\n"
                                    << "  - {type: table_wise, rank: 1}\n"
                                    << "  - {type: table_wise, rank: 2}\n"
                                    << "  - {type: table_wise, rank: 3}\n"
                                    << "  - {type: table_wise, rank: 3}\n";
  ConfigDocument doc = document();
  DlrmWorkload workload(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = 4;
  platform.device.name = "test GPU";
  platform.device.hbm_bytes = int64_t{40} << 30;
  platform.node_of_gpu = {0, 0, 1, 1};
  TaskGraph graph;
  try {
    workload.build(platform, graph);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.sharding_plan.placement[0]");
    EXPECT_NE(e.message().find("on node 2, but the run has 2 nodes (0-1)"), std::string::npos)
        << e.what();
  }
}

TEST(PlanSharder, RefusesAPlanOfTheWrongLengthOrAnUnknownRank) {
  const std::vector<EmbeddingTable> tables(3, EmbeddingTable{1000, 1.0});
  const std::vector<int64_t> capacity(2, int64_t{1} << 30);
  std::vector<PlannedTable> plan = table_wise_plan({0, 1});
  ShardingInput in{tables, 16, EmbeddingOptimizer::kSgd, capacity, 4, plan};
  EXPECT_THROW(shard_tables(in, ShardingStrategy::kPlan), ShardingError);
  plan = table_wise_plan({0, 1, 2});
  in.plan = plan;
  EXPECT_THROW(shard_tables(in, ShardingStrategy::kPlan), ShardingError);
  plan = table_wise_plan({1, 1, 0});
  plan[0].ranks.push_back(0);  // two ranks for a table-wise table
  in.plan = plan;
  EXPECT_THROW(shard_tables(in, ShardingStrategy::kPlan), ShardingError);
  plan = table_wise_plan({1, 1, 0});
  in.plan = plan;
  EXPECT_EQ(shard_tables(in, ShardingStrategy::kPlan).tables_of_rank[1],
            (std::vector<uint32_t>{0, 1}));
}

TEST(PlanSharder, EveryStrategyHasANameTheConfigAccepts) {
  std::vector<std::string> names;
  for (const ShardingStrategy s : sharding_strategies())
    names.emplace_back(sharding_strategy_name(s));
  EXPECT_EQ(names, (std::vector<std::string>{"naive", "naive_chunk", "random", "size_greedy",
                                             "lookup_greedy", "norm_lookup_greedy",
                                             "size_lookup_greedy", "capped_size_greedy", "plan"}));
}

}  // namespace
}  // namespace upsim

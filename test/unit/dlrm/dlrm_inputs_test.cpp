// DLRM inputs: a table that fits no rank is named where it is written (the group in the scenario
// or in its tables_file), with its bytes and the key that sets a GPU's table memory; the table
// statistics have documented ranges (dlrm_config.h), in every tables_file format.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/task_graph.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_workload.h"

namespace upsim {
namespace {

namespace fs = std::filesystem;

/// A 2-rank DLRM whose `embeddings:` section continues with `tables` (indented by four).
std::string scenario(const std::string& tables) {
  return R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [512, 128]
  top_mlp: [64, 1]
  embeddings:
    dim: 128
)" + tables;
}

class DlrmInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-dlrm-inputs-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  ConfigDocument document(const std::string& tables) {
    return ConfigDocument::parse_string(scenario(tables), (dir_ / "scenario.yaml").string());
  }
  /// The ConfigError of parsing the scenario for 2 ranks.
  ConfigError parse_error(const std::string& tables) {
    ConfigDocument doc = document(tables);
    try {
      parse_dlrm_config(doc.root().child("workload"), 2);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "no ConfigError for\n" << tables;
    return ConfigError("", 0, "", "");
  }
  /// The ConfigError of building the scenario on 2 GPUs of 4 GiB, 3 GiB of it table memory.
  ConfigError build_error(const std::string& tables) {
    ConfigDocument doc = document(tables);
    DlrmWorkload workload(doc.root().child("workload"));
    WorkloadPlatform platform;
    platform.gpus = 2;
    platform.device.name = "test GPU";
    platform.device.hbm_bytes = int64_t{4} << 30;
    platform.table_memory_fraction = 0.75;
    TaskGraph graph;
    try {
      workload.build(platform, graph);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "no ConfigError for\n" << tables;
    return ConfigError("", 0, "", "");
  }

  fs::path dir_;
};

/// What every "fits no rank" message says: the table, its bytes (40 M rows x 128 x 4 B), the
/// rank's table memory and the key that sets it.
void expect_names_table_bytes_and_memory_key(const ConfigError& e) {
  const std::string m = e.message();
  EXPECT_NE(m.find("table 2 (40000000 rows x dim 128: 20480000000 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("fits on no rank"), std::string::npos) << m;
  EXPECT_NE(m.find("platform.table_memory_fraction = 0.75 of test GPU's 4294967296 bytes "
                   "(3221225472 bytes)"),
            std::string::npos)
      << m;
}

TEST_F(DlrmInputs, ATablesFileTableThatFitsNoRankIsNamedInTheFile) {
  write("tables.yaml",
        "# two small groups and one too big for a rank\ntables:\n"
        "  - {count: 2, rows: 20000, pooling: 2}\n  - {rows: 40000000, pooling: 30}\n");
  const ConfigError e = build_error("    tables_file: tables.yaml\n");
  EXPECT_EQ(e.file(), (dir_ / "tables.yaml").string());
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.key_path(), "workload.embeddings.tables_file.tables[1]");
  expect_names_table_bytes_and_memory_key(e);
}

TEST_F(DlrmInputs, ACsvTablesFileTableThatFitsNoRankIsNamedAtItsLine) {
  write("tables.csv", "count,rows,pooling\n2,20000,2\n1,40000000,30\n");
  const ConfigError e = build_error("    tables_file: tables.csv\n");
  EXPECT_EQ(e.file(), (dir_ / "tables.csv").string());
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.key_path(), "workload.embeddings.tables_file[1]");
  expect_names_table_bytes_and_memory_key(e);
}

TEST_F(DlrmInputs, AnInlineTableThatFitsNoRankIsNamedAtItsGroup) {
  const ConfigError e = build_error(
      "    tables:\n      - {count: 2, rows: 20000, pooling: 2}\n"
      "      - {rows: 40000000, pooling: 30}\n");
  EXPECT_EQ(e.file(), (dir_ / "scenario.yaml").string());
  EXPECT_EQ(e.line(), 10);
  EXPECT_EQ(e.key_path(), "workload.embeddings.tables[1]");
  expect_names_table_bytes_and_memory_key(e);
}

TEST_F(DlrmInputs, ARowWiseTableThatFitsNoRankIsNamedAtItsGroup) {
  // 400 M rows row-wise: 102.4 GB per rank of 3 GiB.
  const ConfigError e = build_error(
      "    tables:\n      - {count: 2, rows: 20000, pooling: 2}\n"
      "      - {rows: 400000000, pooling: 30, sharding_type: row_wise}\n");
  EXPECT_EQ(e.key_path(), "workload.embeddings.tables[1]");
  EXPECT_NE(e.message().find("table 2 (row_wise"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("platform.table_memory_fraction"), std::string::npos) << e.what();
}

TEST_F(DlrmInputs, PoolingHasADocumentedRangeInEveryFormat) {
  const ConfigError inline_error =
      parse_error("    tables:\n      - {rows: 1000, pooling: 1e300}\n");
  EXPECT_EQ(inline_error.key_path(), "workload.embeddings.tables[0].pooling");
  EXPECT_EQ(inline_error.message(), "must be between 0 and 1e+06, got 1e+300");
  EXPECT_EQ(parse_error("    tables:\n      - {rows: 1000, pooling: .inf}\n").message(),
            "must be between 0 and 1e+06, got inf");
  EXPECT_EQ(parse_error("    tables:\n      - {rows: 1000, pooling: .nan}\n").message(),
            "must be between 0 and 1e+06, got nan");

  write("tables.csv", "rows,pooling\n1000,2\n1000,1e300\n");
  const ConfigError csv = parse_error("    tables_file: tables.csv\n");
  EXPECT_EQ(csv.file(), (dir_ / "tables.csv").string());
  EXPECT_EQ(csv.line(), 3);
  EXPECT_EQ(csv.key_path(), "workload.embeddings.tables_file[1].pooling");
  EXPECT_EQ(csv.message(), "must be between 0 and 1e+06, got 1e+300");

  write("tables.json",
        "{\"tables\": [{\"num_embeddings\": 1000, \"embedding_dim\": 128, "
        "\"pooling_factor\": 1e300}]}\n");
  const ConfigError json = parse_error("    tables_file: tables.json\n");
  EXPECT_EQ(json.key_path(), "workload.embeddings.tables_file.tables[0].pooling_factor");
  EXPECT_EQ(json.message(), "must be between 0 and 1e+06, got 1e+300");

  write("tables.yaml", "tables:\n  - {rows: 1000, pooling: 2, pooling_std: 1e300}\n");
  EXPECT_EQ(parse_error("    tables_file: tables.yaml\n").key_path(),
            "workload.embeddings.tables_file.tables[0].pooling_std");
}

TEST_F(DlrmInputs, TheOtherTableStatisticsHaveDocumentedRanges) {
  const auto message = [&](const std::string& group) {
    const ConfigError e = parse_error("    tables:\n      - " + group + "\n");
    return e.key_path() + ": " + e.message();
  };
  EXPECT_EQ(message("{rows: 0, pooling: 2}"),
            "workload.embeddings.tables[0].rows: must be between 1 and 1099511627776, got 0");
  EXPECT_EQ(message("{count: 0, rows: 10, pooling: 2}"),
            "workload.embeddings.tables[0].count: must be between 1 and 65536, got 0");
  EXPECT_EQ(message("{count: 65537, rows: 10, pooling: 2}"),
            "workload.embeddings.tables[0].count: must be between 1 and 65536, got 65537");
  EXPECT_EQ(message("{rows: 10, pooling: 2, access: zipf, zipf_alpha: 20}"),
            "workload.embeddings.tables[0].zipf_alpha: must be between 0.01 and 10, got 20");
  EXPECT_EQ(message("{rows: 10, pooling: 2, reuse: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
                    "0, 0, 2]}"),
            "workload.embeddings.tables[0].reuse[16]: must be between 0 and 1, got 2");
  EXPECT_EQ(message("{rows: 10, pooling: 2, bin_0: 1, bin_3: -0.5}"),
            "workload.embeddings.tables[0].bin_3: must be between 0 and 1, got -0.5");
  EXPECT_EQ(message("{rows: 10, pooling: 2, sharding_type: column_wise, column_shards: 0}"),
            "workload.embeddings.tables[0].column_shards: must be between 1 and 65536, got 0");
  // The seed's keys: the data set's table index (recorded) and the rows of its histograms.
  EXPECT_EQ(message("{index: -1, num_embeddings: 10, pooling_factor: 2}"),
            "workload.embeddings.tables[0].index: must be between 0 and 2147483647, got -1");
  EXPECT_EQ(message("{num_embeddings: 0, pooling_factor: 2}"),
            "workload.embeddings.tables[0].num_embeddings: must be between 1 and 1099511627776, "
            "got 0");
  EXPECT_EQ(message("{num_embeddings: 10, pooling_factor: 2, rfs_4096: [1, 0, 0, 0, 0, 0, 0, 0, "
                    "0, 0, 0, 0, 0, 0, 0, 0, -1]}"),
            "workload.embeddings.tables[0].rfs_4096[16]: must be between 0 and 1, got -1");
  EXPECT_EQ(message("{num_embeddings: 10, embedding_dim: 0, pooling_factor: 2}"),
            "workload.embeddings.tables[0].embedding_dim: must be between 1 and 65536, got 0");
}

TEST_F(DlrmInputs, TheLookupsOfAnIterationAreBounded) {
  // Every value within its range; 2^31 samples x 65536 tables x 10^6 indices x 4 B x dim 128 is
  // far over 2^62 bytes of gathered rows.
  ConfigDocument doc = ConfigDocument::parse_string(
      R"(workload:
  model: dlrm
  global_batch: 2147483648
  bottom_mlp: [512, 128]
  top_mlp: [64, 1]
  embeddings:
    dim: 128
    tables:
      - {count: 1000, rows: 1000, pooling: 1000000}
)",
      (dir_ / "scenario.yaml").string());
  try {
    parse_dlrm_config(doc.root().child("workload"), 2);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.global_batch");
    EXPECT_NE(e.message().find("lookups"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("2^62"), std::string::npos) << e.what();
  }
}

TEST_F(DlrmInputs, ANullTablesKeyLeavesTheTablesToATablesFile) {
  // `--set workload.embeddings.tables=null --set workload.embeddings.tables_file=...` switches a
  // scenario with inline tables to a file (null counts as absent, as for sharding_plan).
  write("tables.yaml", "tables:\n  - {count: 3, rows: 1000, pooling: 2}\n");
  ConfigDocument doc = document("    tables:\n      - {rows: 10, pooling: 1}\n");
  doc.apply_override("workload.embeddings.tables=null");
  doc.apply_override("workload.embeddings.tables_file=" + (dir_ / "tables.yaml").string());
  EXPECT_EQ(parse_dlrm_config(doc.root().child("workload"), 2).tables.size(), 3U);
}

}  // namespace
}  // namespace upsim

#include "workloads/dlrm/table_statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"
#include "workloads/dlrm/dlrm_config.h"

namespace upsim {
namespace {

double sum(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}

TEST(TableStatistics, ReuseBinsAreThePowersOfTwo) {
  EXPECT_EQ(reuse_bin(1.0), 0U);
  EXPECT_EQ(reuse_bin(1.5), 1U);
  EXPECT_EQ(reuse_bin(2.0), 1U);
  EXPECT_EQ(reuse_bin(3.0), 2U);
  EXPECT_EQ(reuse_bin(4.0), 2U);
  EXPECT_EQ(reuse_bin(32768.0), 15U);
  EXPECT_EQ(reuse_bin(1e9), 16U);
}

// Uniform accesses (alpha 0): every row's count is Poisson(n / E). n = 10^4 lookups of 10^6 rows:
// nearly every distinct row is touched once (bin 0); of 10^3 rows (mean 10): bins 3 ((4, 8]) and
// 4 ((8, 16]) hold most of them.
TEST(TableStatistics, UniformAccessesFollowThePoissonCountOfEveryRow) {
  const std::vector<double> sparse = zipf_reuse_histogram(1'000'000, 1e4, 0.0);
  EXPECT_NEAR(sparse[0], 1.0, 0.01);
  EXPECT_NEAR(sum(sparse), 1.0, 1e-9);
  const std::vector<double> dense = zipf_reuse_histogram(1'000, 1e4, 0.0);
  EXPECT_NEAR(sum(dense), 1.0, 1e-9);
  EXPECT_GT(dense[3] + dense[4], 0.8);
  // A very hot uniform table (mean 10^4 per row): the normal approximation, bin 14 ((8192,
  // 16384]).
  EXPECT_NEAR(zipf_reuse_histogram(100, 1e6, 0.0)[14], 1.0, 1e-6);
}

// Skewed accesses spread the distinct rows over the bins, the hottest rows in high ones, and
// cost a few hundred terms whatever the table's size (2^40 rows).
TEST(TableStatistics, ZipfAccessesReachHighBinsAndScaleToHugeTables) {
  const std::vector<double> h = zipf_reuse_histogram(10'000'000, 65536.0 * 20, 1.05);
  EXPECT_NEAR(sum(h), 1.0, 1e-9);
  EXPECT_GT(h[0], 0.5);   // most distinct rows are touched once
  EXPECT_GT(h[10], 0.0);  // the head is touched over 512 times
  const std::vector<double> huge = zipf_reuse_histogram(int64_t{1} << 40, 1e6, 1.2);
  EXPECT_NEAR(sum(huge), 1.0, 1e-9);
  for (double v : huge)
    EXPECT_TRUE(std::isfinite(v));
  EXPECT_THROW(zipf_reuse_histogram(0, 1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(zipf_reuse_histogram(10, 1.0, -1.0), std::invalid_argument);
}

std::string scenario(const std::string& embeddings) {
  return R"(workload:
  model: dlrm
  global_batch: 512
  bottom_mlp: [13, 8]
  top_mlp: [4, 1]
  embeddings:
    dim: 8
)" + embeddings;
}

DlrmConfig parse(const std::string& yaml, const std::string& file = "scenario.yaml") {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, file);
  DlrmConfig c = parse_dlrm_config(doc.root().child("workload"), 1);
  doc.check_all_keys_used();
  return c;
}

std::string error_of(const std::string& yaml, const std::string& file = "scenario.yaml") {
  try {
    parse(yaml, file);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kHistogram = "[0.5, 0.25, 0.25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]";

TEST(TableStatistics, InlineHistogramsAndZipfTables) {
  const DlrmConfig c = parse(scenario(
      "    tables:\n      - {rows: 100, pooling: 2, pooling_std: 0.5, reuse: " + kHistogram +
      "}\n      - {count: 2, rows: 1000, pooling: 3, access: zipf, zipf_alpha: 1.1}\n"));
  ASSERT_EQ(c.tables.size(), 3U);
  EXPECT_EQ(c.tables[0].reuse_histogram.size(), kReuseHistogramBins);
  EXPECT_DOUBLE_EQ(c.tables[0].reuse_histogram[1], 0.25);
  EXPECT_DOUBLE_EQ(c.tables[0].pooling_std, 0.5);
  EXPECT_DOUBLE_EQ(c.tables[2].zipf_alpha, 1.1);
  EXPECT_NE(error_of(scenario("    tables:\n      - {rows: 100, pooling: 2, reuse: [0.5, 0.5]}\n"))
                .find("a reuse histogram has 17 bins, got 2"),
            std::string::npos);
  EXPECT_NE(error_of(scenario("    tables:\n      - {rows: 100, pooling: 2, reuse: "
                              "[0.5, 0.25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}\n"))
                .find("must sum to 1"),
            std::string::npos);
}

// The seed's table configs ({"tables": [{index, num_embeddings, embedding_dim, pooling_factor,
// pooling_factor_std, bin_0..bin_16, rfs_<B>, all_zero}]}) load as a tables_file; the histogram
// is rfs_<global batch> when present.
TEST(TableStatistics, TheSeedsTableConfigsLoadFromATablesFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("upsim-tables-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string bins;
  for (int b = 0; b < 17; ++b)
    bins += ", \"bin_" + std::to_string(b) + "\": " + (b == 0 ? "1.0" : "0.0");
  const std::string rfs512 = "[0.25, 0.75, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]";
  std::ofstream(dir / "tables.json")
      << "{\"tables\": [{\"index\": 3, \"num_embeddings\": 5000, \"embedding_dim\": 8, "
         "\"pooling_factor\": 21.5, \"pooling_factor_std\": 4.0"
      << bins << ", \"rfs_512\": " << rfs512 << ", \"rfs_1024\": " << kHistogram
      << ", \"all_zero\": false}]}\n";
  const std::string yaml = scenario("    tables_file: tables.json\n");
  const DlrmConfig c = parse(yaml, (dir / "scenario.yaml").string());
  ASSERT_EQ(c.tables.size(), 1U);
  EXPECT_EQ(c.tables[0].rows, 5000);
  EXPECT_DOUBLE_EQ(c.tables[0].pooling, 21.5);
  EXPECT_DOUBLE_EQ(c.tables[0].pooling_std, 4.0);
  EXPECT_DOUBLE_EQ(c.tables[0].reuse_histogram[1], 0.75);  // rfs_512 for a batch of 512
  std::ofstream(dir / "bad.json") << "{\"tables\": [{\"num_embeddings\": 5, \"embedding_dim\": "
                                     "16, \"pooling_factor\": 1}]}\n";
  EXPECT_NE(error_of(scenario("    tables_file: bad.json\n"), (dir / "scenario.yaml").string())
                .find("embedding_dim: is 16, but the model's embeddings.dim is 8"),
            std::string::npos);
  std::ofstream(dir / "zero.json")
      << "{\"tables\": [{\"num_embeddings\": 5, \"pooling_factor\": 0, \"all_zero\": true}]}\n";
  EXPECT_NE(error_of(scenario("    tables_file: zero.json\n"), (dir / "scenario.yaml").string())
                .find("all_zero: an all-zero table has no lookups"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// Table statistics as CSV: one group per line, either format's keys, the histogram as
// bin_0 .. bin_16 columns; errors name the CSV's line.
TEST(TableStatistics, CsvTablesFileGivesOneGroupPerLine) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("upsim-csv-tables-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string header = "count,rows,pooling,pooling_std,sharding_type";
  std::string bins;
  for (int b = 0; b < 17; ++b) {
    header += ",bin_" + std::to_string(b);
    bins += b == 0 ? ",0.5" : b == 1 ? ",0.5" : ",0";
  }
  std::ofstream(dir / "tables.csv") << "# measured on one batch of 512\n"
                                    << header << "\n2,1000,3.5,1.25,row_wise" << bins
                                    << "\n1,40,1,,data_parallel" << std::string(17, ',') << "\n";
  const DlrmConfig c =
      parse(scenario("    tables_file: tables.csv\n"), (dir / "scenario.yaml").string());
  ASSERT_EQ(c.tables.size(), 3U);
  EXPECT_EQ(c.tables[0].rows, 1000);
  EXPECT_DOUBLE_EQ(c.tables[1].pooling, 3.5);
  EXPECT_DOUBLE_EQ(c.tables[1].pooling_std, 1.25);
  EXPECT_EQ(c.tables[1].sharding_type, EmbeddingShardingType::kRowWise);
  ASSERT_EQ(c.tables[1].reuse_histogram.size(), kReuseHistogramBins);
  EXPECT_DOUBLE_EQ(c.tables[1].reuse_histogram[1], 0.5);
  EXPECT_TRUE(c.tables[2].reuse_histogram.empty());
  EXPECT_EQ(c.tables[2].sharding_type, EmbeddingShardingType::kDataParallel);
  // The seed's keys in CSV.
  std::ofstream(dir / "seed.csv") << "index,num_embeddings,embedding_dim,pooling_factor\n"
                                     "0,5000,8,21.5\n1,70,8,1\n";
  const DlrmConfig seed =
      parse(scenario("    tables_file: seed.csv\n"), (dir / "scenario.yaml").string());
  ASSERT_EQ(seed.tables.size(), 2U);
  EXPECT_DOUBLE_EQ(seed.tables[0].pooling, 21.5);
  // A bad value names the CSV line and the column.
  std::ofstream(dir / "bad.csv") << "rows,pooling\n100,2\n100,-1\n";
  const std::string bad =
      error_of(scenario("    tables_file: bad.csv\n"), (dir / "scenario.yaml").string());
  EXPECT_NE(bad.find("bad.csv:3"), std::string::npos) << bad;
  EXPECT_NE(bad.find("pooling"), std::string::npos) << bad;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace upsim

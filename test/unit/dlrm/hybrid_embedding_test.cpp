// The hybrid sharding type (HugeCTR's hybrid embedding): the frequency split by HugeCTR's count
// threshold, its keys, and what a run of it exchanges: fewer row-wise partial sums than
// row-wise (only samples with an infrequent lookup), the frequent rows' dense gradient
// all-reduced, each rank holding the frequent replica and its row block.
#include "workloads/dlrm/hybrid_embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/task_graph.h"
#include "test/unit/dlrm/dlrm_test_support.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/table_statistics.h"

namespace upsim {
namespace {

TEST(HybridSplit, HugeCtrsSingleNodeThresholdSplitsAZipfTableByItsMass) {
  // batch x sqrt(2 x 0.01 / (M (M - 1))), M = 65536 / 8 = 8192.
  const double threshold = hybrid_count_threshold(65536, 8);
  EXPECT_NEAR(threshold, 65536 * std::sqrt(0.02 / (8192.0 * 8191.0)), 1e-12);
  EXPECT_TRUE(std::isinf(hybrid_count_threshold(8, 8)));  // one sample per GPU: nothing to save

  EmbeddingTable zipf{1'000'000, 1.0};
  zipf.zipf_alpha = 1.1;
  const HybridSplit split = *hybrid_split(zipf, 65536, 8);
  // Rank k is frequent when 65536 k^-1.1 / H >= threshold; rounded up to a multiple of 8.
  const double mass = zipf_mass(1.0, 1e6, 1.1);
  const double last = std::floor(std::pow(65536.0 / (threshold * mass), 1.0 / 1.1));
  EXPECT_EQ(split.frequent_rows, static_cast<int64_t>(std::ceil(last / 8.0) * 8.0));
  EXPECT_EQ(split.frequent_rows % 8, 0);
  EXPECT_NEAR(split.frequent_share,
              zipf_mass(1.0, static_cast<double>(split.frequent_rows), 1.1) / mass, 1e-12);
  EXPECT_GT(split.frequent_share, 0.7);
  // More skew, more of the lookups on fewer rows.
  EmbeddingTable skewed = zipf;
  skewed.zipf_alpha = 1.5;
  EXPECT_GT(hybrid_split(skewed, 65536, 8)->frequent_share, split.frequent_share);

  // Uniform accesses: every row as hot as any other, all frequent or none.
  EXPECT_EQ(hybrid_split(EmbeddingTable{1000, 1.0}, 65536, 8)->frequent_rows, 1000);
  EXPECT_EQ(hybrid_split(EmbeddingTable{10'000'000, 1.0}, 65536, 8)->frequent_rows, 0);
  // A measured histogram does not say which rows are hot.
  EmbeddingTable measured{1000, 1.0};
  measured.reuse_histogram = {1.0};
  EXPECT_FALSE(hybrid_split(measured, 65536, 8));
}

TEST(HybridSplit, OnlySamplesWithAnInfrequentLookupCrossTheNetwork) {
  EmbeddingTable t{1000, 1.0};
  t.frequent_rows = 100;
  t.frequent_share = 0.9;
  EXPECT_NEAR(infrequent_sample_share(t), 0.1, 1e-12);
  t.pooling = 30.0;  // almost every bag of 30 has an infrequent index
  EXPECT_NEAR(infrequent_sample_share(t), 1.0 - std::pow(0.9, 30.0), 1e-12);
  t.frequent_rows = 1000;
  EXPECT_EQ(infrequent_sample_share(t), 0.0);
}

/// Two ranks, one skewed one-hot table of 1 M rows (the hybrid's case) and two small ones.
std::string scenario(const std::string& big) {
  return R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [16, 8]
  top_mlp: [16, 1]
  embeddings:
    dim: 8
    tables:
      - {rows: 1000000, pooling: 1, access: zipf, zipf_alpha: 1.2)" +
         big + R"(}
      - {count: 2, rows: 1000, pooling: 1}
)";
}

DlrmConfig parse(const std::string& yaml, uint32_t ranks = 2) {
  return dlrm_test::config_of(yaml, ranks);
}

std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(HybridTables, KeysAreStatedTogetherOrDerivedAndOnlyForHybrid) {
  const DlrmConfig derived = parse(scenario(", sharding_type: hybrid"));
  const HybridSplit expected = *hybrid_split(derived.tables[0], 4096, 2);
  EXPECT_EQ(derived.tables[0].frequent_rows, expected.frequent_rows);
  EXPECT_GT(derived.tables[0].frequent_rows, 0);
  const DlrmConfig stated =
      parse(scenario(", sharding_type: hybrid, frequent_rows: 500, frequent_share: 0.4"));
  EXPECT_EQ(stated.tables[0].frequent_rows, 500);
  EXPECT_DOUBLE_EQ(stated.tables[0].frequent_share, 0.4);
  EXPECT_NE(error_of(scenario(", sharding_type: hybrid, frequent_rows: 500"))
                .find("give frequent_rows and frequent_share together"),
            std::string::npos);
  EXPECT_NE(error_of(scenario(", frequent_rows: 500, frequent_share: 0.4"))
                .find("frequent_rows: applies to hybrid tables only"),
            std::string::npos);
  EXPECT_NE(
      error_of(scenario(", sharding_type: hybrid, frequent_rows: 2000000, frequent_share: 0.4"))
          .find("frequent_rows"),
      std::string::npos);
}

struct Exchanged {
  int64_t reduce_scatter = 0;
  int64_t all_reduce = 0;
};

Exchanged exchanged(const std::string& yaml) {
  const DlrmConfig config = parse(yaml);
  TaskGraph g;
  generate_dlrm(config, dlrm_test::inputs_of(2, 1, int64_t{40} << 30), g);
  Exchanged out;
  for (CollectiveId c = 0; c < g.collective_count(); ++c) {
    const CollectiveDesc& d = g.collective(c);
    if (d.kind == CollectiveKind::kReduceScatter) out.reduce_scatter += d.bytes;
    if (d.kind == CollectiveKind::kAllReduce && d.bytes > 4096) out.all_reduce += d.bytes;
  }
  return out;
}

TEST(HybridTables, ExchangeOnlyInfrequentSamplesAndAllReduceTheFrequentRows) {
  const Exchanged row_wise = exchanged(scenario(", sharding_type: row_wise"));
  const Exchanged hybrid =
      exchanged(scenario(", sharding_type: hybrid, frequent_rows: 1000, frequent_share: 0.75"));
  // Row-wise: 4096 samples x 8 values x 4 B; hybrid: the quarter with an infrequent lookup.
  EXPECT_EQ(row_wise.reduce_scatter, 4096 * 8 * 4);
  EXPECT_EQ(hybrid.reduce_scatter, 4096 * 8 * 4 / 4);
  // The frequent rows' dense gradient (1000 x 8 fp32) is all-reduced; row-wise has none.
  EXPECT_EQ(row_wise.all_reduce, 0);
  EXPECT_EQ(hybrid.all_reduce, 1000 * 8 * 4);

  // Each rank holds the frequent replica (weights and dense gradient, SGD: no state) and its
  // block of the other 999,000 rows.
  DlrmConfig config =
      parse(scenario(", sharding_type: hybrid, frequent_rows: 1000, frequent_share: 0.75"));
  const std::vector<int64_t> capacity(2, int64_t{40} << 30);
  const TablePlacement placement = place_dlrm_tables(config, capacity);
  EXPECT_EQ(placement.hybrid, (std::vector<uint32_t>{0}));
  const int64_t replica = 1000 * 8 * 2 * 4;
  const int64_t block = 499'500 * 8 * 4;
  const int64_t small_tables = 2 * 1000 * 8 * 4;
  EXPECT_EQ(placement.memory_bytes[0] + placement.memory_bytes[1],
            2 * (replica + block) + small_tables);
}

}  // namespace
}  // namespace upsim

#include "workloads/dlrm/sharders.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace upsim {
namespace {

using Tables = std::vector<uint32_t>;

TablePlacement shard(const std::vector<EmbeddingTable>& tables, int64_t dim,
                     const std::vector<int64_t>& capacity, ShardingStrategy strategy,
                     uint64_t seed = 0) {
  return shard_tables(ShardingInput{tables, dim, EmbeddingOptimizer::kSgd, capacity}, strategy,
                      seed);
}

// Six tables, dim 4, for size_lookup_greedy (cost = 4 x L x log10(rows)):
//   t0 (1000, 10) -> 120, t1 (100, 20) -> 160, t2 (10, 50) -> 200,
//   t3 (1000, 5) -> 60, t4 (100000, 2) -> 40, t5 (10000, 3) -> 48.
// Bytes = rows x 4 x 4: 16000, 1600, 160, 16000, 1600000, 160000.
std::vector<EmbeddingTable> six_tables() {
  return {{1000, 10}, {100, 20}, {10, 50}, {1000, 5}, {100000, 2}, {10000, 3}};
}

TEST(Sharders, TableMemoryIsFp32WeightsWithoutSgdState) {
  EXPECT_EQ(table_memory_bytes({4000000, 30}, 128, EmbeddingOptimizer::kSgd), 2048000000);
}

TEST(Sharders, CostsFollowTheSeedDefinitions) {
  const EmbeddingTable t{1000, 10};
  EXPECT_DOUBLE_EQ(sharding_cost(ShardingStrategy::kSizeGreedy, t, 4, EmbeddingOptimizer::kSgd),
                   16000.0);
  EXPECT_DOUBLE_EQ(sharding_cost(ShardingStrategy::kLookupGreedy, t, 4, EmbeddingOptimizer::kSgd),
                   40.0);
  EXPECT_NEAR(sharding_cost(ShardingStrategy::kSizeLookupGreedy, t, 4, EmbeddingOptimizer::kSgd),
              120.0, 1e-9);
}

TEST(Sharders, SizeLookupGreedyOnSixTablesTwoRanks) {
  // Order by cost: t2 200, t1 160, t0 120, t3 60, t5 48, t4 40.
  // t2 -> r0 (tie, lower rank) [200|0]; t1 -> r1 [200|160]; t0 -> r1 [200|280];
  // t3 -> r0 [260|280]; t5 -> r0 [308|280]; t4 -> r1 [308|320].
  const auto p =
      shard(six_tables(), 4, {1'000'000'000, 1'000'000'000}, ShardingStrategy::kSizeLookupGreedy);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{2, 3, 5}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{0, 1, 4}));
  EXPECT_EQ(p.rank_of_table, (Tables{1, 1, 0, 0, 1, 0}));
  EXPECT_EQ(p.memory_bytes[0], 160 + 16000 + 160000);
  EXPECT_EQ(p.memory_bytes[1], 16000 + 1600 + 1600000);
}

TEST(Sharders, GreedySkipsRanksWithoutRoom) {
  // As above until t4 (1600000 B): rank 1 would hold 1617600 B > 1610000, so t4 goes to rank 0
  // although rank 0 has the larger cost.
  const auto p =
      shard(six_tables(), 4, {2'000'000, 1'610'000}, ShardingStrategy::kSizeLookupGreedy);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{2, 3, 4, 5}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{0, 1}));
}

TEST(Sharders, LookupGreedyBreaksCostTiesBySmallerCumulativeSize) {
  // Equal costs (dim 4 x L 1). t0 -> r0; t1 -> r1 (cost 0 < 4); t2: costs tie at 4, rank 0
  // holds 160 B and rank 1 16000 B -> r0.
  const std::vector<EmbeddingTable> tables = {{10, 1}, {1000, 1}, {10, 1}};
  const auto p = shard(tables, 4, {1'000'000, 1'000'000}, ShardingStrategy::kLookupGreedy);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{0, 2}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{1}));
}

TEST(Sharders, SizeGreedyBalancesBytes) {
  // Bytes (dim 1): 400, 1600, 1200, 800. t1 -> r0; t2 -> r1; t3 -> r1 (1200 < 1600);
  // t0 -> r0 (1600 < 2000).
  const std::vector<EmbeddingTable> tables = {{100, 1}, {400, 1}, {300, 1}, {200, 1}};
  const auto p = shard(tables, 1, {10'000, 10'000}, ShardingStrategy::kSizeGreedy);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{0, 1}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{2, 3}));
  EXPECT_EQ(p.memory_bytes[0], 2000);
  EXPECT_EQ(p.memory_bytes[1], 2000);
}

// DeepLearningExamples' distribute_to_buckets on rows [10, 50, 30, 20, 40] over 2 ranks, at most
// ceil(5 / 2) = 3 tables each: 50 -> r0; 40 -> r1 (fewer rows); 30 -> r1 (40 < 50); 20 -> r0
// (50 < 70); 10 -> r0 (70 = 70, the list keeps r0 first), which is then full.
TEST(Sharders, CappedSizeGreedyIsDistributeToBuckets) {
  const std::vector<EmbeddingTable> tables{{10, 1}, {50, 1}, {30, 1}, {20, 1}, {40, 1}};
  const TablePlacement p = shard(tables, 1, {1000, 1000}, ShardingStrategy::kCappedSizeGreedy);
  EXPECT_EQ(p.tables_of_rank[0], (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(p.tables_of_rank[1], (std::vector<uint32_t>{2, 4}));
  // The cap binds even when the rows would balance better without it: 4 equal tables on 3
  // ranks give 2, 1, 1.
  const TablePlacement capped = shard({{5, 1}, {5, 1}, {5, 1}, {5, 1}}, 1, {1000, 1000, 1000},
                                      ShardingStrategy::kCappedSizeGreedy);
  EXPECT_EQ(capped.tables_of_rank[0].size() + capped.tables_of_rank[1].size() +
                capped.tables_of_rank[2].size(),
            4U);
  for (const auto& on_rank : capped.tables_of_rank)
    EXPECT_LE(on_rank.size(), 2U);
  // Memory is checked: a rank without room for its bucket is an error.
  EXPECT_THROW(shard(tables, 1, {1000, 100}, ShardingStrategy::kCappedSizeGreedy), ShardingError);
}

TEST(Sharders, NaiveSplitsContiguouslyFirstRanksGetOneMore) {
  const std::vector<EmbeddingTable> tables(7, EmbeddingTable{10, 1});
  const auto p = shard(tables, 4, {1'000'000, 1'000'000, 1'000'000}, ShardingStrategy::kNaive);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{0, 1, 2}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{3, 4}));
  EXPECT_EQ(p.tables_of_rank[2], (Tables{5, 6}));
}

TEST(Sharders, NaiveFailsWhenItsSplitOverflowsARank) {
  const std::vector<EmbeddingTable> tables(4, EmbeddingTable{100, 1});  // 1600 B each
  try {
    shard(tables, 4, {2000, 100000}, ShardingStrategy::kNaive);
    FAIL() << "expected ShardingError";
  } catch (const ShardingError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("table 1"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
    EXPECT_NE(what.find("more tables than memory allows"), std::string::npos) << what;
  }
}

TEST(Sharders, RandomIsDeterministicForASeedAndUsesEveryRank) {
  const std::vector<EmbeddingTable> tables(64, EmbeddingTable{1000, 2});
  const std::vector<int64_t> capacity(4, 1'000'000'000);
  const auto a = shard(tables, 8, capacity, ShardingStrategy::kRandom, 42);
  const auto b = shard(tables, 8, capacity, ShardingStrategy::kRandom, 42);
  const auto c = shard(tables, 8, capacity, ShardingStrategy::kRandom, 43);
  EXPECT_EQ(a.rank_of_table, b.rank_of_table);
  EXPECT_NE(a.rank_of_table, c.rank_of_table);
  for (const auto& tables_on_rank : a.tables_of_rank)
    EXPECT_FALSE(tables_on_rank.empty());
}

TEST(Sharders, RandomPlacementForSeedSevenIsFixed) {
  // Computed independently (a Python mt19937_64 checked against the standard's 10000th-output
  // value): each draw is the top 2 bits of the next output, redrawn while >= 3. Any compiler and
  // standard library must give this placement.
  const std::vector<EmbeddingTable> tables(8, EmbeddingTable{10, 1});
  const auto p = shard(tables, 4, std::vector<int64_t>(3, 1'000'000), ShardingStrategy::kRandom, 7);
  EXPECT_EQ(p.rank_of_table, (Tables{0, 0, 0, 1, 2, 2, 1, 1}));
}

TEST(Sharders, RandomOnlyDrawsAmongRanksWithRoom) {
  const std::vector<EmbeddingTable> tables(16, EmbeddingTable{10, 1});
  const auto p = shard(tables, 4, {1'000'000, 0, 1'000'000}, ShardingStrategy::kRandom, 3);
  EXPECT_TRUE(p.tables_of_rank[1].empty());
  EXPECT_EQ(p.tables_of_rank[0].size() + p.tables_of_rank[2].size(), 16U);
}

TEST(Sharders, TableThatFitsNowhereIsNamedWithItsBytesAndTheCapacity) {
  for (ShardingStrategy s :
       {ShardingStrategy::kRandom, ShardingStrategy::kSizeGreedy, ShardingStrategy::kLookupGreedy,
        ShardingStrategy::kSizeLookupGreedy}) {
    try {
      shard(six_tables(), 4, {1'000'000, 1'000'000}, s);
      FAIL() << "expected ShardingError for " << sharding_strategy_name(s);
    } catch (const ShardingError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("table 4"), std::string::npos) << what;
      EXPECT_NE(what.find("1600000 bytes"), std::string::npos) << what;
      EXPECT_NE(what.find("1000000 byte"), std::string::npos) << what;
      EXPECT_NE(what.find("more tables than memory allows"), std::string::npos) << what;
    }
  }
}

TEST(Sharders, RejectsNoRanks) {
  EXPECT_THROW(shard(six_tables(), 4, {}, ShardingStrategy::kNaive), ShardingError);
}

}  // namespace
}  // namespace upsim

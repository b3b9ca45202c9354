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

TEST(Sharders, NaiveChunkSplitsContiguouslyFirstRanksGetOneMore) {
  const std::vector<EmbeddingTable> tables(7, EmbeddingTable{10, 1});
  const auto p = shard(tables, 4, {1'000'000, 1'000'000, 1'000'000}, ShardingStrategy::kNaiveChunk);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{0, 1, 2}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{3, 4}));
  EXPECT_EQ(p.tables_of_rank[2], (Tables{5, 6}));
}

TEST(Sharders, NaiveDealsRoundRobin) {
  const std::vector<EmbeddingTable> tables(7, EmbeddingTable{10, 1});
  const auto p = shard(tables, 4, {1'000'000, 1'000'000, 1'000'000}, ShardingStrategy::kNaive);
  EXPECT_EQ(p.tables_of_rank[0], (Tables{0, 3, 6}));
  EXPECT_EQ(p.tables_of_rank[1], (Tables{1, 4}));
  EXPECT_EQ(p.tables_of_rank[2], (Tables{2, 5}));
}

TEST(Sharders, NormLookupGreedyWeighsLookupsAgainstBytes) {
  // Table 0: most lookups, few rows; tables 1 and 2: few lookups, many rows. lookup_greedy
  // (costs 64, 20, 20) balances lookups only: 0 alone, 1 and 2 together (3.2 MB on one rank).
  // The normalized cost (lookup share + byte share: 0.62, 0.69, 0.69) puts 1 and 2 apart.
  const std::vector<EmbeddingTable> tables = {{10, 16}, {100'000, 5}, {100'000, 5}};
  const std::vector<int64_t> capacity(2, 1'000'000'000);
  const auto lookup = shard(tables, 4, capacity, ShardingStrategy::kLookupGreedy);
  EXPECT_EQ(lookup.tables_of_rank[0], (Tables{0}));
  EXPECT_EQ(lookup.tables_of_rank[1], (Tables{1, 2}));
  const auto norm = shard(tables, 4, capacity, ShardingStrategy::kNormLookupGreedy);
  EXPECT_NE(norm.rank_of_table[1], norm.rank_of_table[2]);
  EXPECT_EQ(
      sharding_cost(ShardingStrategy::kNormLookupGreedy, tables[0], 4, EmbeddingOptimizer::kSgd),
      0.0);
}

TEST(Sharders, NaiveFailsWhenItsSplitOverflowsARank) {
  const std::vector<EmbeddingTable> tables(4, EmbeddingTable{100, 1});  // 1600 B each
  try {
    shard(tables, 4, {2000, 100000}, ShardingStrategy::kNaiveChunk);
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

// ---- sharding types -------------------------------------------------------------------------

EmbeddingTable typed(int64_t rows, double pooling, EmbeddingShardingType type,
                     int64_t column_shards = 1) {
  EmbeddingTable t{rows, pooling};
  t.sharding_type = type;
  t.column_shards = column_shards;
  return t;
}

TEST(Sharders, RowWiseBlocksAreTorchRecs) {
  // torchrec/distributed/sharding_plan.py: blocks of ceil(rows / n), the last ones shorter.
  EXPECT_EQ(row_wise_shard_rows(10, 0, 4), 3);
  EXPECT_EQ(row_wise_shard_rows(10, 2, 4), 3);
  EXPECT_EQ(row_wise_shard_rows(10, 3, 4), 1);
  EXPECT_EQ(row_wise_shard_rows(5, 2, 4), 1);
  EXPECT_EQ(row_wise_shard_rows(5, 3, 4), 0);
  EXPECT_EQ(row_wise_shard_rows(800, 1, 4), 200);
  EXPECT_EQ(row_wise_shard_rows(7, 0, 1), 7);
}

// Four ranks, dim 4, fp32, fused SGD, dense Adam: t0 table-wise (100 rows: 1600 B), t1 row-wise
// (800 rows: 200 per rank, 3200 B each), t2 data-parallel (10 rows: weights 160 B + dense
// gradient 160 B + Adam's two fp32 moments 320 B = 640 B on every rank), t3 table-wise.
TEST(Sharders, RowWiseAndDataParallelTablesTakeTheirShareOfEveryRank) {
  const std::vector<EmbeddingTable> tables = {{100, 10},
                                              typed(800, 100, EmbeddingShardingType::kRowWise),
                                              typed(10, 1, EmbeddingShardingType::kDataParallel),
                                              {100, 10}};
  const std::vector<int64_t> capacity(4, 1'000'000);
  ShardingInput in{tables, 4, EmbeddingOptimizer::kSgd, capacity};
  in.dense_optimizer = OptimizerKind::kAdam;
  EXPECT_EQ(rank_table_memory_bytes(tables[1], in, 3), 200 * 4 * 4);
  EXPECT_EQ(rank_table_memory_bytes(tables[2], in, 0), 640);
  EXPECT_EQ(rank_table_memory_bytes(tables[0], in, 0), 0);  // the sharder places it
  const TablePlacement p = shard_tables(in, ShardingStrategy::kSizeLookupGreedy);
  EXPECT_EQ(p.row_wise, (Tables{1}));
  EXPECT_EQ(p.data_parallel, (Tables{2}));
  ASSERT_EQ(p.pieces.size(), 2U);  // the table-wise tables only
  EXPECT_EQ(p.pieces[0].table, 0U);
  EXPECT_EQ(p.pieces[1].table, 3U);
  EXPECT_EQ(p.rank_of_table[1], kNoSingleRank);
  EXPECT_EQ(p.rank_of_table[2], kNoSingleRank);
  // Equal costs: t0 on rank 0, t3 on rank 1 (the least loaded, then the lower rank).
  EXPECT_EQ(p.rank_of_table[0], 0U);
  EXPECT_EQ(p.rank_of_table[3], 1U);
  EXPECT_EQ(p.memory_bytes[0], 3200 + 640 + 1600);
  EXPECT_EQ(p.memory_bytes[1], 3200 + 640 + 1600);
  EXPECT_EQ(p.memory_bytes[2], 3200 + 640);
  EXPECT_EQ(p.memory_bytes[3], 3200 + 640);
  EXPECT_TRUE(p.tables_of_rank[2].empty());
}

// A column-wise table of dim 4 in 2 shards: two pieces of 2 columns (100 rows x 2 x 4 B = 800 B
// each), each placed like a table; lookup_greedy costs them 2 x 10 = 20, so they land apart.
TEST(Sharders, ColumnWiseShardsArePlacedLikeTablesOfTheirWidth) {
  const std::vector<EmbeddingTable> tables = {typed(100, 10, EmbeddingShardingType::kColumnWise, 2),
                                              {50, 1}};
  const std::vector<int64_t> capacity(2, 1'000'000);
  const TablePlacement p =
      shard_tables(ShardingInput{tables, 4, EmbeddingOptimizer::kSgd, capacity},
                   ShardingStrategy::kLookupGreedy);
  ASSERT_EQ(p.pieces.size(), 3U);
  EXPECT_EQ(p.pieces[0].table, 0U);
  EXPECT_EQ(p.pieces[0].shard, 0U);
  EXPECT_EQ(p.pieces[0].dim, 2);
  EXPECT_EQ(p.pieces[1].shard, 1U);
  EXPECT_EQ(p.pieces[2].table, 1U);
  EXPECT_EQ(p.pieces[2].dim, 4);
  EXPECT_NE(p.pieces[0].rank, p.pieces[1].rank);
  EXPECT_EQ(p.tables_of_rank[0].front(), 0U);
  EXPECT_EQ(p.tables_of_rank[1].front(), 0U);
  EXPECT_EQ(p.rank_of_table[0], kNoSingleRank);
  EXPECT_EQ(p.memory_bytes[0] + p.memory_bytes[1], 800 + 800 + 50 * 4 * 4);
  EXPECT_EQ(table_memory_bytes(EmbeddingTable{100, 10, 2}, 4, EmbeddingOptimizer::kAdagrad),
            100 * 2 * 4 + 100 * 2 * 4);
}

TEST(Sharders, ReplicatedAndRowWiseBytesAreCheckedFirstThenThePiecesInWhatIsLeft) {
  // The data-parallel table (1000 rows x 4 x 4 B weights + as much gradient = 32000 B) does not
  // fit a 30000-byte rank.
  const std::vector<EmbeddingTable> dp = {{10, 1},
                                          typed(1000, 1, EmbeddingShardingType::kDataParallel)};
  const std::vector<int64_t> small(2, 30'000);
  try {
    shard_tables(ShardingInput{dp, 4, EmbeddingOptimizer::kSgd, small},
                 ShardingStrategy::kSizeGreedy);
    FAIL() << "expected ShardingError";
  } catch (const ShardingError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("table 1 (data_parallel"), std::string::npos) << what;
    EXPECT_NE(what.find("32000 bytes"), std::string::npos) << what;
  }
  // The row-wise table takes 20000 B of each 30000 B rank; the 16000-byte table-wise table then
  // fits nowhere, and the message says what the row-wise table took.
  const std::vector<EmbeddingTable> rw = {typed(2500, 1, EmbeddingShardingType::kRowWise),
                                          {1000, 1}};
  try {
    shard_tables(ShardingInput{rw, 4, EmbeddingOptimizer::kSgd, small},
                 ShardingStrategy::kSizeGreedy);
    FAIL() << "expected ShardingError";
  } catch (const ShardingError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("table 1 (1000 rows x dim 4: 16000 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("after 20000 bytes of row-wise, table-row-wise and data-parallel tables"),
              std::string::npos)
        << what;
  }
}

TEST(Sharders, ColumnShardsMustDivideTheDim) {
  const std::vector<EmbeddingTable> tables = {typed(10, 1, EmbeddingShardingType::kColumnWise, 3)};
  const std::vector<int64_t> capacity(2, 1'000'000);
  EXPECT_THROW(shard_tables(ShardingInput{tables, 4, EmbeddingOptimizer::kSgd, capacity},
                            ShardingStrategy::kNaive),
               ShardingError);
}

TEST(Sharders, TableRowWiseTablesGoToTheCheapestNodeWithRoomOnEveryRank) {
  // Dim 4, 2 nodes of 2 ranks. Costs 4 x pooling: t0 40, t1 20, t2 16 -> t0 on node 0, t1 and
  // then t2 on node 1 (20 < 40, then 36 < 40); 1000 rows in blocks of 500 (8000 B each).
  const std::vector<EmbeddingTable> tables = {typed(1000, 10, EmbeddingShardingType::kTableRowWise),
                                              typed(1000, 5, EmbeddingShardingType::kTableRowWise),
                                              typed(1000, 4, EmbeddingShardingType::kTableRowWise)};
  const auto place = [&](const std::vector<int64_t>& capacity, uint32_t ranks_per_node = 2) {
    ShardingInput input{tables, 4, EmbeddingOptimizer::kSgd, capacity};
    input.ranks_per_node = ranks_per_node;
    return shard_tables(input, ShardingStrategy::kSizeLookupGreedy);
  };
  const std::vector<int64_t> roomy(4, 100'000);
  const TablePlacement p = place(roomy);
  EXPECT_EQ(p.table_row_wise, (Tables{0, 1, 2}));
  EXPECT_EQ(p.node_of_table, (Tables{0, 1, 1}));
  EXPECT_EQ(p.memory_bytes, (std::vector<int64_t>{8000, 8000, 16000, 16000}));
  EXPECT_EQ(p.ranks_per_node, 2U);
  // Node 1 full after t1: t2 goes to node 0 despite its cost.
  const TablePlacement full = place({100'000, 100'000, 8'000, 100'000});
  EXPECT_EQ(full.node_of_table, (Tables{0, 1, 0}));
  // No node has room on every rank: an error naming the table.
  try {
    place({8'000, 100'000, 8'000, 100'000});
    FAIL() << "expected ShardingError";
  } catch (const ShardingError& e) {
    EXPECT_NE(std::string(e.what()).find("table 2 (table_row_wise, 1000 rows x dim 4) needs 8000 "
                                         "bytes"),
              std::string::npos)
        << e.what();
  }
  // Nodes must divide the ranks.
  EXPECT_THROW(place(roomy, 3), ShardingError);
}

TEST(Sharders, RejectsNoRanks) {
  EXPECT_THROW(shard(six_tables(), 4, {}, ShardingStrategy::kNaive), ShardingError);
}

}  // namespace
}  // namespace upsim

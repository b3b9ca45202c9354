// The sharding-type search space: TorchRec's types per table and platform shape, classes of
// identical open tables (a stated type is kept), and the type mix a ranking row shows.
#include "workloads/dlrm/sharding_search_space.h"

#include <gtest/gtest.h>

#include <vector>

namespace upsim {
namespace {

using Type = EmbeddingShardingType;

TEST(ShardingTypeChoices, FollowTorchRecsTypesAndThePlatformsShape) {
  // One GPU: nothing to split.
  EXPECT_EQ(sharding_type_choices(128, 1, 1), (std::vector<TypeChoice>{{Type::kTableWise, 1}}));
  // One node of 8, dim 128: no column split (TorchRec's 128-column shards), no table-row-wise.
  EXPECT_EQ(sharding_type_choices(128, 8, 1), (std::vector<TypeChoice>{{Type::kTableWise, 1},
                                                                       {Type::kRowWise, 1},
                                                                       {Type::kDataParallel, 1},
                                                                       {Type::kHybrid, 1}}));
  // Dim 512 on two nodes: column-wise in 4 shards of 128 and table-row-wise.
  EXPECT_EQ(sharding_type_choices(512, 16, 2), (std::vector<TypeChoice>{{Type::kTableWise, 1},
                                                                        {Type::kRowWise, 1},
                                                                        {Type::kDataParallel, 1},
                                                                        {Type::kColumnWise, 4},
                                                                        {Type::kTableRowWise, 1},
                                                                        {Type::kHybrid, 1}}));
  // A dim that 128 does not divide is not split by column.
  EXPECT_EQ(sharding_type_choices(200, 4, 1).size(), 4U);
}

TEST(OpenTableClasses, GroupIdenticalOpenTablesAndKeepStatedOnes) {
  std::vector<EmbeddingTable> tables(6, EmbeddingTable{1000, 2.0});
  tables[1].rows = 2000;
  tables[3].rows = 2000;
  tables[4].sharding_type_stated = true;  // kept out of the search
  tables[5].zipf_alpha = 1.1;             // accessed differently: its own class
  EXPECT_EQ(open_table_classes(tables), (std::vector<std::vector<uint32_t>>{{0, 2}, {1, 3}, {5}}));
  tables[2].reuse_histogram = {1.0};
  EXPECT_EQ(open_table_classes(tables),
            (std::vector<std::vector<uint32_t>>{{0}, {1, 3}, {2}, {5}}));
}

TEST(TypeChoices, ApplyRoundTripsAndTheMixCountsEachType) {
  std::vector<EmbeddingTable> tables(5, EmbeddingTable{1000, 2.0});
  tables[0].auto_sharding_type = true;
  const std::vector<TypeChoice> choices = {{Type::kRowWise, 1},
                                           {Type::kColumnWise, 2},
                                           {Type::kTableWise, 1},
                                           {Type::kTableWise, 1},
                                           {Type::kTableRowWise, 1}};
  apply_type_choices(tables, choices, 8, 2);
  EXPECT_FALSE(tables[0].auto_sharding_type);
  EXPECT_EQ(tables[1].column_shards, 2);
  EXPECT_EQ(type_choices_of(tables), choices);
  EXPECT_EQ(type_mix(choices), "2 tw, 1 rw, 1 cw, 1 twrw");
  EXPECT_EQ(type_mix(std::vector<TypeChoice>{{Type::kHybrid, 1}}), "1 hybrid");
  EXPECT_EQ(type_choice_name(choices[1]), "column_wise x2");
  EXPECT_EQ(type_choice_name(choices[0]), "row_wise");
  // A column-wise table made table-wise again loses its shards.
  apply_type_choices(tables, std::vector<TypeChoice>(5, TypeChoice{}), 8, 2);
  EXPECT_EQ(tables[1].column_shards, 1);
  // Made hybrid, a table splits by its access law; a measured histogram cannot say which rows
  // are hot.
  std::vector<EmbeddingTable> skewed(1, EmbeddingTable{1'000'000, 1.0});
  skewed[0].zipf_alpha = 1.1;
  apply_type_choices(skewed, std::vector<TypeChoice>{{Type::kHybrid, 1}}, 65536, 8);
  EXPECT_EQ(skewed[0].sharding_type, Type::kHybrid);
  EXPECT_GT(skewed[0].frequent_rows, 0);
  EXPECT_GT(skewed[0].frequent_share, 0.5);
  std::vector<EmbeddingTable> measured(1, EmbeddingTable{1000, 1.0});
  measured[0].reuse_histogram = {1.0};
  EXPECT_THROW(apply_type_choices(measured, std::vector<TypeChoice>{{Type::kHybrid, 1}}, 65536, 8),
               ShardingError);
}

}  // namespace
}  // namespace upsim

#include "workloads/pytorch/ddp_buckets.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace upsim::pytorch {
namespace {

TEST(DdpBuckets, FirstBucketUsesItsOwnLimitAndClosesWhenReached) {
  // First limit 15: 10, then 20 >= 15 closes {0, 1}. Limit 20: 10, 20 >= 20 closes {2, 3}.
  // {4} stays open and is the last bucket.
  const std::vector<int64_t> sizes = {10, 10, 10, 10, 10};
  const auto buckets = assign_ddp_buckets(sizes, 15, 20);
  ASSERT_EQ(buckets.size(), 3U);
  EXPECT_EQ(buckets[0].params, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(buckets[0].bytes, 20);
  EXPECT_EQ(buckets[1].params, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(buckets[1].bytes, 20);
  EXPECT_EQ(buckets[2].params, (std::vector<uint32_t>{4}));
  EXPECT_EQ(buckets[2].bytes, 10);
}

TEST(DdpBuckets, ParameterCrossingTheLimitStaysInTheBucket) {
  const std::vector<int64_t> sizes = {4, 100, 4};
  const auto buckets = assign_ddp_buckets(sizes, 8, 8);
  ASSERT_EQ(buckets.size(), 2U);
  EXPECT_EQ(buckets[0].bytes, 104);
  EXPECT_EQ(buckets[1].bytes, 4);
}

TEST(DdpBuckets, DlrmTopMlpWithPyTorchDefaults) {
  // Top MLP 1304-1024-512-256-1 in fp32, gradient-ready order (bias before weight, last layer
  // first). 1 MiB first bucket: 4 + 1024 + 1024 + 524288 + 2048 + 2097152 = 2625540 crosses it.
  // The rest (4096 + 5341184) stays under 25 MiB: the last bucket.
  const std::vector<int64_t> sizes = {4, 1024, 1024, 524288, 2048, 2097152, 4096, 5341184};
  const auto buckets =
      assign_ddp_buckets(sizes, kDefaultDdpFirstBucketBytes, kDefaultDdpBucketBytes);
  ASSERT_EQ(buckets.size(), 2U);
  EXPECT_EQ(buckets[0].bytes, 2625540);
  EXPECT_EQ(buckets[0].params.size(), 6U);
  EXPECT_EQ(buckets[1].bytes, 5345280);
}

TEST(DdpBuckets, EmptyParameterListHasNoBucketAndLimitsMustBePositive) {
  EXPECT_TRUE(assign_ddp_buckets({}, 1, 1).empty());
  const std::vector<int64_t> sizes = {1};
  EXPECT_THROW(assign_ddp_buckets(sizes, 0, 1), std::invalid_argument);
  EXPECT_THROW(assign_ddp_buckets(sizes, 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace upsim::pytorch

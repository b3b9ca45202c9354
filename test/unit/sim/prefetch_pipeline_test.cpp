// sim/prefetch_pipeline.h: the pipelines run every item's work once, in order, and call each
// stage once per item before its work, the farther stage first; the stages only hint.
#include "sim/prefetch_pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace upsim {
namespace {

struct Call {
  char stage;
  size_t item;
  bool operator==(const Call&) const = default;
};

/// Checks a pipeline's calls over n items with the given stage names (farthest first, work
/// last): each item sees each stage once, in the stages' order, and work runs in item order.
void expect_pipelined(const std::vector<Call>& calls, size_t n, const std::string& stages) {
  std::vector<std::string> seen(n);
  std::vector<size_t> work_order;
  for (const Call& c : calls) {
    ASSERT_LT(c.item, n);
    seen[c.item] += c.stage;
    if (c.stage == stages.back()) work_order.push_back(c.item);
  }
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(seen[i], stages) << "item " << i << " of " << n;
  ASSERT_EQ(work_order.size(), n);
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(work_order[i], i);
}

/// A stage that records its calls as `stage`.
auto recorder(std::vector<Call>& calls, char stage) {
  return [&calls, stage](size_t i) { calls.push_back({stage, i}); };
}

TEST(PrefetchPipeline, TwoStageRunsEveryItemOnceInOrderWithItsLoadsFirst) {
  for (size_t n : {0, 1, 2, 15, 16, 17, 31, 32, 33, 100}) {
    std::vector<Call> calls;
    prefetch::two_stage(n, recorder(calls, 'f'), recorder(calls, 'n'), recorder(calls, 'w'));
    expect_pipelined(calls, n, "fnw");
  }
}

TEST(PrefetchPipeline, ThreeStageRunsEveryItemOnceInOrderWithItsLoadsFirst) {
  for (size_t n : {0, 1, 2, 15, 16, 17, 47, 48, 49, 100}) {
    std::vector<Call> calls;
    prefetch::three_stage(n, recorder(calls, 'a'), recorder(calls, 'f'), recorder(calls, 'n'),
                          recorder(calls, 'w'));
    expect_pipelined(calls, n, "afnw");
  }
}

TEST(PrefetchPipeline, LoadsRunAtMostTheirChunksAhead) {
  // While the work of item i runs, the near stage has reached at most the end of the next
  // chunk and the far stage the end of the one after: what they load stays in cache.
  const size_t n = 100;
  size_t far_done = 0;
  size_t near_done = 0;
  prefetch::two_stage(
      n, [&](size_t) { ++far_done; }, [&](size_t) { ++near_done; },
      [&](size_t i) {
        const size_t chunk_end = (i / prefetch::kChunk + 1) * prefetch::kChunk;
        EXPECT_LE(near_done, std::min(n, chunk_end + prefetch::kChunk)) << i;
        EXPECT_LE(far_done, std::min(n, chunk_end + 2 * prefetch::kChunk)) << i;
        EXPECT_GT(near_done, i);
        EXPECT_GT(far_done, i);
      });
}

TEST(PrefetchPipeline, ALineHintChangesNothing) {
  std::vector<double> values{1.0, 2.0, 3.0};
  for (const double& v : values)
    prefetch::line(&v);
  prefetch::line(nullptr);  // a hint never faults
  EXPECT_EQ(values, (std::vector<double>{1.0, 2.0, 3.0}));
}

}  // namespace
}  // namespace upsim

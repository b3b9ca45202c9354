// parallel_for (sim/parallel.h): every index runs once on any number of workers (0: one per
// hardware thread), and an exception reaches the caller (the smallest failing index's) after the
// other indices have run.
#include "sim/parallel.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace upsim {
namespace {

TEST(ParallelFor, EveryIndexRunsOnceForAnyWorkerCount) {
  for (size_t workers : {0u, 1u, 2u, 7u, 100u}) {
    std::vector<int> runs(37, 0);
    parallel_for(runs.size(), workers, [&](size_t i) { runs[i] += static_cast<int>(i) + 1; });
    for (size_t i = 0; i < runs.size(); ++i)
      EXPECT_EQ(runs[i], static_cast<int>(i) + 1) << "workers " << workers << " index " << i;
  }
  parallel_for(0, 4, [](size_t) { FAIL() << "no index to run"; });
}

TEST(ParallelFor, RethrowsTheSmallestFailingIndexAfterTheOthersRan) {
  for (size_t workers : {1u, 3u}) {
    std::vector<int> ran(10, 0);
    try {
      parallel_for(ran.size(), workers, [&](size_t i) {
        ran[i] = 1;
        if (i == 7 || i == 4) throw std::runtime_error("index " + std::to_string(i));
      });
      ADD_FAILURE() << "expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "index 4");
    }
    for (size_t i = 0; i < ran.size(); ++i)
      EXPECT_EQ(ran[i], 1) << "workers " << workers << " index " << i;
  }
}

}  // namespace
}  // namespace upsim

// run_sharing_memory (tools/memory_shared_jobs.h): jobs share the process's memory while they
// run at once, and a job too large for its share runs again alone after the others.
#include "tools/memory_shared_jobs.h"

#include <gtest/gtest.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "tools/scenario.h"

namespace upsim::cli {
namespace {

/// A SharedMemoryLimitError as build_scenario throws it: a ConfigError of a scenario file (here
/// one that does not parse).
SharedMemoryLimitError shared_limit_error() {
  try {
    ConfigDocument::parse_string("workload: [", "job.yaml");
  } catch (const ConfigError& e) {
    return SharedMemoryLimitError(MachineLimitError(e));
  }
  throw std::logic_error("an unterminated YAML sequence parsed");
}

TEST(MemorySharedJobs, AJobOverItsShareRunsAgainAloneAfterTheOthers) {
  std::mutex mutex;
  std::vector<std::pair<size_t, size_t>> calls;  // (index, shares), in the order they ran
  run_sharing_memory(5, 2, [&](size_t i, size_t shares) {
    {
      const std::lock_guard lock(mutex);
      calls.emplace_back(i, shares);
    }
    if ((i == 1 || i == 3) && shares > 1) throw shared_limit_error();
  });
  ASSERT_EQ(calls.size(), 7U);
  for (size_t k = 0; k < 5; ++k)
    EXPECT_EQ(calls[k].second, 2U) << "call " << k;
  // The two deferred jobs, alone and in index order, after every other job.
  EXPECT_EQ(calls[5], std::make_pair(size_t{1}, size_t{1}));
  EXPECT_EQ(calls[6], std::make_pair(size_t{3}, size_t{1}));
}

TEST(MemorySharedJobs, SharesAreTheRunsAtOnceAndAloneItsErrorPropagates) {
  // One worker, or one job: every run has the memory to itself.
  std::vector<size_t> shares_seen;
  run_sharing_memory(3, 1, [&](size_t, size_t shares) { shares_seen.push_back(shares); });
  run_sharing_memory(1, 8, [&](size_t, size_t shares) { shares_seen.push_back(shares); });
  EXPECT_EQ(shares_seen, (std::vector<size_t>{1, 1, 1, 1}));
  EXPECT_EQ(memory_shares(5, 2), 2U);
  EXPECT_EQ(memory_shares(0, 2), 1U);
  EXPECT_GE(memory_shares(3, 0), 1U);  // one worker per hardware thread
  EXPECT_LE(memory_shares(3, 0), 3U);
  // A job that does not fit alone either: its error reaches the caller.
  EXPECT_THROW(run_sharing_memory(2, 2,
                                  [](size_t i, size_t) {
                                    if (i == 0) throw shared_limit_error();
                                  }),
               SharedMemoryLimitError);
  // Any other error propagates without a second run.
  size_t runs = 0;
  EXPECT_THROW(run_sharing_memory(1, 1,
                                  [&](size_t, size_t) {
                                    ++runs;
                                    throw std::runtime_error("broken");
                                  }),
               std::runtime_error);
  EXPECT_EQ(runs, 1U);
}

// Over processes that share a node (mpirun): a job past its share answers "run alone", and the
// round's caller runs it again alone after the round, in index order.
TEST(MemorySharedJobs, AHandedOutJobOverItsShareRunsAloneAfterTheRound) {
  const auto job = [](size_t index) {
    return [index](size_t shares) -> std::string {
      if (index % 2 == 1 && shares > 1) throw shared_limit_error();
      return "job " + std::to_string(index) + " at " + std::to_string(shares);
    };
  };
  EXPECT_EQ(result_or_run_alone(4, job(0)), "job 0 at 4");
  EXPECT_EQ(result_or_run_alone(4, job(1)), kRunAloneResult);
  EXPECT_THROW(result_or_run_alone(4, [](size_t) -> std::string { throw std::runtime_error("x"); }),
               std::runtime_error);

  std::vector<std::pair<size_t, std::string>> delivered;
  run_round_then_alone(
      [&](const JobDone& done) {
        // The round delivers in the order the jobs finish.
        for (const size_t i : {3, 0, 1, 2})
          done(i, result_or_run_alone(4, job(i)));
      },
      [&](size_t i) { return job(i)(1); },
      [&](size_t i, const std::string& result) { delivered.emplace_back(i, result); });
  const std::vector<std::pair<size_t, std::string>> expected = {
      {0, "job 0 at 4"}, {2, "job 2 at 4"}, {1, "job 1 at 1"}, {3, "job 3 at 1"}};
  EXPECT_EQ(delivered, expected);
}

}  // namespace
}  // namespace upsim::cli

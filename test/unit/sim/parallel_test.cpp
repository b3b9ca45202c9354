// parallel_for (sim/parallel.h): every index runs once on any number of workers (0: one per
// hardware thread), and an exception reaches the caller (the smallest failing index's) after the
// other indices have run. A thread that cannot be started is not a crash: the others go on, and
// only when no worker thread starts is it an error naming the cause.
#include "sim/parallel.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
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

/// Starts `allowed` threads, then throws what std::thread throws when the system refuses one.
struct RefusingStarter {
  size_t allowed = 0;
  std::errc reason = std::errc::resource_unavailable_try_again;
  size_t started = 0;
  template <class F>
  std::thread operator()(F&& f) {
    if (started == allowed) throw std::system_error(std::make_error_code(reason));
    ++started;
    return std::thread(std::forward<F>(f));
  }
};

TEST(ParallelFor, RunsEveryIndexOnTheThreadsThatStartedWhenOneIsRefused) {
  for (size_t allowed : {1u, 2u, 5u}) {
    std::vector<std::atomic<int>> runs(64);
    RefusingStarter starter{allowed};
    parallel_for(
        runs.size(), 16, [&](size_t i) { ++runs[i]; }, starter);
    EXPECT_EQ(starter.started, allowed);
    for (size_t i = 0; i < runs.size(); ++i)
      EXPECT_EQ(runs[i], 1) << "allowed " << allowed << " index " << i;
  }
}

TEST(ParallelFor, NoThreadStartedIsAnErrorWithTheSystemsReason) {
  int ran = 0;
  try {
    parallel_for(
        10, 4, [&](size_t) { ++ran; }, RefusingStarter{0});
    ADD_FAILURE() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot start a thread: Resource temporarily unavailable");
  }
  EXPECT_EQ(ran, 0);
  try {
    parallel_for(
        10, 2, [&](size_t) { ++ran; }, RefusingStarter{0, std::errc::not_enough_memory});
    ADD_FAILURE() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot start a thread: Cannot allocate memory");
  }
  // One worker, or one index, needs no thread.
  parallel_for(
      10, 1, [&](size_t) { ++ran; }, RefusingStarter{0});
  parallel_for(
      1, 8, [&](size_t) { ++ran; }, RefusingStarter{0});
  EXPECT_EQ(ran, 11);
}

/// Runs `child` in a forked process under RLIMIT_NPROC = `processes` (the processes and threads
/// its user may have) and returns its wait status. Root is exempt from that limit, so a root
/// test first becomes a user of its own (a uid no other process uses). Exit code 77: that was not
/// possible (the test is skipped).
template <class Child>
int run_with_process_limit(rlim_t processes, Child&& child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0) {
      const uid_t uid = static_cast<uid_t>(40000 + ::getpid() % 20000);
      if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(77);
    }
    const rlimit limit{processes, processes};
    if (::setrlimit(RLIMIT_NPROC, &limit) != 0) ::_exit(77);
    ::_exit(child());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// As root, the child's user has exactly one process (itself), so the limit allows a known number
// of threads; otherwise the user's other processes count too, and only the limit 1 (no thread at
// all) is exact.
TEST(ParallelFor, GoesOnWithTheThreadsItCouldStartWhenTheSystemRefusesMore) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs a user of its own (root) for an exact limit";
  const int status = run_with_process_limit(3, [] {
    std::vector<std::atomic<int>> runs(200);
    parallel_for(runs.size(), 50, [&](size_t i) {
      ++runs[i];
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
    for (const std::atomic<int>& r : runs) {
      if (r != 1) return 1;
    }
    return 0;
  });
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot change user";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "an index did not run exactly once";
}

TEST(ParallelFor, NoThreadAtAllIsAnErrorNamingTheCauseBeforeAnyIndexRuns) {
  const int status = run_with_process_limit(1, [] {
    int ran = 0;
    try {
      parallel_for(10, 4, [&](size_t) { ++ran; });
    } catch (const std::runtime_error& e) {
      const bool named =
          std::string(e.what()) == "cannot start a thread: Resource temporarily unavailable";
      return named && ran == 0 ? 0 : 2;
    }
    return 3;
  });
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot change user";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // One worker needs no thread: it runs under the same limit.
  const int one = run_with_process_limit(1, [] {
    int ran = 0;
    parallel_for(10, 1, [&](size_t) { ++ran; });
    return ran == 10 ? 0 : 1;
  });
  ASSERT_TRUE(WIFEXITED(one));
  EXPECT_EQ(WEXITSTATUS(one), 0);
}

}  // namespace
}  // namespace upsim

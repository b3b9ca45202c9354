// What `upsim run` leaves in its output folder when it succeeds, fails or runs out of room: only
// this run's files (never an older run's trace beside a new summary, never the trace of a
// discarded attempt of the steady-state search), and an error naming the limit, not an abort,
// when the scenario is larger than the memory the process may use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using upsim::test::quote;

const std::string kDlrm = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
const std::string kTiny = quote(std::string(UPSIM_CLI_TEST_DATA) + "/tiny.yaml");

class RunOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-run-outputs-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  upsim::test::CliResult run(const std::string& args, const std::string& prefix = "") {
    return upsim::test::run_upsim(args, dir_, prefix);
  }
  fs::path dir_;
};

TEST_F(RunOutputs, AnOlderRunsTraceIsNeverLeftBesideANewSummary) {
  ASSERT_EQ(run("run " + kTiny + " --out o").exit_code, 0);
  ASSERT_TRUE(fs::exists(dir_ / "o" / "trace.json"));
  // Without --force, a folder holding an older run's trace is refused even by a run that writes
  // no trace of its own: the old trace would pass for the new run's.
  for (const char* name :
       {"summary.txt", "summary.json", "ranks.csv", "links.csv", "ops.csv", "scenario.yaml"}) {
    fs::remove(dir_ / "o" / name);
  }
  const auto refused = run("run " + kTiny + " --out o --no-trace --set workload.global_batch=64");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.err.find("trace.json already exists"), std::string::npos) << refused.err;
  // With --force, the stale trace goes.
  const auto forced = run("run " + kTiny + " --out o --no-trace --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_FALSE(fs::exists(dir_ / "o" / "trace.json"));
  EXPECT_TRUE(fs::exists(dir_ / "o" / "summary.txt"));
  // A gzip trace replaces a plain one, and the other way round.
  ASSERT_EQ(run("run " + kTiny + " --out o --force").exit_code, 0);
  ASSERT_EQ(run("run " + kTiny + " --out o --force --trace-gzip").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "o" / "trace.json.gz"));
  EXPECT_FALSE(fs::exists(dir_ / "o" / "trace.json"));
  // A trace written elsewhere (--trace FILE) leaves none in the folder either.
  ASSERT_EQ(run("run " + kTiny + " --out o --force --trace elsewhere.json").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere.json"));
  EXPECT_FALSE(fs::exists(dir_ / "o" / "trace.json.gz"));
}

TEST_F(RunOutputs, AFullDiskLeavesNoTraceOfADiscardedAttempt) {
  // dlrm_4gpu reaches steady state in its third attempt (2, 4, 8 iterations); its traces are
  // about 0.7, 1.5 and 3 MB. A file size limit of 1 MB (SIGXFSZ ignored, so writes fail with
  // EFBIG as on a full disk) lets the first attempt's trace through and stops the last one.
  const auto r = run("run " + kDlrm + " --out o", "ulimit -f 1000 && trap '' XFSZ &&");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  // Nothing of the run is left: not the first attempt's trace, not a temporary, not the folder
  // the run created.
  EXPECT_FALSE(fs::exists(dir_ / "o" / "trace.json")) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "o")) << r.output;
}

TEST_F(RunOutputs, AScenarioLargerThanTheProcesssMemoryLimitIsRefusedNamingTheLimit) {
#if defined(UPSIM_SANITIZED)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it";
#else
  // GPT-3 175B on 1024 GPUs builds 16 M tasks (about 1 GB); under `ulimit -v` of 800 MB the run
  // is refused before it starts, with the limit named, where it used to end in std::bad_alloc.
  const auto r = run("run " + quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt3_175b_1024gpu.yaml") +
                         " --out o --no-trace",
                     "ulimit -v 800000 &&");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.err.find("workload: the run needs more than"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("RLIMIT_AS"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
#endif
}

}  // namespace

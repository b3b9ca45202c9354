// What a run writes: regular files only (never through a symbolic link, never onto a device),
// the system's reason in every write error, no temporary file left after an error or after
// SIGINT / SIGTERM (exit status 130 / 143).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tools/interrupt_cleanup.h"
#include "tools/layout_records.h"
#include "tools/layout_search.h"
#include "tools/memory_limit.h"
#include "tools/output_folder.h"
#include "tools/scenario.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

class OutputSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("upsim-output-safety-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  static std::string error_of(const fs::path& path) {
    try {
      write_file_atomically(path, "content\n");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(OutputSafety, ReplacesRegularFilesOnly) {
  write_file_atomically(dir_ / "summary.txt", "old\n");
  write_file_atomically(dir_ / "summary.txt", "new\n");
  EXPECT_EQ(read(dir_ / "summary.txt"), "new\n");
  EXPECT_FALSE(fs::exists(dir_ / "summary.txt.tmp"));

  // A symbolic link at the name, or at its temporary twin: refused, the target untouched.
  std::ofstream(dir_ / "victim") << "keep\n";
  fs::create_symlink(dir_ / "victim", dir_ / "linked.txt");
  const std::string link = error_of(dir_ / "linked.txt");
  EXPECT_NE(link.find("linked.txt is a symbolic link"), std::string::npos) << link;
  fs::create_symlink(dir_ / "victim", dir_ / "planted.txt.tmp");
  const std::string planted = error_of(dir_ / "planted.txt");
  EXPECT_NE(planted.find("planted.txt.tmp is a symbolic link"), std::string::npos) << planted;
  EXPECT_EQ(read(dir_ / "victim"), "keep\n");
  EXPECT_TRUE(fs::is_symlink(dir_ / "linked.txt"));

  // A device (and a folder) at the name.
  const std::string device = error_of("/dev/null");
  EXPECT_NE(device.find("/dev/null is a device"), std::string::npos) << device;
  fs::create_directories(dir_ / "folder");
  EXPECT_NE(error_of(dir_ / "folder").find("is a folder"), std::string::npos);

  // The output folder check refuses them too, --force or not.
  for (bool force : {false, true}) {
    try {
      prepare_output_folder("s.yaml", dir_, {"linked.txt"}, force);
      ADD_FAILURE() << "a symbolic link accepted as an output, force " << force;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
    }
  }
}

TEST_F(OutputSafety, WriteErrorsCarryTheSystemsReasonAndLeaveNoTemporaryFile) {
  const std::string missing = error_of(dir_ / "no" / "such" / "summary.txt");
  EXPECT_NE(missing.find("cannot write"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file or directory"), std::string::npos) << missing;
  // Permission denied (not testable as root, who may write anywhere).
  if (::geteuid() != 0) {
    fs::create_directories(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    const std::string denied = error_of(dir_ / "ro" / "summary.txt");
    EXPECT_NE(denied.find("Permission denied"), std::string::npos) << denied;
    EXPECT_FALSE(fs::exists(dir_ / "ro" / "summary.txt.tmp"));
    fs::permissions(dir_ / "ro", fs::perms::owner_all);
  }
}

TEST_F(OutputSafety, SigtermAndSigintRemoveRegisteredTemporaryFilesAndExit143And130) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const fs::path tmp = dir_ / ("trace.json.tmp." + std::to_string(sig));
    std::ofstream(tmp) << "half a trace";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      install_interrupt_cleanup();
      const TempFileGuard guard(tmp);
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    EXPECT_FALSE(fs::exists(tmp)) << sig;
  }
  // A guard that is gone no longer removes its file.
  const fs::path kept = dir_ / "kept.tmp";
  std::ofstream(kept) << "x";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_interrupt_cleanup();
    { const TempFileGuard guard(kept); }
    ::raise(SIGTERM);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_TRUE(fs::exists(kept));
}

TEST_F(OutputSafety, OutputFilesPublishTogetherOrNotAtAll) {
  // An earlier run's files: kept until every new file is complete.
  write_file_atomically(dir_ / "summary.txt", "old summary\n");
  write_file_atomically(dir_ / "trace.json", "old trace\n");
  {
    OutputFiles files(OutputFolder{dir_, false});
    files.stage(dir_ / "summary.txt", "new summary\n");
    const fs::path trace_tmp = files.reserve(dir_ / "trace.json");
    EXPECT_EQ(trace_tmp, dir_ / "trace.json.tmp");
    std::ofstream(trace_tmp) << "new trace, half";
    EXPECT_EQ(read(dir_ / "summary.txt"), "old summary\n");
    // Destroyed without commit (an error): the temporaries go, the old files stay.
  }
  EXPECT_EQ(read(dir_ / "summary.txt"), "old summary\n");
  EXPECT_EQ(read(dir_ / "trace.json"), "old trace\n");
  EXPECT_FALSE(fs::exists(dir_ / "summary.txt.tmp"));
  EXPECT_FALSE(fs::exists(dir_ / "trace.json.tmp"));

  // A commit publishes all and removes the stale names this run does not write.
  write_file_atomically(dir_ / "trace.json.gz", "older gzip trace");
  {
    OutputFiles files(OutputFolder{dir_, false});
    files.stage(dir_ / "summary.txt", "new summary\n");
    std::ofstream(files.reserve(dir_ / "trace.json")) << "new trace\n";
    files.commit({dir_ / "trace.json.gz"});
  }
  EXPECT_EQ(read(dir_ / "summary.txt"), "new summary\n");
  EXPECT_EQ(read(dir_ / "trace.json"), "new trace\n");
  EXPECT_FALSE(fs::exists(dir_ / "trace.json.gz"));

  // A reserved temporary nobody wrote is an error at commit, not a missing file later.
  {
    OutputFiles files(OutputFolder{dir_, false});
    (void)files.reserve(dir_ / "never.json");
    EXPECT_THROW(files.commit(), std::runtime_error);
  }
  EXPECT_FALSE(fs::exists(dir_ / "never.json"));

  // A folder the command created is removed again when nothing was published into it.
  const fs::path fresh = dir_ / "fresh";
  fs::create_directories(fresh);
  {
    OutputFiles files(OutputFolder{fresh, true});
    files.stage(fresh / "summary.txt", "x");
  }
  EXPECT_FALSE(fs::exists(fresh));
}

TEST_F(OutputSafety, FoldersOfFilesAreMadeReleasedAndPlannedLikeFiles) {
  // A folder made for files (a run's Kineto traces) goes again when the run fails, as does a
  // reservation given up.
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  {
    OutputFiles files(OutputFolder{out, false});
    files.make_folder(out / "kineto");
    std::ofstream(files.reserve(out / "kineto" / "rank_0.json")) << "{}";
    const fs::path dropped = files.reserve(out / "kineto" / "rank_1.json");
    std::ofstream(dropped) << "{}";
    files.release(out / "kineto" / "rank_1.json");
    EXPECT_FALSE(fs::exists(dropped));
  }
  EXPECT_FALSE(fs::exists(out / "kineto"));
  {
    OutputFiles files(OutputFolder{out, false});
    files.make_folder(out / "kineto");
    std::ofstream(files.reserve(out / "kineto" / "rank_0.json")) << "{}";
    files.release(out / "kineto" / "rank_1.json");  // never reserved: nothing happens
    files.commit();
  }
  EXPECT_EQ(read(out / "kineto" / "rank_0.json"), "{}");
  // An existing planned folder stops a run without --force; one that is not a folder always.
  EXPECT_THROW(prepare_output_folder("s.yaml", out, {}, false, {"kineto"}), std::runtime_error);
  EXPECT_NO_THROW(prepare_output_folder("s.yaml", out, {}, true, {"kineto"}));
  std::ofstream(out / "file") << "x";
  try {
    prepare_output_folder("s.yaml", out, {}, true, {"file"});
    ADD_FAILURE() << "a file where a folder is planned";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is a regular file"), std::string::npos) << e.what();
  }
}

TEST_F(OutputSafety, AnInterruptLeavesNoStagedOutput) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_interrupt_cleanup();
    OutputFiles files(OutputFolder{dir_, false});
    files.stage(dir_ / "summary.txt", "staged");
    std::ofstream(files.reserve(dir_ / "trace.json")) << "a trace of a discarded attempt";
    ::raise(SIGINT);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_TRUE(fs::is_empty(dir_)) << "left: " << fs::directory_iterator(dir_)->path();
}

TEST(MemoryLimit, CgroupLimitFilesAndTheirAncestorsBind) {
  EXPECT_EQ(parse_cgroup_memory_limit("max\n"), std::nullopt);
  EXPECT_EQ(parse_cgroup_memory_limit("8589934592\n"), std::optional<uint64_t>(8589934592));
  EXPECT_EQ(parse_cgroup_memory_limit("9223372036854771712\n"), std::nullopt);  // v1 unlimited
  EXPECT_EQ(parse_cgroup_memory_limit("lots"), std::nullopt);
  EXPECT_EQ(parse_cgroup_memory_limit(""), std::nullopt);

  const fs::path root = fs::temp_directory_path() / ("upsim-cgroup-" + std::to_string(::getpid()));
  fs::remove_all(root);
  // cgroup v2: the job's own limit is "max", its parent's 6 GiB binds.
  fs::create_directories(root / "user.slice" / "job");
  std::ofstream(root / "user.slice" / "memory.max") << "6442450944\n";
  std::ofstream(root / "user.slice" / "job" / "memory.max") << "max\n";
  const std::optional<MemoryLimit> v2 = cgroup_memory_limit("0::/user.slice/job\n", root);
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->bytes, uint64_t{6442450944});
  EXPECT_NE(v2->source.find("memory.max (/user.slice)"), std::string::npos) << v2->source;

  // cgroup v1: the memory controller's hierarchy, among others on the line.
  fs::create_directories(root / "memory" / "docker" / "abc");
  std::ofstream(root / "memory" / "docker" / "abc" / "memory.limit_in_bytes") << "2147483648\n";
  std::ofstream(root / "memory" / "memory.limit_in_bytes") << "9223372036854771712\n";
  const std::optional<MemoryLimit> v1 =
      cgroup_memory_limit("5:cpuacct,cpu:/docker/abc\n4:memory:/docker/abc\n0::/\n", root);
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->bytes, uint64_t{2147483648});
  EXPECT_NE(v1->source.find("memory.limit_in_bytes (/docker/abc)"), std::string::npos);

  // No limit anywhere, or nothing readable.
  EXPECT_EQ(cgroup_memory_limit("0::/nowhere\n", root / "none"), std::nullopt);
  fs::remove_all(root);
}

/// Runs `body` in a forked child whose RLIMIT_AS is `bytes` and returns its exit code: 0 when
/// the hard limit does not allow `bytes` (nothing to check), 3 when the limit cannot be set.
int exit_code_under_address_space_limit(rlim_t bytes, const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = bytes;
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < limit.rlim_cur) ::_exit(0);
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    ::_exit(body());
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(MemoryLimit, TheTaskLimitFollowsTheAddressSpaceLimit) {
#if defined(UPSIM_SANITIZED)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it";
#endif
  // RLIMIT_AS lowered to 3 GiB caps the tasks a run may build, and says so.
  const auto check = [] {
    const MemoryLimit m = process_memory_limit();
    const bool ok = m.bytes <= (uint64_t{3} << 30) && m.source.find("RLIMIT_AS") == 0 &&
                    machine_task_limit(80) <= (size_t{3} << 30) / 80;
    return ok ? 0 : 4;
  };
  EXPECT_EQ(exit_code_under_address_space_limit(rlim_t{3} << 30, check), 0);
}

// A plan's layout whose graph does not fit the memory this machine lends a run is not a refusal
// of the layout: its outcome says so, and survives a record round trip.
TEST(MemoryLimit, APlanLayoutTooLargeForTheMachineIsAMachineLimit) {
#if defined(UPSIM_SANITIZED)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it";
#endif
  // 1 GiB of address space: about 13 M transformer tasks, under GPT-3 175B's 16 M at 1024 GPUs.
  const auto check = [] {
    PlanOptions options;
    options.scenario = std::string(UPSIM_CONFIGS_DIR) + "/gpt3_175b_1024gpu.yaml";
    const std::string result = simulate_layout_job(options, layout_job({}));
    if (!result.starts_with("machine_limit\t")) return 4;
    PlannedLayout layout;
    std::string why;
    const std::optional<PlannedLayout> parsed = parse_layout_result(result, layout, why);
    const bool ok =
        parsed && parsed->outcome == PlannedLayout::Outcome::kMachineLimit &&
        parsed->reason.find("more than this process's memory holds") != std::string::npos;
    return ok ? 0 : 5;
  };
  EXPECT_EQ(exit_code_under_address_space_limit(rlim_t{1} << 30, check), 0);
}

}  // namespace
}  // namespace upsim::cli

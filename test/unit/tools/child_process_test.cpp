// run_program: an argument vector, never a shell; output captured and bounded; every child
// waited for; descriptors and signal masks not inherited.
#include "tools/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

/// True when this process has no child left (none running, none unreaped).
bool no_children() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

class ChildProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("upsim-child-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ChildProcess, ArgumentsReachTheProgramVerbatimAndNothingRunsThem) {
  const std::string marker = (dir_ / "marker").string();
  const std::string text = "$(touch " + marker + ") `touch " + marker + "` '; touch " + marker +
                           "; ' \"a\nb\" | touch " + marker;
  const ChildProcessResult r = run_program({"printf", "%s", text});
  EXPECT_TRUE(r.succeeded()) << r.how_it_ended();
  EXPECT_EQ(r.stdout_bytes, text);
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_TRUE(no_children());
}

TEST_F(ChildProcess, ReportsExitStatusSignalAndStandardError) {
  const ChildProcessResult exit3 = run_program({"sh", "-c", "echo oops >&2; exit 3"});
  EXPECT_FALSE(exit3.succeeded());
  EXPECT_EQ(exit3.exit_status, 3);
  EXPECT_EQ(exit3.signal, 0);
  EXPECT_EQ(exit3.stderr_text, "oops\n");
  EXPECT_EQ(exit3.how_it_ended(), "exit status 3");
  const ChildProcessResult killed = run_program({"sh", "-c", "kill -KILL $$"});
  EXPECT_FALSE(killed.succeeded());
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_EQ(killed.how_it_ended(), "signal 9");
  EXPECT_TRUE(no_children());
}

TEST_F(ChildProcess, AMissingProgramIsAnErrorNamingIt) {
  try {
    run_program({"upsim-test-no-such-program"});
    FAIL() << "started a program that does not exist";
  } catch (const ChildProcessError& e) {
    EXPECT_TRUE(e.program_not_found());
    EXPECT_NE(std::string(e.what()).find("cannot start upsim-test-no-such-program: No such file"),
              std::string::npos)
        << e.what();
  }
  try {
    run_program({(dir_ / "missing").string()});
    FAIL();
  } catch (const ChildProcessError& e) {
    EXPECT_TRUE(e.program_not_found()) << e.what();
  }
  std::ofstream(dir_ / "plain") << "data\n";
  try {
    run_program({(dir_ / "plain").string()});
    FAIL();
  } catch (const ChildProcessError& e) {
    EXPECT_FALSE(e.program_not_found());
    EXPECT_NE(std::string(e.what()).find("Permission denied"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_program({}), std::invalid_argument);
  EXPECT_TRUE(no_children());
}

TEST_F(ChildProcess, StandardInputIsEmptyAndBothOutputsAreReadTogether) {
  EXPECT_EQ(run_program({"cat"}).stdout_bytes, "");
  // 1 MB on each stream: a reader draining one stream before the other would deadlock on the
  // pipe buffer; stderr keeps its first 64 KiB.
  const ChildProcessResult r =
      run_program({"sh", "-c", "head -c 1000000 /dev/zero >&2; head -c 1000000 /dev/zero"});
  EXPECT_TRUE(r.succeeded()) << r.how_it_ended();
  EXPECT_EQ(r.stdout_bytes.size(), 1000000u);
  EXPECT_EQ(r.stderr_text.size(), size_t{1} << 16);
  EXPECT_TRUE(r.stderr_truncated);
}

TEST_F(ChildProcess, OutputOverTheBoundStopsTheChild) {
  ChildProcessLimits limits;
  limits.max_stdout_bytes = 1000;
  try {
    run_program({"cat", "/dev/zero"}, limits);
    FAIL() << "read /dev/zero without bound";
  } catch (const ChildProcessError& e) {
    EXPECT_NE(std::string(e.what()).find("cat wrote more than 1000 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(no_children());
}

TEST_F(ChildProcess, ATimeoutStopsAChildThatRunsOn) {
  ChildProcessLimits limits;
  limits.timeout = std::chrono::milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(run_program({"sleep", "30"}, limits), ChildProcessError);
  // A child that closed its outputs and runs on is stopped too.
  EXPECT_THROW(run_program({"sh", "-c", "exec >/dev/null 2>&1; sleep 30"}, limits),
               ChildProcessError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(no_children());
}

TEST_F(ChildProcess, DescriptorsAndBlockedSignalsAreNotInherited) {
  // A descriptor without close-on-exec, as a library might leave one.
  const int fd = ::open((dir_ / "open").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::dup2(fd, 57), 57);
  const ChildProcessResult r =
      run_program({"sh", "-c", "if [ -e /proc/$$/fd/57 ]; then echo open; else echo closed; fi"});
  EXPECT_EQ(r.stdout_bytes, "closed\n");
  ::close(57);
  ::close(fd);
  // SIGTERM blocked here would stay blocked in a child that inherited the mask.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t old;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  ChildProcessLimits limits;
  limits.timeout = std::chrono::seconds(20);
  const ChildProcessResult t = run_program({"sh", "-c", "kill -TERM $$; sleep 10"}, limits);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(t.signal, SIGTERM) << t.how_it_ended();
}

}  // namespace
}  // namespace upsim::cli

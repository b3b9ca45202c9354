// What a run writes: regular files only (never through a symbolic link, never onto a device),
// the system's reason in every write error, no temporary file left after an error or after
// SIGINT / SIGTERM (exit status 130 / 143).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tools/interrupt_cleanup.h"
#include "tools/output_folder.h"

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

}  // namespace
}  // namespace upsim::cli

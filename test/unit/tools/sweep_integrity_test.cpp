// `upsim sweep` as a user runs it, for what a sweep must never do: report a stale or damaged row
// as valid (its scenario or a file it references changed, the row was edited, truncated or glued,
// a pipe sits at its name), write outside its folder or into a folder that is not a sweep's,
// follow a planted symbolic link, silently ignore a key, miscount statuses, drop a warning, or
// abort when threads cannot be started.
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::string kConfigs = UPSIM_CONFIGS_DIR;
const std::string kData = UPSIM_CLI_TEST_DATA;

struct Result {
  int exit_code = -1;  // 128 + signal when killed; 124 when it ran past the time limit
  std::string out;
  std::string err;
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

/// How the child runs: as a user of its own under RLIMIT_NPROC (root is exempt from that limit,
/// so a root test first becomes a uid no other process uses).
struct Limits {
  std::optional<rlim_t> processes;
};

constexpr int kCannotLimit = 77;

/// Runs `upsim <args>` in `cwd` (fork and execv: no shell), stdout and stderr captured; killed
/// after 120 s (exit code 124), so that a hang fails the test instead of the suite.
Result upsim(const std::vector<std::string>& args, const fs::path& cwd, const Limits& limits = {}) {
  const fs::path out_file = cwd / ".upsim-test-stdout";
  const fs::path err_file = cwd / ".upsim-test-stderr";
  // The same user for every run of this test process, so that a run can resume another's folder.
  const uid_t uid = static_cast<uid_t>(40000 + ::getpid() % 20000);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
    if (limits.processes) {
      if (::geteuid() == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) {
          ::_exit(kCannotLimit);
        }
      }
      const rlimit limit{*limits.processes, *limits.processes};
      if (::setrlimit(RLIMIT_NPROC, &limit) != 0) ::_exit(kCannotLimit);
      // A sanitized build's leak check runs on a thread of its own at exit, which the limit
      // forbids; it checks every other run.
      const char* asan = std::getenv("ASAN_OPTIONS");
      const std::string options =
          (asan != nullptr ? std::string(asan) + ":" : "") + "detect_leaks=0";
      ::setenv("ASAN_OPTIONS", options.c_str(), 1);
    }
    std::vector<std::string> argv_text{UPSIM_BINARY};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_text)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(UPSIM_BINARY, argv.data());
    ::_exit(127);
  }
  Result r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.exit_code = 124;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.exit_code != 124) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  r.out = read_file(out_file);
  r.err = read_file(err_file);
  fs::remove(out_file);
  fs::remove(err_file);
  return r;
}

/// Splits a CSV line into fields (quoted fields with "" inside, as csv_field writes them).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::vector<std::vector<std::string>> csv_rows(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);)
    rows.push_back(csv_fields(line));
  return rows;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// A 2-GPU DLRM whose host overheads and GPU profile are files of the test folder, so that a test
/// can change them.
constexpr const char* kHostOverheads =
    "t1: 2.869us\nt4: 5.651us\ndefault: {t2: 11.41us, t3: 5.509us, t5: 4.121us, body: 1.479us}\n";

std::string scenario_text(int global_batch) {
  return fmt::format(
      "name: tiny_local\n"
      "platform:\n"
      "  gpus: 2\n"
      "  gpu: hw/gpu.yaml\n"
      "  kernels: {{model: roofline}}\n"
      "  host: {{model: host_overheads, overheads: host.yaml}}\n"
      "  interconnect: {{model: alpha_beta, link: nvlink3}}\n"
      "workload:\n"
      "  model: dlrm\n"
      "  global_batch: {}\n"
      "  bottom_mlp: [16, 32]\n"
      "  top_mlp: [16, 1]\n"
      "  embeddings:\n"
      "    dim: 32\n"
      "    tables:\n"
      "      - {{count: 4, rows: 1000, pooling: 2}}\n"
      "simulation:\n"
      "  iterations: 2\n"
      "  warmup_iterations: 1\n",
      global_batch);
}

class SweepIntegrity : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-sweep-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "hw");
    // A test run as another user (Limits) writes here too.
    fs::permissions(dir_, fs::perms::all);
    fs::copy_file(kConfigs + "/hardware/a100_sxm4_40gb.yaml", dir_ / "hw" / "gpu.yaml");
    write_file(dir_ / "host.yaml", kHostOverheads);
    write_file(dir_ / "base.yaml", scenario_text(256));
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result run(const std::vector<std::string>& args, const Limits& limits = {}) {
    return upsim(args, dir_, limits);
  }
  /// A one-axis study of base.yaml with `batches` global batches.
  void write_study(const fs::path& file, const std::string& batches) {
    write_file(
        file, "study: local\nbase: base.yaml\naxes:\n  workload.global_batch: [" + batches + "]\n");
  }
  fs::path dir_;
};

// A resumed sweep whose base scenario (or a file it references) changed since
// its rows were written runs those points again and says why; its table is a fresh sweep's.
TEST_F(SweepIntegrity, AResumeRunsAgainThePointsWhoseScenarioChanged) {
  write_study(dir_ / "study.yaml", "256, 512");
  const Result first = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string before = read_file(dir_ / "s" / "results.csv");

  // A referenced file (the host overheads) changes: both points run again, named.
  write_file(dir_ / "host.yaml",
             "t1: 2.869us\nt4: 50us\ndefault: {t2: 11.41us, t3: 5.509us, t5: 4.121us, "
             "body: 1.479us}\n");
  const Result host = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_TRUE(contains(host.err,
                       "points 0-1: their scenario changed since their rows were "
                       "written (host.yaml); running them again"))
      << host.err;
  EXPECT_TRUE(contains(host.out, "(2 run now, 0 resumed)")) << host.out;
  const std::string after = read_file(dir_ / "s" / "results.csv");
  EXPECT_NE(after, before);
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "fresh"}).exit_code, 0);
  EXPECT_EQ(after, read_file(dir_ / "fresh" / "results.csv"));

  // The base scenario itself, and a file the GPU profile is: one message per point set.
  write_file(dir_ / "base.yaml", scenario_text(256) + "# edited\n");
  std::ofstream(dir_ / "hw" / "gpu.yaml", std::ios::app) << "# edited\n";
  const Result both = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_TRUE(contains(both.err, "(base.yaml, hw/gpu.yaml)")) << both.err;
  // Nothing changed since: everything resumes.
  const Result again = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.out, "(0 run now, 2 resumed)")) << again.out;
  EXPECT_FALSE(contains(again.err, "changed")) << again.err;

  // The manifest records each point's content hash and the upsim version that wrote it.
  const std::string manifest = read_file(dir_ / "s" / "study.points");
  EXPECT_TRUE(contains(manifest, "version\t")) << manifest;
  EXPECT_TRUE(contains(manifest, "point\t1\t")) << manifest;
}

// A point whose override names a file relative to the study runs again when that file changes.
TEST_F(SweepIntegrity, AFileNamedByAnAxisValueIsPartOfThePointsScenario) {
  fs::copy_file(dir_ / "hw" / "gpu.yaml", dir_ / "hw" / "other.yaml");
  write_file(dir_ / "study.yaml",
             "base: base.yaml\naxes:\n  platform.gpu: [hw/gpu.yaml, hw/other.yaml]\n");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s"}).exit_code, 0);
  std::ofstream(dir_ / "hw" / "other.yaml", std::ios::app) << "# edited\n";
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "point 1: its scenario changed since its row was written "
                       "(hw/other.yaml); running it again"))
      << r.err;
  EXPECT_TRUE(contains(r.out, "(1 run now, 1 resumed)")) << r.out;
}

// Another upsim version wrote the folder: every point runs again, said once.
TEST_F(SweepIntegrity, AnotherUpsimVersionRunsEveryPointAgain) {
  write_study(dir_ / "study.yaml", "256, 512");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s"}).exit_code, 0);
  std::string manifest = read_file(dir_ / "s" / "study.points");
  const size_t at = manifest.find("version\t");
  ASSERT_NE(at, std::string::npos) << manifest;
  manifest.replace(at, manifest.find('\n', at) - at, "version\t0.0.1");
  write_file(dir_ / "s" / "study.points", manifest);
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "was written by upsim 0.0.1")) << r.err;
  EXPECT_TRUE(contains(r.err, "running every point again")) << r.err;
  EXPECT_TRUE(contains(r.out, "(2 run now, 0 resumed)")) << r.out;
}

// Edited, truncated and glued rows are run again and named; the table is the fresh one.
TEST_F(SweepIntegrity, DamagedRowsAreRunAgainAndNamed) {
  write_study(dir_ / "study.yaml", "128, 256, 512, 1024");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s"}).exit_code, 0);
  const std::string table = read_file(dir_ / "s" / "results.csv");
  const fs::path points = dir_ / "s" / "points";
  // Edited: the iteration time replaced by another number of the same length.
  std::string edited = read_file(points / "0.row");
  const std::string time = csv_rows(table)[1][3];
  const size_t at = edited.rfind(time);
  ASSERT_NE(at, std::string::npos) << edited;
  char& digit = edited[at + time.size() - 1];
  digit = digit == '1' ? '2' : '1';
  write_file(points / "0.row", edited);
  // Truncated, glued to another row, emptied.
  const std::string row1 = read_file(points / "1.row");
  write_file(points / "1.row", row1.substr(0, row1.size() - 10));
  write_file(points / "2.row", read_file(points / "2.row") + read_file(points / "3.row"));
  write_file(points / "3.row", "");
  fs::remove(dir_ / "s" / "results.csv");
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i : {0, 1, 2, 3})
    EXPECT_TRUE(contains(r.err, fmt::format("points/{}.row is damaged", i))) << r.err;
  EXPECT_TRUE(contains(r.out, "(4 run now, 0 resumed)")) << r.out;
  EXPECT_EQ(read_file(dir_ / "s" / "results.csv"), table);
}

// A pipe, a symbolic link or a folder at a row's name is never read (a pipe hung the sweep): the
// sweep refuses, naming it.
TEST_F(SweepIntegrity, ANonRegularRowIsNamedAndRefusedWithoutReadingIt) {
  write_study(dir_ / "study.yaml", "128, 256");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s"}).exit_code, 0);
  const fs::path row = dir_ / "s" / "points" / "1.row";
  write_file(dir_ / "elsewhere.row", read_file(row));
  const auto expect_refused = [&](const std::string& what) {
    const Result r = run({"sweep", "study.yaml", "--out", "s"});
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "points/1.row is " + what)) << r.err;
  };
  fs::remove(row);
  ASSERT_EQ(::mkfifo(row.c_str(), 0644), 0);
  expect_refused("a named pipe");
  fs::remove(row);
  fs::create_symlink(dir_ / "elsewhere.row", row);
  expect_refused("a symbolic link");
  fs::remove(row);
  fs::create_directories(row);
  expect_refused("a folder");
  // A refusal leaves the manifest as it was: here the version it records.
  const fs::path manifest = dir_ / "s" / "study.points";
  std::string older = read_file(manifest);
  const size_t at = older.find("version\t");
  ASSERT_NE(at, std::string::npos) << older;
  older.replace(at, older.find('\n', at) - at, "version\t0.0.1");
  write_file(manifest, older);
  expect_refused("a folder");
  EXPECT_EQ(read_file(manifest), older);
  fs::remove_all(row);
  const Result after = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_TRUE(contains(after.err, "was written by upsim 0.0.1")) << after.err;
  // The manifest itself, not read either.
  fs::remove(manifest);
  ASSERT_EQ(::mkfifo(manifest.c_str(), 0644), 0);
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "study.points is a named pipe")) << r.err;
}

// A study name is one folder name under upsim-out/: never a path.
TEST_F(SweepIntegrity, AStudyNameThatIsNotOneFolderNameIsRefusedNamingTheKey) {
  fs::create_directories(dir_ / "victim");
  write_file(dir_ / "victim" / "results.csv", "mine\n");
  for (const std::string& name :
       {(dir_ / "victim").string(), std::string("../victim"), std::string("a/b"),
        std::string("a\\\\b"), std::string("."), std::string(".."), std::string(""),
        std::string("-rf"), std::string("tab\\there")}) {
    write_file(dir_ / "study.yaml",
               "study: \"" + name + "\"\nbase: base.yaml\naxes:\n  workload.global_batch: [128]\n");
    const Result r = run({"sweep", "study.yaml"});
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "study.yaml:1: study: ")) << name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "one folder name")) << name << ": " << r.err;
  }
  EXPECT_EQ(read_file(dir_ / "victim" / "results.csv"), "mine\n");
  EXPECT_FALSE(fs::exists(dir_ / "victim" / "results.h5"));
  // A good name is the folder under upsim-out/.
  write_file(dir_ / "study.yaml",
             "study: my study\nbase: base.yaml\naxes:\n  workload.global_batch: [128]\n");
  const Result ok = run({"sweep", "study.yaml"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(dir_ / "upsim-out" / "my study" / "results.csv"));
}

// --out on a folder that holds something else than a sweep is refused unless --force, and
// --force replaces only a sweep's own files there.
TEST_F(SweepIntegrity, AFolderThatIsNotASweepsIsNotWrittenIntoUnasked) {
  write_study(dir_ / "study.yaml", "128");
  fs::create_directories(dir_ / "mine" / "points");
  write_file(dir_ / "mine" / "results.csv", "my results\n");
  write_file(dir_ / "mine" / "notes.txt", "my notes\n");
  write_file(dir_ / "mine" / "points" / "mine.txt", "my points\n");
  const Result refused = run({"sweep", "study.yaml", "--out", "mine"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_TRUE(contains(refused.err, "holds no sweep")) << refused.err;
  EXPECT_EQ(read_file(dir_ / "mine" / "results.csv"), "my results\n");
  EXPECT_FALSE(fs::exists(dir_ / "mine" / "results.h5"));
  EXPECT_FALSE(fs::exists(dir_ / "mine" / "study.points"));

  const Result forced = run({"sweep", "study.yaml", "--out", "mine", "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(read_file(dir_ / "mine" / "results.csv"), "my results\n");
  EXPECT_EQ(read_file(dir_ / "mine" / "notes.txt"), "my notes\n");
  EXPECT_EQ(read_file(dir_ / "mine" / "points" / "mine.txt"), "my points\n");

  // --force on a sweep folder of another study clears that study's points, nothing else.
  write_study(dir_ / "other.yaml", "256, 512");
  const Result other = run({"sweep", "other.yaml", "--out", "mine", "--force"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_TRUE(contains(other.out, "(2 run now, 0 resumed)")) << other.out;
  EXPECT_EQ(read_file(dir_ / "mine" / "notes.txt"), "my notes\n");
  EXPECT_EQ(read_file(dir_ / "mine" / "points" / "mine.txt"), "my points\n");

  // An empty folder is fine without --force.
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(run({"sweep", "study.yaml", "--out", "empty"}).exit_code, 0);
}

// results.h5 is written through results.h5.tmp like every other output: a symbolic link planted
// there is refused, and its target is untouched (libhdf5 opened the path and followed it).
TEST_F(SweepIntegrity, ASymbolicLinkPlantedAtTheHdf5TemporaryNameIsNotFollowed) {
  write_study(dir_ / "study.yaml", "128");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s"}).exit_code, 0);
  const std::string h5 = read_file(dir_ / "s" / "results.h5");
  write_file(dir_ / "victim.txt", "keep\n");
  fs::create_symlink(dir_ / "victim.txt", dir_ / "s" / "results.h5.tmp");
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "results.h5.tmp is a symbolic link")) << r.err;
  EXPECT_TRUE(read_file(dir_ / "victim.txt") == "keep\n") << "the symbolic link was followed";
  EXPECT_TRUE(fs::is_symlink(dir_ / "s" / "results.h5.tmp"));
  // Removed, the same table gives the same bytes again.
  fs::remove(dir_ / "s" / "results.h5.tmp");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s"}).exit_code, 0);
  EXPECT_TRUE(read_file(dir_ / "s" / "results.h5") == h5) << "other bytes for the same table";
}

// The same key varied in two places (axes and zip, two zip groups, set and an axis) is refused
// naming both; before, one of them was silently ignored.
TEST_F(SweepIntegrity, AKeyVariedInTwoPlacesIsRefusedNamingBoth) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"axes:\n  workload.global_batch: [128, 256]\nzip:\n  - workload.global_batch: [512]\n"
       "    workload.embeddings.dim: [16]\n",
       {"zip[0].workload.global_batch", "axes.workload.global_batch (line 4)"}},
      {"zip:\n  - workload.global_batch: [128]\n  - workload.global_batch: [256]\n",
       {"zip[1].workload.global_batch", "zip[0].workload.global_batch (line 4)"}},
      {"set:\n  workload.global_batch: 64\naxes:\n  workload.global_batch: [128, 256]\n",
       {"axes.workload.global_batch", "set.workload.global_batch (line 4)"}},
      // The same key spelt with an index in brackets.
      {"axes:\n  workload.embeddings.tables.0.pooling: [1, 2]\n"
       "  workload.embeddings.tables[0].pooling: [4]\n",
       {"axes.workload.embeddings.tables[0].pooling",
        "axes.workload.embeddings.tables.0.pooling (line 4)"}},
  };
  for (const auto& [text, expected] : cases) {
    write_file(dir_ / "study.yaml", "study: twice\nbase: base.yaml\n" + text);
    const Result r = run({"sweep", "study.yaml", "--out", "s"});
    EXPECT_EQ(r.exit_code, 2) << text << r.err;
    for (const std::string& e : expected)
      EXPECT_TRUE(contains(r.err, e)) << e << " missing in " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "s")) << text;
  }
}

// Axis values `failed` and `skipped` are values, not statuses: the count reads each row's status.
TEST_F(SweepIntegrity, StatusesAreCountedFromTheStatusColumn) {
  write_file(dir_ / "study.yaml",
             "base: base.yaml\naxes:\n  name: [failed, skipped, ok]\n"
             "  workload.global_batch: [128, oops]\n");
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // the `oops` points fail
  EXPECT_TRUE(contains(r.out, "6 points (6 run now, 0 resumed): 3 ok, 0 skipped, 3 failed"))
      << r.out;
  write_file(dir_ / "ok.yaml", "base: base.yaml\naxes:\n  name: [failed, skipped]\n");
  const Result ok = run({"sweep", "ok.yaml", "--out", "ok"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_TRUE(contains(ok.out, "2 ok, 0 skipped, 0 failed")) << ok.out;
}

// A point that `upsim run` warns about is `ok` with the warning in its message.
TEST_F(SweepIntegrity, APointsWarningsAreInItsRowsMessage) {
  write_file(dir_ / "study.yaml",
             "base: base.yaml\naxes:\n"
             "  workload.embeddings.tables.0.sharding_type: [table_wise, table_row_wise]\n");
  const Result r = run({"sweep", "study.yaml", "--out", "s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = csv_rows(read_file(dir_ / "s" / "results.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1][2], "ok");
  EXPECT_EQ(rows[1].back(), "");
  EXPECT_EQ(rows[2][2], "ok");
  EXPECT_TRUE(contains(rows[2].back(),
                       "warning: table_row_wise tables without platform.topology: the 2 GPUs "
                       "count as one node"))
      << rows[2].back();
}

// --point-outputs on a resume: the resumed points without their own outputs run again, said so.
TEST_F(SweepIntegrity, PointOutputsOnAResumeRunThePointsWithoutThem) {
  write_study(dir_ / "study.yaml", "128, 256, 512");
  ASSERT_EQ(run({"sweep", "study.yaml", "--out", "s", "--point-outputs"}).exit_code, 0);
  fs::remove_all(dir_ / "s" / "points" / "1");
  const Result r = run({"sweep", "study.yaml", "--out", "s", "--point-outputs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "point 1: --point-outputs: its own outputs (points/1/) are missing; "
                       "running it again"))
      << r.err;
  EXPECT_TRUE(contains(r.out, "(1 run now, 2 resumed)")) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "s" / "points" / "1" / "summary.json"));

  write_study(dir_ / "plain.yaml", "128, 256");
  ASSERT_EQ(run({"sweep", "plain.yaml", "--out", "p"}).exit_code, 0);
  const Result p = run({"sweep", "plain.yaml", "--out", "p", "--point-outputs"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(contains(p.err, "points 0-1: --point-outputs: their own outputs")) << p.err;
  EXPECT_TRUE(fs::exists(dir_ / "p" / "points" / "0" / "summary.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "p" / "points" / "1" / "summary.txt"));
}

// -j far above what the system lets the process start: the sweep goes on with the threads it
// got, never SIGABRT; with none at all, an error naming the cause; the workers are capped at the
// points left, so a resume with one point left needs no thread.
TEST_F(SweepIntegrity, ManyJobsSurviveTheThreadLimit) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs a user of its own (root) for an exact limit";
  write_study(dir_ / "study.yaml", "128, 256, 512, 1024, 2048, 4096");
  const Result some = run({"sweep", "study.yaml", "--out", "s", "-j", "3000"}, {3});
  if (some.exit_code == kCannotLimit) GTEST_SKIP() << "cannot change user";
  ASSERT_EQ(some.exit_code, 0) << some.err;
  EXPECT_TRUE(contains(some.out, "6 ok")) << some.out;

  fs::remove(dir_ / "s" / "points" / "4.row");
  const Result one_left = run({"sweep", "study.yaml", "--out", "s", "-j", "3000"}, {1});
  ASSERT_EQ(one_left.exit_code, 0) << one_left.err;
  EXPECT_TRUE(contains(one_left.out, "(1 run now, 5 resumed)")) << one_left.out;

  const Result none = run({"sweep", "study.yaml", "--out", "t", "-j", "3000"}, {1});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_TRUE(
      contains(none.err, "upsim: error: cannot start a thread: Resource temporarily unavailable"))
      << none.err;
}

}  // namespace

// upsim as a user runs it on files of the wrong kind: every error names the file and what was
// expected, exits non-zero, and quotes none of the file's content (the fixtures of
// data/input_errors/ carry a marker in every line and field: a passwd-like text file and a CSV of
// accounts). DLRM table statistics at the command line: a tables_file table that fits no GPU,
// pooling 0 with Zipf accesses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(UPSIM_CLI_TEST_DATA) / "input_errors";
const fs::path kConfigs = UPSIM_CONFIGS_DIR;
const fs::path kPasswd = kData / "passwd_like";
const fs::path kAccounts = kData / "accounts.csv";
/// In every line and field of the fixtures; never in an error message.
constexpr const char* kCanary = "canary";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout, then stderr
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class InputErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-input-errors-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs upsim with `args` (an argument vector: no shell) in the test's folder.
  Result run(const std::vector<std::string>& args) {
    const fs::path out = dir_ / "stdout.txt";
    const fs::path err = dir_ / "stderr.txt";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&actions, dir_.c_str());
    std::vector<std::string> all{UPSIM_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    Result r;
    if (posix_spawn(&pid, UPSIM_BINARY, &actions, nullptr, argv.data(), environ) == 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    posix_spawn_file_actions_destroy(&actions);
    r.output = read_file(out) + read_file(err);
    return r;
  }

  /// `args` fail with a message that names `file` and says `expected`, quoting no fixture text.
  void expect_described(const std::vector<std::string>& args, const fs::path& file,
                        const std::string& expected) {
    std::string command = "upsim";
    for (const std::string& a : args)
      command += " " + a;
    const Result r = run(args);
    EXPECT_NE(r.exit_code, 0) << command << "\n" << r.output;
    EXPECT_LT(r.exit_code, 128) << command << " ended by a signal\n" << r.output;
    EXPECT_NE(r.output.find(file.string()), std::string::npos) << command << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << command << "\n" << r.output;
    EXPECT_EQ(r.output.find(kCanary), std::string::npos) << command << " quotes the file\n"
                                                         << r.output;
  }

  fs::path dir_;
};

/// `upsim run` of `scenario` with these overrides.
std::vector<std::string> run_with(const std::string& scenario, std::vector<std::string> sets) {
  std::vector<std::string> args{
      "run", (kConfigs / scenario).string(), "--out", "out", "--force", "--no-trace", "--quiet"};
  for (std::string& s : sets) {
    args.push_back("--set");
    args.push_back(std::move(s));
  }
  return args;
}

// A text file given as the scenario or the study itself.
TEST_F(InputErrors, PlainTextGivenAsTheScenarioOrStudyIsDescribedNotQuoted) {
  expect_described({"run", kPasswd.string(), "--out", "out", "--no-trace"}, kPasswd,
                   "expected a YAML map (a scenario: platform and workload sections), got plain "
                   "text (a YAML scalar)");
  expect_described({"sweep", kPasswd.string(), "--out", "out"}, kPasswd,
                   "expected a YAML map (a study: a base scenario and its axes or zip), got "
                   "plain text (a YAML scalar)");
}

// Every file a scenario references, given a text file (as --set platform.gpu=/etc/passwd).
TEST_F(InputErrors, PlainTextWhereAScenarioReferencesAFileIsDescribedNotQuoted) {
  const std::string p = kPasswd.string();
  expect_described(run_with("gpt2_4gpu.yaml", {"platform.gpu=" + p}), kPasswd,
                   "platform.gpu: expected a YAML map (a GPU hardware profile), got plain text "
                   "(a YAML scalar)");
  expect_described(run_with("dlrm_4gpu.yaml", {"platform.topology=" + p}), kPasswd,
                   "platform.topology: expected a YAML map (a fabric");
  expect_described(run_with("dlrm_4gpu.yaml", {"platform.kernels.calibration=" + p}), kPasswd,
                   "expected a YAML map (a kernel calibration");
  expect_described(run_with("dlrm_4gpu.yaml", {"platform.host.overheads=" + p}), kPasswd,
                   "expected a YAML map (host overheads");
  expect_described(run_with("dlrm_4gpu.yaml", {"platform.interconnect.tuning=" + p}), kPasswd,
                   "expected a YAML map (a collective tuning");
  expect_described(
      run_with("dlrm_4gpu.yaml", {"workload.sharding=plan", "workload.sharding_plan=" + p}),
      kPasswd, "expected a YAML map (a sharding plan");
  expect_described(run_with("dlrm_4gpu.yaml", {"workload.embeddings.tables=null",
                                               "workload.embeddings.tables_file=" + p}),
                   kPasswd, "expected a YAML map (a tables file");
  // The scenario itself.
  expect_described({"run", p, "--out", "out"}, kPasswd, "plain text (a YAML scalar)");
}

// A CSV where a YAML map is expected: its header and fields are not quoted.
TEST_F(InputErrors, ACsvWhereAYamlMapIsExpectedIsDescribedNotQuoted) {
  const std::string csv = kAccounts.string();
  expect_described(run_with("gpt2_4gpu.yaml", {"platform.gpu=" + csv}), kAccounts,
                   "expected a YAML map (a GPU hardware profile), got a CSV table (2 rows under "
                   "a header)");
  expect_described(run_with("dlrm_4gpu.yaml", {"platform.topology=" + csv}), kAccounts,
                   "got a CSV table");
  expect_described(
      run_with("dlrm_4gpu.yaml", {"workload.sharding=plan", "workload.sharding_plan=" + csv}),
      kAccounts, "got a CSV table");
  // A CSV given as tables: its rows lack the keys a table needs.
  expect_described(run_with("dlrm_4gpu.yaml", {"workload.embeddings.tables=null",
                                               "workload.embeddings.tables_file=" + csv}),
                   kAccounts, "missing required key `rows`");
  // Where a file is read as YAML directly, a CSV is plain text.
  expect_described({"calibrate", "kernels", "--out", "k.yaml", "--hardware", csv}, kAccounts,
                   "expected a YAML map (a GPU hardware profile), got plain text");
}

// The measurement, calibration and trace commands given a file of another kind.
TEST_F(InputErrors, CommandsGivenAFileOfAnotherKindDescribeIt) {
  const std::string p = kPasswd.string();
  const std::string csv = kAccounts.string();
  expect_described({"calibrate", "launch", "--csv", p}, kPasswd,
                   "expected the header `quantity,bytes,time_us`");
  expect_described({"calibrate", "launch", "--csv", csv}, kAccounts,
                   "expected the header `quantity,bytes,time_us`");
  expect_described({"convert", "kernels", "--out", "k.h5", "--csv", csv}, kAccounts,
                   "missing column `op`");
  expect_described({"calibrate", "kernels", "--out", "k.yaml", "--hardware", p}, kPasswd,
                   "expected a YAML map (a GPU hardware profile), got plain text");
  expect_described({"validate", "kernels", "--calibration", p, "--hardware",
                    (kConfigs / "hardware" / "a100_sxm4_80gb.yaml").string()},
                   kPasswd, "expected a YAML map (a kernel calibration");
  expect_described({"validate", "collectives", "--tuning", p, "--configs", kConfigs.string()},
                   kPasswd, "expected a YAML map (a collective tuning");
  expect_described(
      {"calibrate", "collectives", "--topology", p, "--nccl-tests", p, "--out", "c.yaml"}, kPasswd,
      "");
  expect_described({"calibrate", "host-overheads", p, "--out", "h.yaml"}, kPasswd, "not JSON");
  expect_described({"convert", "kernels", "--out", "k.h5", "--hdf5", p}, kPasswd,
                   "not an HDF5 file");
}

// A tables_file table too big for any GPU: named in the file, with the key that sets the memory
// (it said "missing required key `tables`").
TEST_F(InputErrors, ATablesFileTableThatFitsNoGpuIsNamedInTheFile) {
  const fs::path tables = kData / "tables_too_big.yaml";
  const Result r =
      run(run_with("dlrm_4gpu.yaml", {"workload.embeddings.tables=null",
                                      "workload.embeddings.tables_file=" + tables.string()}));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(tables.string() + ":4: workload.embeddings.tables_file.tables[1]: "
                                            "table 2 (400000000000 rows x dim 128"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("platform.table_memory_fraction = 0.8 of A100-SXM4-40GB's"),
            std::string::npos)
      << r.output;
}

// Pooling 0 is a table without lookups whatever its access law: with access: zipf it runs, and
// costs what the same table with uniform accesses does (it was "reuse histogram sums to 0").
TEST_F(InputErrors, PoolingZeroWithZipfAccessesRunsAsAnEmptyLookup) {
  const auto iteration_time = [&](const std::string& first_group) {
    const Result r = run(run_with("dlrm_4gpu.yaml", {"workload.embeddings.tables=[" + first_group +
                                                     ", {count: 3, rows: 100000, pooling: 4}]"}));
    EXPECT_EQ(r.exit_code, 0) << first_group << "\n" << r.output;
    std::smatch m;
    const std::string summary = read_file(dir_ / "out" / "summary.txt");
    EXPECT_TRUE(std::regex_search(summary, m, std::regex("predicted iteration time: ([0-9.]+ ms)")))
        << summary;
    return m.size() > 1 ? m[1].str() : std::string();
  };
  const std::string zipf =
      iteration_time("{count: 2, rows: 100000, pooling: 0, access: zipf, zipf_alpha: 1.1}");
  const std::string uniform = iteration_time("{count: 2, rows: 100000, pooling: 0}");
  EXPECT_FALSE(zipf.empty());
  EXPECT_EQ(zipf, uniform);
}

// The documented range of pooling at the command line.
TEST_F(InputErrors, PoolingOutsideItsRangeIsAConfigErrorAtItsKey) {
  const Result r = run(run_with(
      "dlrm_4gpu.yaml", {"workload.embeddings.tables=[{count: 4, rows: 1000, pooling: 1e300}]"}));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--set workload.embeddings.tables[0].pooling: must be between 0 and "
                          "1e+06, got 1e+300"),
            std::string::npos)
      << r.output;
}

}  // namespace

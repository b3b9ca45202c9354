// `upsim plot` and `upsim diff` on hostile inputs, through the executable as a user runs it:
// nothing a results table, a run folder, a file or study name says is ever executed (gnuplot
// expands backquotes in double-quoted strings; a shell runs what a quote lets out); outputs are
// never written through a link or over an existing file without --force; a FIFO or a device as
// an input is an error naming it, never a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/child_process.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const std::string kData = UPSIM_CLI_TEST_DATA;

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// The first executable `name` on PATH, or "".
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

/// The results-table header of `upsim sweep` after the axis columns.
const std::string kResultColumns =
    "status,iteration_ms,compute_ms,communication_ms,exposed_comm_ms,bubble_ms,"
    "rendezvous_wait_ms,cpu_bound_idle_ms,other_idle_ms,memory_bytes_per_gpu,busiest_link,"
    "busiest_link_busy_ms,message";
const std::string kOkResults = "ok,1.5,0.25,0.01,0.01,0,0,1.2,0.04,1000,,,";

/// A CSV field (quoted, quotes doubled).
std::string field(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

/// Texts that run `touch pwned-<tag>-...` in the working folder if anything interprets them:
/// gnuplot backquotes, a shell's $( ) and quotes, gnuplot's system() from a broken-out string.
std::vector<std::string> payloads(const std::string& tag) {
  return {
      "x`touch pwned-" + tag + "-bt`",
      "a'$(touch pwned-" + tag + "-sh)'",
      "\"; system(\"touch pwned-" + tag + "-dq\"); \"",
      "'; system('touch pwned-" + tag + "-sq'); '",
      "x@GPVAL_TERM @ARG0",
      "EOD",
      "cr\r; system('touch pwned-" + tag + "-cr')\x0c\x0b;",
      "ends in a backslash \\",
  };
}

class CommandSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-plot-safety-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // upsim, gnuplot and any command a payload would run work in dir_: a marker lands there.
    old_cwd_ = fs::current_path();
    fs::current_path(dir_);
  }
  void TearDown() override {
    if (dir_.empty()) return;
    fs::current_path(old_cwd_);
    fs::remove_all(dir_);
  }

  /// `upsim args...` in dir_; a run past 30 s (a hang) fails the test. Outside sanitizer builds
  /// the address space is bounded (a reader of /dev/zero must fail, not take the machine).
  Outcome upsim(std::vector<std::string> args) {
    std::vector<std::string> argv;
#ifndef UPSIM_SANITIZED
    const std::string prlimit = on_path("prlimit");
    if (!prlimit.empty()) argv = {prlimit, "--as=4294967296", "--"};
#endif
    argv.push_back(UPSIM_BINARY);
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcessLimits limits;
    limits.timeout = std::chrono::seconds(30);
    Outcome r;
    try {
      const ChildProcessResult c = run_program(argv, limits);
      r.exit_code = c.signal != 0 ? 128 + c.signal : c.exit_status;
      r.out = c.stdout_bytes;
      r.err = c.stderr_text;
    } catch (const ChildProcessError& e) {
      r.err = e.what();
      ADD_FAILURE() << "upsim did not finish: " << e.what();
    }
    return r;
  }

  /// Every marker a payload created.
  std::vector<std::string> markers() const {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("pwned-", 0) == 0) found.push_back(name);
    }
    return found;
  }

  /// A results table with hostile axis column names and values, numbers elsewhere.
  std::string hostile_results() const {
    std::string t = "point," + field(kX) + "," + field(kOther) + "," + kResultColumns + "\n";
    int point = 0;
    for (const std::string& x : payloads("cell")) {
      for (const std::string& o : {std::string("plain"), payloads("other")[point % 8]}) {
        t += fmt::format("{},{},{},{}\n", point++, field(x), field(o), kOkResults);
      }
    }
    return t;
  }

  /// A run folder of the tiny DLRM whose rank and link names are hostile.
  void hostile_run_folder(const fs::path& run) {
    const Outcome r = upsim({"run", kData + "/tiny.yaml", "--out", run.string(), "--no-trace"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream ranks(read_file(run / "ranks.csv"));
    std::string line;
    std::getline(ranks, line);
    std::string table = line + "\n";
    int i = 0;
    while (std::getline(ranks, line)) {
      const size_t rank_end = line.find(',');
      const size_t name_end = line.find(',', rank_end + 1);
      table += line.substr(0, rank_end + 1) + field(payloads("rank")[i++ % 8]) +
               line.substr(name_end) + "\n";
    }
    write_file(run / "ranks.csv", table);
    std::string links = "name,capacity_gbytes_per_s,bytes_per_iteration,busy_ms_per_iteration\n";
    for (const std::string& name : payloads("link"))
      links += field(name) + ",300,1000,0.5\n";
    write_file(run / "links.csv", links);
  }

  const std::string kX = "x`touch pwned-header-bt`'$(touch pwned-header-sh)'";
  const std::string kOther = "o\"; system(\"touch pwned-header-dq\"); \"";
  fs::path dir_;
  fs::path old_cwd_;
};

/// The cases that draw, and so need gnuplot.
class PlotSafety : public CommandSafety {
 protected:
  void SetUp() override {
    if (on_path("gnuplot").empty()) {
      GTEST_SKIP() << "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)";
    }
    CommandSafety::SetUp();
  }
};

TEST_F(PlotSafety, ResultsTableCellsHeadersAndFileNamesAreNeverExecuted) {
  // The file name, too, holds quotes, backquotes, $( ) and a line break.
  const std::string name =
      "r`touch pwned-file-bt`'$(touch pwned-file-sh)'\nsystem('touch "
      "pwned-file-nl')\n\"x.csv";
  write_file(dir_ / name, hostile_results());
  const std::string out = "out`touch pwned-out-bt`'$(touch pwned-out-sh)'";
  const Outcome r = upsim({"plot", name, "--x", kX, "--out", out});
  EXPECT_EQ(markers(), std::vector<std::string>{});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string stem = name.substr(0, name.size() - 4);
  const std::string iteration = read_file(dir_ / out / (stem + "_iteration.svg"));
  const std::string breakdown = read_file(dir_ / out / (stem + "_breakdown.svg"));
  EXPECT_NE(iteration.find("<svg"), std::string::npos);
  EXPECT_NE(breakdown.find("<svg"), std::string::npos);
  // Labels are shown as written (XML-escaped by gnuplot), not expanded.
  EXPECT_NE(iteration.find("x@GPVAL_TERM @ARG0"), std::string::npos);
  EXPECT_NE(iteration.find("x`touch pwned-cell-bt`"), std::string::npos);
  EXPECT_NE(breakdown.find("exposed comm"), std::string::npos);  // a part, without its _ms
}

TEST_F(PlotSafety, RunFolderNamesAreNeverExecuted) {
  const fs::path run = "run`touch pwned-dir-bt`'$(touch pwned-dir-sh)'";
  hostile_run_folder(run);
  const Outcome r = upsim({"plot", run.string()});
  EXPECT_EQ(markers(), std::vector<std::string>{});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(read_file(run / "ranks_breakdown.svg").find("<svg"), std::string::npos);
  EXPECT_NE(read_file(run / "links.svg").find("x`touch pwned-link-bt`"), std::string::npos);
}

// `upsim sweep STUDY --plot KEY`: the study name becomes the results folder and the axis values
// its cells.
TEST_F(PlotSafety, StudyNamesAndAxisValuesAreNeverExecuted) {
  write_file(dir_ / "study.yaml",
             "study: \"q'$(touch pwned-study-sh)'`touch pwned-study-bt`\"\n"
             "base: " +
                 field(kData + "/tiny.yaml") +
                 "\naxes:\n  name: [\"x`touch pwned-axis-bt`\", \"a'$(touch pwned-axis-sh)'\", "
                 "\"\\\"; system(\\\"touch pwned-axis-dq\\\"); \\\"\", \"EOD\"]\n"
                 "  workload.global_batch: [128]\n");
  const Outcome r = upsim({"sweep", "study.yaml", "--plot", "name"});
  EXPECT_EQ(markers(), std::vector<std::string>{});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path folder =
      fs::path("upsim-out") / "q'$(touch pwned-study-sh)'`touch pwned-study-bt`";
  EXPECT_NE(read_file(folder / "results_iteration.svg").find("<svg"), std::string::npos) << r.out;
  // A resumed sweep redraws its own plots (upsim sweep passes --force to upsim plot).
  const Outcome again = upsim({"sweep", "study.yaml", "--plot", "name"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
}

TEST_F(CommandSafety, ValuesThatAreNotFiniteNumbersAreRefusedNamingColumnAndLine) {
  for (const std::string bad : {"`touch pwned-value`", "nan", "1e999", "0x10", " 1", "1 2"}) {
    write_file(dir_ / "r.csv", "point,x," + kResultColumns + "\n0,1," + kOkResults + "\n1,2,ok," +
                                   field(bad) + ",0.25,0.01,0.01,0,0,1.2,0.04,1000,,,\n");
    const Outcome r = upsim({"plot", "r.csv", "--x", "x", "--force"});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("r.csv:3: column `iteration_ms`: expected a finite number"),
              std::string::npos)
        << bad << ": " << r.err;
  }
  // A row with another number of fields than the header is refused, not counted as not run.
  write_file(dir_ / "r.csv", "point,x," + kResultColumns + "\n0,1," + kOkResults + "\n1,2,ok\n");
  const Outcome short_row = upsim({"plot", "r.csv", "--x", "x", "--force"});
  EXPECT_EQ(short_row.exit_code, 2);
  EXPECT_NE(short_row.err.find("r.csv:3: expected 15 fields"), std::string::npos) << short_row.err;
  // A file that is not a results table is refused without quoting it.
  write_file(dir_ / "secret.csv", "root:x:0:0:root:/root:/bin/bash\nline two\n");
  const Outcome other = upsim({"plot", "secret.csv", "--x", "x"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("not a results table"), std::string::npos) << other.err;
  EXPECT_EQ(other.err.find("root"), std::string::npos) << other.err;
  EXPECT_EQ(markers(), std::vector<std::string>{});
}

TEST_F(PlotSafety, ExistingPlotsAreKeptUnlessForced) {
  write_file(dir_ / "r.csv", "point,x," + kResultColumns + "\n0,1," + kOkResults + "\n");
  ASSERT_EQ(upsim({"plot", "r.csv", "--x", "x"}).exit_code, 0);
  const std::string drawn = read_file(dir_ / "r_iteration.svg");
  write_file(dir_ / "r_breakdown.gp", "mine\n");
  const Outcome again = upsim({"plot", "r.csv", "--x", "x"});
  EXPECT_EQ(again.exit_code, 2) << again.out << again.err;
  EXPECT_NE(again.err.find("r_iteration.gp already exists"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(dir_ / "r_breakdown.gp"), "mine\n");
  const Outcome forced = upsim({"plot", "r.csv", "--x", "x", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.out << forced.err;
  EXPECT_EQ(read_file(dir_ / "r_iteration.svg"), drawn);  // the same input, the same SVG
  EXPECT_NE(read_file(dir_ / "r_breakdown.gp"), "mine\n");
}

// Without gnuplot on PATH (here: an empty one) the scripts are written and the exit is 1.
TEST_F(CommandSafety, WithoutGnuplotTheScriptsAreWrittenAndTheCommandSaysSo) {
  write_file(dir_ / "r.csv", "point,x," + kResultColumns + "\n0,1," + kOkResults + "\n");
  fs::create_directories(dir_ / "empty");
  const ChildProcessResult r = run_program(
      {"env", "PATH=" + (dir_ / "empty").string(), UPSIM_BINARY, "plot", "r.csv", "--x", "x"});
  EXPECT_EQ(r.exit_status, 1) << r.stdout_bytes << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("gnuplot is not on PATH: the scripts are written, but no SVG"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_TRUE(fs::exists(dir_ / "r_iteration.gp"));
  EXPECT_TRUE(fs::exists(dir_ / "r_breakdown.gp"));
  EXPECT_FALSE(fs::exists(dir_ / "r_iteration.svg"));
}

// A gnuplot that fails, or writes no SVG, is an error with its reason, and the plot leaves
// none of its files behind (here a stand-in gnuplot first on PATH).
TEST_F(CommandSafety, AFailingGnuplotLeavesNoPartialPlots) {
  write_file(dir_ / "r.csv", "point,x," + kResultColumns + "\n0,1," + kOkResults + "\n");
  const fs::path fake = dir_ / "fake";
  fs::create_directories(fake);
  for (const auto& [script, message] :
       {std::pair<std::string, std::string>{"echo 'line 3: broken' >&2; exit 3",
                                            "gnuplot failed on ./r_iteration.gp (exit status 3): "
                                            "line 3: broken"},
        {"echo not an svg", "gnuplot wrote no SVG for ./r_iteration.gp"}}) {
    write_file(fake / "gnuplot", "#!/bin/sh\n" + script + "\n");
    fs::permissions(fake / "gnuplot", fs::perms::owner_all);
    const char* path = std::getenv("PATH");
    const ChildProcessResult r =
        run_program({"env", "PATH=" + fake.string() + ":" + (path != nullptr ? path : ""),
                     UPSIM_BINARY, "plot", "r.csv", "--x", "x"});
    EXPECT_EQ(r.exit_status, 2) << r.stdout_bytes << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(message), std::string::npos) << r.stderr_text;
    for (const char* f : {"r_iteration.gp", "r_iteration.svg", "r_breakdown.gp"})
      EXPECT_FALSE(fs::exists(dir_ / f)) << f;
  }
}

TEST_F(CommandSafety, NeverWritesThroughALinkAtAnOutputName) {
  write_file(dir_ / "r.csv", "point,x," + kResultColumns + "\n0,1," + kOkResults + "\n");
  write_file(dir_ / "target", "keep\n");
  for (const std::string name : {"r_iteration.svg", "r_breakdown.gp", "r_iteration.svg.tmp"}) {
    for (const bool force : {false, true}) {
      fs::create_directories(dir_ / "o");
      fs::create_symlink(dir_ / "target", dir_ / "o" / name);
      std::vector<std::string> args{"plot", "r.csv", "--x", "x", "--out", "o"};
      if (force) args.emplace_back("--force");
      const Outcome r = upsim(args);
      EXPECT_EQ(r.exit_code, 2) << name << " " << force << ": " << r.out << r.err;
      EXPECT_NE(r.err.find(name + " is a symbolic link"), std::string::npos) << r.err;
      EXPECT_TRUE(read_file(dir_ / "target") == "keep\n") << name << " " << force;
      EXPECT_TRUE(fs::is_symlink(dir_ / "o" / name));
      fs::remove_all(dir_ / "o");
    }
  }
}

TEST_F(CommandSafety, PlotRefusesPipesDevicesAndHugeFilesAsInputs) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.csv").c_str(), 0644), 0);
  const Outcome fifo = upsim({"plot", "fifo.csv", "--x", "x"});
  EXPECT_EQ(fifo.exit_code, 2) << fifo.err;
  EXPECT_NE(fifo.err.find("fifo.csv: a named pipe, not a regular file"), std::string::npos)
      << fifo.err;
  const Outcome zero = upsim({"plot", "/dev/zero", "--x", "x", "--out", "o"});
  EXPECT_EQ(zero.exit_code, 2) << zero.err;
  EXPECT_NE(zero.err.find("/dev/zero: a device, not a regular file"), std::string::npos)
      << zero.err;
  write_file(dir_ / "huge.csv", "point,x," + kResultColumns + "\n");
  fs::resize_file(dir_ / "huge.csv", std::uintmax_t{300} << 20);  // sparse: no disk used
  const Outcome huge = upsim({"plot", "huge.csv", "--x", "x"});
  EXPECT_EQ(huge.exit_code, 2) << huge.err;
  EXPECT_NE(huge.err.find("huge.csv: 314572800 bytes, more than"), std::string::npos) << huge.err;

  const fs::path run = "run";
  hostile_run_folder(run);
  fs::remove(run / "links.csv");
  ASSERT_EQ(::mkfifo((run / "links.csv").c_str(), 0644), 0);
  const Outcome links = upsim({"plot", "run"});
  EXPECT_EQ(links.exit_code, 2) << links.err;
  EXPECT_NE(links.err.find("run/links.csv: a named pipe"), std::string::npos) << links.err;
  fs::remove(run / "ranks.csv");
  fs::create_symlink("/dev/zero", run / "ranks.csv");
  const Outcome ranks = upsim({"plot", "run", "--force"});
  EXPECT_EQ(ranks.exit_code, 2) << ranks.err;
  EXPECT_NE(ranks.err.find("run/ranks.csv: a device"), std::string::npos) << ranks.err;
}

TEST_F(CommandSafety, DiffRefusesPipesDevicesAndHugeFilesAsInputs) {
  for (const char* run : {"a", "b"}) {
    ASSERT_EQ(upsim({"run", kData + "/tiny.yaml", "--out", run, "--no-trace"}).exit_code, 0);
  }
  ASSERT_EQ(upsim({"diff", "a", "b"}).exit_code, 0);
  fs::remove("b/ops.csv");
  ASSERT_EQ(::mkfifo("b/ops.csv", 0644), 0);
  const Outcome ops = upsim({"diff", "a", "b"});
  EXPECT_EQ(ops.exit_code, 2) << ops.err;
  EXPECT_NE(ops.err.find("b/ops.csv: cannot read (a named pipe, not a regular file"),
            std::string::npos)
      << ops.err;
  fs::remove("a/summary.json");
  fs::create_symlink("/dev/zero", "a/summary.json");
  const Outcome zero = upsim({"diff", "a", "b"});
  EXPECT_EQ(zero.exit_code, 2) << zero.err;
  EXPECT_NE(zero.err.find("a/summary.json: cannot read (a device, not a regular file"),
            std::string::npos)
      << zero.err;
  fs::remove("a/summary.json");
  ASSERT_EQ(::mkfifo("a/summary.json", 0644), 0);
  const Outcome fifo = upsim({"diff", "a", "b"});
  EXPECT_EQ(fifo.exit_code, 2) << fifo.err;
  EXPECT_NE(fifo.err.find("a/summary.json: cannot read (a named pipe"), std::string::npos)
      << fifo.err;
  fs::remove("a/summary.json");
  write_file("a/summary.json", "{}");
  fs::resize_file("a/summary.json", std::uintmax_t{300} << 20);
  const Outcome huge = upsim({"diff", "a", "b"});
  EXPECT_EQ(huge.exit_code, 2) << huge.err;
  EXPECT_NE(huge.err.find("a/summary.json: cannot read (314572800 bytes, more than"),
            std::string::npos)
      << huge.err;
}

}  // namespace
}  // namespace upsim::cli

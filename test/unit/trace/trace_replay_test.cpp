#include "workloads/trace/trace_replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/formats/parse_error.h"
#include "test/unit/trace/synthetic_trace.h"

namespace upsim {
namespace {

using namespace upsim::test;
namespace fs = std::filesystem;

const fs::path kData = UPSIM_TRACE_TEST_DATA;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Copies the DLRM traces into `dir`, except the files whose names contain `skip`.
void copy_dlrm(const TempDir& dir, const std::string& skip = "") {
  for (const auto& e : fs::directory_iterator(kData / "dlrm")) {
    const std::string name = e.path().filename().string();
    if (!skip.empty() && name.find(skip) != std::string::npos) continue;
    fs::copy_file(e.path(), dir.path() / name);
  }
}

/// The ParseError of validating `dir`, or "" if it validated.
ParseError validation_error(const fs::path& dir, const TraceSetOptions& options = {}) {
  try {
    validate_trace_directory(dir, options);
  } catch (const ParseError& e) {
    return e;
  }
  ADD_FAILURE() << "validating " << dir << " succeeded";
  return ParseError("", "");
}

// A mean over steps hides steps far off: the per-step table shows each (here -50% and +100%
// around a mean error of +0%).
TEST(TraceReplay, per_step_table_shows_what_the_mean_hides) {
  RankValidation a;
  a.rank = 0;
  a.step_labels = {"ProfilerStep#1", "ProfilerStep#2"};
  a.step_measured = {Duration::from_us(200), Duration::from_us(100)};
  a.step_predicted = {Duration::from_us(100), Duration::from_us(200)};
  RankValidation b = a;
  b.rank = 1;
  const std::string text = format_trace_steps({a, b});
  EXPECT_NE(text.find("per step (2 steps; means over the ranks):"), std::string::npos) << text;
  EXPECT_NE(text.find("ProfilerStep#1         0.2000          0.1000  -50.00%"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ProfilerStep#2         0.1000          0.2000 +100.00%"), std::string::npos)
      << text;
  EXPECT_NE(text.find("worst +100.00% (ProfilerStep#2)"), std::string::npos) << text;
  // One step: no table.
  a.step_labels.resize(1);
  a.step_measured.resize(1);
  a.step_predicted.resize(1);
  EXPECT_EQ(format_trace_steps({a}), "");
}

TEST(TraceReplay, dlrm_eight_ranks_replay_within_three_percent) {
  const TraceReplayResult r = validate_trace_directory(kData / "dlrm");
  std::cout << format_trace_validation(r.ranks);
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_EQ(r.ranks.size(), 8u);
  EXPECT_EQ(r.graph.collective_groups, 8u);  // 5 all-to-all + 3 all-reduce, across all ranks
  // Measured ProfilerStep#10 per rank (us), from the traces (test/data/.../SOURCES.md).
  const int64_t measured[8] = {14455, 19901, 13017, 19313, 17979, 17797, 13091, 12509};
  for (size_t i = 0; i < 8; ++i) {
    const RankValidation& v = r.ranks[i];
    EXPECT_EQ(v.rank, i);
    EXPECT_EQ(v.iteration, "ProfilerStep#10");
    EXPECT_EQ(v.measured, Duration::from_us(measured[i]));
    EXPECT_LT(std::fabs(v.error), 0.03) << "rank " << i;
  }
  for (const TraceRankSummary& s : r.graph.ranks) {
    EXPECT_EQ(s.collectives, 8u);
    EXPECT_EQ(s.cpu_threads >= 2, true);  // main + autograd (+ untraced launches)
    EXPECT_EQ(s.streams, 4u);
    EXPECT_GT(s.stream_waits, 0u);
    EXPECT_GT(s.host_syncs, 0u);
  }
}

TEST(TraceReplay, single_gpu_pairs_replay_within_five_percent) {
  TraceSetOptions options;
  options.graph.iteration_marker = "Optimizer.zero_grad";
  const TraceReplayResult linear = validate_trace_directory(kData / "linear", options);
  std::cout << format_trace_validation(linear.ranks);
  ASSERT_EQ(linear.ranks.size(), 1u);
  EXPECT_TRUE(linear.warnings.empty());
  EXPECT_EQ(linear.ranks[0].iterations, 39u);
  EXPECT_LT(std::fabs(linear.ranks[0].error), 0.05);

  // The resnet ET is from another program (test/data/.../SOURCES.md): strict validation refuses
  // it, lenient validation replays the Kineto trace alone and says why.
  options.strict_et = false;
  const TraceReplayResult resnet = validate_trace_directory(kData / "resnet", options);
  std::cout << format_trace_validation(resnet.ranks);
  ASSERT_EQ(resnet.ranks.size(), 1u);
  // The ET's warning, and the trace's GPU work of zero duration (whole-microsecond clock).
  ASSERT_EQ(resnet.warnings.size(), 2u);
  EXPECT_NE(resnet.warnings[0].find("resnet_kineto.json.gz (rank 0): 22 copies, 89 memsets with "
                                    "zero duration"),
            std::string::npos)
      << resnet.warnings[0];
  EXPECT_NE(resnet.warnings[1].find("resnet_et.json.gz"), std::string::npos);
  EXPECT_EQ(resnet.ranks[0].iterations, 29u);
  EXPECT_LT(std::fabs(resnet.ranks[0].error), 0.05);
}

TEST(TraceReplay, an_et_from_another_run_is_an_error_naming_it) {
  TraceSetOptions options;
  options.graph.iteration_marker = "Optimizer.zero_grad";
  const ParseError e = validation_error(kData / "resnet", options);
  EXPECT_EQ(fs::path(e.file()).filename(), "resnet_et.json.gz");
  EXPECT_NE(std::string(e.what()).find("does not belong to resnet_kineto.json.gz"),
            std::string::npos);

  // Another program's ET in place of rank 0's.
  TempDir dir;
  copy_dlrm(dir, "dlrm_eg_0");
  fs::copy_file(kData / "linear" / "linear_et.json.gz", dir.path() / "dlrm_eg_0.json.gz");
  const ParseError e2 = validation_error(dir.path());
  EXPECT_EQ(fs::path(e2.file()).filename(), "dlrm_eg_0.json.gz");
}

TEST(TraceReplay, a_missing_rank_is_an_error_naming_it) {
  TempDir dir;
  copy_dlrm(dir, "worker3");
  const ParseError e = validation_error(dir.path());
  EXPECT_EQ(e.file(), dir.path().string());
  EXPECT_NE(std::string(e.what()).find("no trace for rank 3 of world size 8"), std::string::npos);
}

TEST(TraceReplay, a_truncated_rank_trace_is_an_error_naming_it) {
  TempDir dir;
  copy_dlrm(dir, "worker5");
  const fs::path src = kData / "dlrm" / "worker5_step_12.1694128201549.pt.trace.json.gz";
  const std::string bytes = read_bytes(src);
  const fs::path cut = dir.write(src.filename().string(), bytes.substr(0, bytes.size() - 1000));
  const ParseError e = validation_error(dir.path());
  EXPECT_EQ(e.file(), cut.string());
  EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos);
}

TEST(TraceReplay, a_malformed_rank_trace_is_an_error_naming_it) {
  TempDir dir;
  copy_dlrm(dir, "worker2");
  const fs::path bad =
      dir.write("worker2.json", "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1 \"dur\": 2}]}");
  const ParseError e = validation_error(dir.path());
  EXPECT_EQ(e.file(), bad.string());
  EXPECT_EQ(e.line(), 1);
}

TEST(TraceReplay, a_trace_without_profiler_steps_is_an_error_naming_it) {
  const ParseError e = validation_error(kData / "linear");
  EXPECT_EQ(fs::path(e.file()).filename(), "linear_kineto.json.gz");
  EXPECT_NE(std::string(e.what()).find("no `ProfilerStep#` annotation"), std::string::npos);
}

TEST(TraceReplay, a_duplicate_rank_is_an_error_naming_it) {
  TempDir dir;
  copy_dlrm(dir);
  fs::copy_file(dir.path() / "worker1_step_12.1694128201556.pt.trace.json.gz",
                dir.path() / "worker1_copy.json.gz");
  const ParseError e = validation_error(dir.path());
  EXPECT_NE(std::string(e.what()).find("rank 1 again"), std::string::npos);
}

TEST(TraceReplay, a_rank_without_its_execution_trace_is_a_warning_with_counts) {
  // Seven ranks with their ET, rank 5 without: it was replayed without a word.
  TempDir dir;
  copy_dlrm(dir, "dlrm_eg_5");
  const TraceReplayResult r = validate_trace_directory(dir.path());
  ASSERT_EQ(r.warnings.size(), 1u);
  const std::string& w = r.warnings[0];
  EXPECT_EQ(w.rfind(dir.path().string() + ": execution trace missing for 1 of 8 ranks (rank 5: "
                                          "worker5_step_12.1694128201549.pt.trace.json.gz)",
                    0),
            0u)
      << w;
  EXPECT_NE(w.find("replay from Kineto alone"), std::string::npos) << w;
  EXPECT_EQ(w.find("Input Dims"), std::string::npos) << "replay mode prices no kernel: " << w;
  ASSERT_EQ(r.ranks.size(), 8u);
  EXPECT_LT(std::fabs(r.ranks[5].error), 0.03);

  // Model mode also loses the ET's op shapes: the warning says so.
  TraceSetOptions model;
  model.graph.mode = TraceMode::kModel;
  const LoadedTraces loaded = load_trace_directory(dir.path(), model);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("Input Dims"), std::string::npos) << loaded.warnings[0];
  EXPECT_FALSE(loaded.ranks[5].et.has_value());
  EXPECT_TRUE(loaded.ranks[4].et.has_value());

  // No ET at all is the plain Kineto replay: nothing to warn about.
  TempDir kineto_only;
  copy_dlrm(kineto_only, "dlrm_eg_");
  EXPECT_TRUE(load_trace_directory(kineto_only.path()).warnings.empty());
}

/// One rank of two ProfilerSteps; the second lasts `last_step_dur` us, and the kernel
/// `kernel_dur` us.
std::string two_step_trace(const std::string& last_step_dur, const std::string& kernel_dur) {
  return kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "50"),
      runtime("cudaLaunchKernel", kMainTid, "10", "5", 1),
      gpu("kernel", "sgemm", 7, "20", kernel_dur, 1),
      annotation("ProfilerStep#2", kMainTid, "50", last_step_dur),
      runtime("cudaLaunchKernel", kMainTid, "60", "5", 2),
      gpu("kernel", "sgemm", 7, "70", kernel_dur, 2),
  });
}

TEST(TraceReplay, a_step_of_zero_measured_time_is_an_error_naming_the_file_and_step) {
  // ProfilerStep#2 with dur 0: it measured 0 us and validated at "0.00%" error.
  TempDir dir;
  const fs::path file = dir.write("worker0.json", two_step_trace("0", "10"));
  const ParseError e = validation_error(dir.path());
  EXPECT_EQ(e.file(), file.string());
  EXPECT_NE(std::string(e.what()).find("iteration `ProfilerStep#2` (at 50.000 us into the trace) "
                                       "lasts 0.000 us: a measured step must take a positive time"),
            std::string::npos)
      << e.what();
  // Two markers at one instant: a step lasts 0 us.
  TempDir same;
  same.write("worker0.json", kineto_json({annotation("ProfilerStep#1", kMainTid, "0", "0"),
                                          annotation("ProfilerStep#2", kMainTid, "0", "50")}));
  const std::string what = validation_error(same.path()).what();
  EXPECT_NE(what.find("lasts 0.000 us"), std::string::npos) << what;
}

TEST(TraceReplay, gpu_work_of_zero_duration_is_a_warning_with_counts) {
  TempDir dir;
  const fs::path file = dir.write("worker0.json", two_step_trace("50", "0"));
  const TraceReplayResult r = validate_trace_directory(dir.path());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0], file.string() +
                               " (rank 0): 2 kernels with zero duration (shorter than the "
                               "trace's clock resolution, or not timed): each takes no time "
                               "wherever its measured duration is kept");
  // The same trace with timed kernels: no warning (host events of dur 0 are not counted).
  TempDir timed;
  timed.write("worker0.json", two_step_trace("50", "10"));
  EXPECT_TRUE(validate_trace_directory(timed.path()).warnings.empty());
}

TEST(TraceReplay, the_validation_table_lists_every_rank_and_the_geomean) {
  RankValidation a;
  a.rank = 0;
  a.file = "dir/worker0.json";
  a.iteration = "ProfilerStep#10";
  a.measured = Duration::from_us(100);
  a.predicted = Duration::from_us(102);
  a.error = 0.02;
  RankValidation b = a;
  b.rank = 1;
  b.predicted = Duration::from_us(99);
  b.error = -0.01;
  const std::string table = format_trace_validation({a, b});
  EXPECT_NE(table.find("worker0.json"), std::string::npos);
  EXPECT_NE(table.find("+2.00%"), std::string::npos);
  EXPECT_NE(table.find("-1.00%"), std::string::npos);
  EXPECT_NEAR(geomean_abs_error({a, b}), std::sqrt(0.0204 * 0.0104), 1e-12);
}

}  // namespace
}  // namespace upsim

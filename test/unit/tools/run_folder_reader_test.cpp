// tools/run_folder_reader.h: what `upsim diff` accepts of summary.json and ops.csv, and the
// errors that name the file and the key or line.
#include "tools/run_folder_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/formats/parse_error.h"

namespace upsim::cli {
namespace {

const std::string kRank =
    "{\"rank\": 0, \"name\": \"rank 0\", \"iteration_time_ms\": 2.5, \"compute_ms\": 1, "
    "\"communication_ms\": 0.5, \"exposed_communication_ms\": 0.25, \"bubble_ms\": 0, "
    "\"rendezvous_wait_ms\": 0, \"cpu_bound_idle_ms\": 1, \"other_idle_ms\": 0.25, "
    "\"collective_wait_ms\": 0, \"exposed_by_dim\": {}, \"iteration_times_ms\": [2.5, 2.5]}";

std::string summary(const std::string& ranks = "[" + kRank + "]", const std::string& extra = "") {
  return "{\"schema\": \"upsim.summary\", \"schema_version\": 1, " + extra +
         "\"scenario\": {\"name\": \"tiny\", \"description\": \"\", \"file\": \"t.yaml\", "
         "\"overrides\": [\"a=1\"]}, \"platform\": {\"gpus\": 2, \"gpu\": \"A100\"}, "
         "\"predicted_iteration_time_ms\": 2.5, \"ranks\": " +
         ranks + ", \"links\": [], \"memory\": null}\n";
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RunFolderReader, ReadsWhatDiffUses) {
  const RunSummaryFields s = parse_run_summary(summary(), "s.json");
  EXPECT_EQ(s.scenario_name, "tiny");
  EXPECT_EQ(s.overrides, std::vector<std::string>{"a=1"});
  EXPECT_EQ(s.gpus, 2);
  EXPECT_EQ(s.gpu, "A100");
  EXPECT_EQ(s.predicted_iteration_time_ms, 2.5);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].name, "rank 0");
  EXPECT_EQ(s.ranks[0].ms[0], 2.5);
  EXPECT_EQ(s.ranks[0].ms[7], 0.25);  // other_idle_ms
  const OpTable ops = parse_ops_table(
      "kind,op,name,count_per_iteration,time_ms_per_iteration,share_of_kind\n"
      "kernel,\"aten::mm, fused\",gemm,2,0.5,1\n",
      "ops.csv");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops.begin()->first, (OpKey{"kernel", "aten::mm, fused", "gemm"}));
  EXPECT_EQ(ops.begin()->second.ms, 0.5);
  EXPECT_EQ(ops.begin()->second.count, 2.0);
}

TEST(RunFolderReader, RefusesSummariesThatAreNotWhatUpsimWrote) {
  const std::string not_summary =
      "s.json: not an upsim.summary of schema version 1 (written by another upsim?)";
  EXPECT_EQ(error_of([] { parse_run_summary("root:x:0:0:root:/root:/bin/bash\n", "s.json"); }),
            not_summary);
  EXPECT_EQ(error_of([] { parse_run_summary("[1, 2]", "s.json"); }), not_summary);
  EXPECT_EQ(error_of([] { parse_run_summary("{\"schema\": \"other\"}", "s.json"); }), not_summary);
  // A field diff reads that is missing or of another type is named, not read as 0.
  EXPECT_EQ(error_of([] {
              std::string s = summary();
              s.replace(s.find("\"predicted_iteration_time_ms\""), 5, "\"xxxx");
              parse_run_summary(s, "s.json");
            }),
            "s.json: no `predicted_iteration_time_ms` (a summary.json of schema version 1 has it)");
  std::string no_compute = kRank;
  no_compute.replace(no_compute.find("\"compute_ms\""), 3, "\"xx");
  EXPECT_EQ(
      error_of([&] { parse_run_summary(summary("[" + kRank + ", " + no_compute + "]"), "s"); }),
      "s: no `ranks[1].compute_ms` (a summary.json of schema version 1 has it)");
  std::string text_time = kRank;
  text_time.replace(text_time.find("2.5"), 3, "\"2\"");
  EXPECT_NE(error_of([&] {
              parse_run_summary(summary("[" + text_time + "]"), "s");
            }).find("`ranks[0].iteration_time_ms`: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_run_summary(summary("[]", "\"ranks\": [], "), "s");
            }).find("`ranks` appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_run_summary(summary() + "{}", "s");
            }).find("text after the summary object"),
            std::string::npos);
  EXPECT_THROW(parse_run_summary(summary().substr(0, 40), "s"), ParseError);
}

TEST(RunFolderReader, RefusesOpsTablesWithBadRows) {
  const std::string header = "kind,op,name,count_per_iteration,time_ms_per_iteration,share\n";
  EXPECT_EQ(error_of([&] { parse_ops_table(header + "kernel,mm,gemm,2,nan,1\n", "ops.csv"); }),
            "ops.csv:2: column `time_ms_per_iteration`: expected a finite number");
  EXPECT_EQ(error_of([&] { parse_ops_table(header + "kernel,mm,gemm,2,1abc,1\n", "ops.csv"); }),
            "ops.csv:2: column `time_ms_per_iteration`: expected a finite number");
  EXPECT_EQ(error_of([&] {
              parse_ops_table(header + "kernel,mm,gemm,2,1,1\nkernel,mm,gemm,2,1,1\n", "ops.csv");
            }),
            "ops.csv:3: a second row for the same kind, op and name");
  EXPECT_EQ(error_of([&] { parse_ops_table(header + "kernel,mm\n", "ops.csv"); }),
            "ops.csv:2: expected 6 fields (as the header), got 2");
  EXPECT_EQ(error_of([] { parse_ops_table("secret\n1\n", "ops.csv"); }),
            "ops.csv: not an ops table written by `upsim run` (no column `kind`)");
}

}  // namespace
}  // namespace upsim::cli

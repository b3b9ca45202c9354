// The upsim executable as a user runs it: every bad input gives a clear message and a non-zero
// exit, outputs are written and never overwritten unasked, and runs are byte-for-byte repeatable.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../trace/chakra_writer.h"
#include "../trace/synthetic_trace.h"
#include "cli_runner.h"
#include "results_table_reader.h"
#include "sim/formats/json_reader.h"

namespace {

namespace fs = std::filesystem;

using Result = upsim::test::CliResult;
using upsim::test::quote;
using upsim::test::ResultsTable;

/// Runs `upsim <args>` with `cwd` as working directory.
Result upsim(const std::string& args, const fs::path& cwd) {
  return upsim::test::run_upsim(args, cwd);
}

std::string read_file(const fs::path& p) {
  return upsim::test::read_whole_file(p);
}

/// The lines of a YAML file that are not whole-line comments (provenance headers differ).
std::string body(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') out += line + "\n";
  }
  return out;
}

const std::string kData = UPSIM_CLI_TEST_DATA;
const std::string kTiny = quote(kData + "/tiny.yaml");

std::vector<std::vector<std::string>> csv_rows(const std::string& csv);

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("upsim-cli-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result run(const std::string& args) { return upsim(args, dir_); }
  /// The framework options (plan.csv's column) of the layouts `upsim plan` ranks for
  /// configs/schema/`schema_file` with `--set set`, --max-simulations 4 and --refine `refine`.
  std::set<std::string> plan_framework_options(const std::string& schema_file,
                                               const std::string& set, int refine) {
    const std::string scenario =
        quote(std::string(UPSIM_CONFIGS_DIR) + "/schema/" + schema_file) + " --set " + set;
    const Result r = run("plan " + scenario + " --out p -j 2 --max-simulations 4 --refine " +
                         std::to_string(refine));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
    std::set<std::string> options;
    if (rows.empty() || rows.front().size() <= 10 || rows.front()[10] != "framework_options") {
      ADD_FAILURE() << "plan.csv has no framework_options column\n" << r.output;
      return options;
    }
    for (size_t i = 1; i < rows.size(); ++i)
      options.insert(rows[i][10]);
    return options;
  }
  fs::path dir_;
};

TEST_F(Cli, HelpExplainsCommandsAndEveryRunOption) {
  const Result top = run("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.output.find("run SCENARIO"), std::string::npos) << top.output;
  const Result r = run("run --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--set", "--out", "--trace", "--trace-format", "--trace-ranks",
                             "--no-trace", "--force", "--quiet"}) {
    EXPECT_NE(r.output.find(option), std::string::npos) << option << " missing in\n" << r.output;
  }
}

TEST_F(Cli, CommandsWithSubjectsListThemOnHelp) {
  for (const char* command : {"validate", "calibrate", "convert"}) {
    const Result help = run(std::string(command) + " --help");
    EXPECT_EQ(help.exit_code, 0) << command << "\n" << help.output;
    EXPECT_NE(help.out.find("subjects: "), std::string::npos) << help.output;
    EXPECT_EQ(run(command).exit_code, 2) << command;  // no subject: a usage error
  }
  EXPECT_NE(run("validate -h").out.find("memory, traces, workloads"), std::string::npos);
  // The --set example of `upsim run --help` names keys every scenario has.
  const Result r = run("run --help");
  EXPECT_EQ(r.output.find("interconnect.bandwidth"), std::string::npos) << r.output;
}

// --dry-run builds and describes the scenario (header, graph size, resolved YAML), runs nothing
// and writes nothing; output options beside it are refused, not ignored.
TEST_F(Cli, DryRunDescribesTheScenarioWithoutRunningOrWriting) {
  const std::string dlrm4 = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result r = run("run " + dlrm4 + " --dry-run --set workload.global_batch=2048");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"platform: 4 x A100-SXM4-40GB", "global batch 2048", "memory per GPU (rank 0)",
        "graph: 4 ranks, ", "nothing simulated", "resolved scenario", "  global_batch: 2048"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("predicted iteration time"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "upsim-out")) << "a dry run wrote a folder";
  const Result with_out = run("run " + dlrm4 + " --dry-run --out x");
  EXPECT_EQ(with_out.exit_code, 2);
  EXPECT_NE(with_out.output.find("--dry-run writes nothing"), std::string::npos) << with_out.output;
  EXPECT_NE(with_out.output.find("--out"), std::string::npos) << with_out.output;
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  // A bad key fails the dry run as it fails the run.
  EXPECT_EQ(run("run " + dlrm4 + " --dry-run --set workload.bogus=1").exit_code, 2);
}

// `upsim init KIND DIR` writes a starter whose references are absolute and that runs as it is
// from anywhere; it never replaces a scenario unasked.
TEST_F(Cli, InitWritesStartersThatRunAsTheyAre) {
  for (const std::string kind : {"dlrm", "transformer", "trace"}) {
    const Result init = run("init " + kind + " " + kind);
    ASSERT_EQ(init.exit_code, 0) << init.output;
    const std::string text = read_file(dir_ / kind / "scenario.yaml");
    EXPECT_EQ(text.find(": ../"), std::string::npos) << "a relative reference is left\n" << text;
    EXPECT_NE(text.find("# "), std::string::npos) << "commented";
    const Result r = run("run " + kind + "/scenario.yaml --no-trace --quiet --out o-" + kind);
    ASSERT_EQ(r.exit_code, 0) << kind << "\n" << r.output;
    const Result again = run("init " + kind + " " + kind);
    EXPECT_NE(again.exit_code, 0);
    EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
    EXPECT_EQ(run("init " + kind + " " + kind + " --force").exit_code, 0);
  }
  const Result bad = run("init gpt x");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("`gpt` is no starter"), std::string::npos) << bad.output;
  EXPECT_EQ(run("init dlrm").exit_code, 2);
  const Result none = run("init");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("missing KIND"), std::string::npos) << none.output;
}

// `upsim schema`: every key as its reader reads it; SCHEMA.md is its Markdown, regenerated here
// (after a reader changes, `build/upsim schema --markdown > SCHEMA.md`).
TEST_F(Cli, SchemaListsKeysAsReadersReadThemAndSchemaMdIsCurrent) {
  const Result page = run("schema --markdown");
  ASSERT_EQ(page.exit_code, 0) << page.output;
  EXPECT_EQ(page.out, read_file(fs::path(UPSIM_SOURCE_ROOT) / "SCHEMA.md"))
      << "SCHEMA.md is stale: run `build/upsim schema --markdown > SCHEMA.md`";
  const Result parallel = run("schema workload.parallelism");
  ASSERT_EQ(parallel.exit_code, 0) << parallel.output;
  EXPECT_NE(parallel.out.find("workload.parallelism.tensor"), std::string::npos) << parallel.out;
  EXPECT_NE(parallel.out.find("an integer, in 1 .. 16777216; default: 1  [transformer]"),
            std::string::npos)
      << parallel.out;
  EXPECT_EQ(parallel.out.find("workload.global_batch"), std::string::npos) << "outside the prefix";
  const Result choice = run("schema workload.interaction");
  EXPECT_NE(choice.out.find("one of dot, dcnv2; default: dot  [dlrm]"), std::string::npos)
      << choice.out;
  EXPECT_EQ(run("schema workload.no_such_key").exit_code, 2);
}

// --keys lists the key paths --set takes, those inside referenced files too.
TEST_F(Cli, RunKeysListsTheScenariosSetPaths) {
  const std::string dlrm4 = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result r = run("run " + dlrm4 + " --keys");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* key : {"\nworkload.global_batch\n", "\nplatform.gpu.peak_flops.fp32\n",
                          "\nworkload.embeddings.tables.0.rows\n"}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << r.out.substr(0, 400);
  }
  EXPECT_FALSE(fs::exists(dir_ / "upsim-out"));
  EXPECT_EQ(run("run " + dlrm4 + " --keys --out x").exit_code, 2);
}

TEST_F(Cli, NoCommandOrUnknownCommandIsAUsageError) {
  EXPECT_EQ(run("").exit_code, 2);
  const Result r = run("simulate x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command `simulate`"), std::string::npos) << r.output;
  EXPECT_EQ(run("run").exit_code, 2);
  EXPECT_EQ(run("run --bogus " + kTiny).exit_code, 2);
}

TEST_F(Cli, UnknownKeyNamesFileLineAndSuggestsTheValidKey) {
  const Result r = run("run " + quote(kData + "/typo_key.yaml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("typo_key.yaml:14"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tabels"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did you mean `tables`"), std::string::npos) << r.output;
}

TEST_F(Cli, WrongTypeNamesFileLineAndKey) {
  const Result r = run("run " + quote(kData + "/wrong_type.yaml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("wrong_type.yaml:2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("platform.gpus"), std::string::npos) << r.output;
}

TEST_F(Cli, BadUnitInAnOverrideNamesTheOverride) {
  const Result r = run("run " + kTiny + " --set workload.ddp_bucket=25furlongs");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--set workload.ddp_bucket"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("furlongs"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingFileIsNamed) {
  const Result r = run("run does_not_exist.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("does_not_exist.yaml"), std::string::npos) << r.output;
}

TEST_F(Cli, MalformedYamlNamesFileAndLine) {
  const Result r = run("run " + quote(kData + "/malformed.yaml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("malformed.yaml:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Segmentation"), std::string::npos);
}

TEST_F(Cli, UnknownModelAndSharderListTheValidNames) {
  Result r = run("run " + kTiny + " --set workload.model=bert");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("dlrm"), std::string::npos) << r.output;
  r = run("run " + kTiny + " --set workload.sharding=size_lookp_greedy");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("did you mean `size_lookup_greedy`"), std::string::npos) << r.output;
  r = run("run " + kTiny + " --set platform.kernels.model=magic");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("roofline"), std::string::npos) << r.output;
}

TEST_F(Cli, ZeroOrNegativeBatchIsRejected) {
  for (const char* batch : {"0", "-4096"}) {
    const Result r = run("run " + kTiny + " --set workload.global_batch=" + batch);
    EXPECT_EQ(r.exit_code, 2) << batch;
    EXPECT_NE(r.output.find("workload.global_batch"), std::string::npos) << r.output;
  }
}

TEST_F(Cli, MoreTablesThanMemoryAllowsIsRejected) {
  const Result r =
      run("run " + kTiny + " --set 'workload.embeddings.tables=[{count: 4, rows: 100000000000}]'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("workload.embeddings.tables"), std::string::npos) << r.output;
}

TEST_F(Cli, RunWritesTraceSummaryAndResolvedScenario) {
  const Result r = run("run " + kTiny + " --out out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("predicted iteration time:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  for (const char* f : {"trace.json", "summary.txt", "scenario.yaml"}) {
    EXPECT_TRUE(fs::exists(dir_ / "out" / f)) << f;
  }
  const std::string trace = read_file(dir_ / "out" / "trace.json");
  EXPECT_NE(trace.find("\"rank 0\""), std::string::npos);
  EXPECT_NE(trace.find("cudaLaunchKernel"), std::string::npos);
  EXPECT_NE(trace.find("\"ph\":\"s\""), std::string::npos);
  EXPECT_NE(trace.find("iteration 1"), std::string::npos);
}

TEST_F(Cli, TraceRanksDrawsOnlyThoseRanksAndAllDrawsEveryRank) {
  const Result one = run("run " + kTiny + " --out one --trace-ranks 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("trace: ranks 1 of 2 drawn (--trace-ranks)"), std::string::npos)
      << one.output;
  const std::string trace = read_file(dir_ / "one" / "trace.json");
  EXPECT_EQ(trace.find("\"pid\":1,"), std::string::npos) << "rank 0 is drawn";
  EXPECT_NE(trace.find("\"pid\":2,"), std::string::npos);
  EXPECT_NE(trace.find("\"ranks_drawn\":\"1 of 2\""), std::string::npos);

  // A small run draws every rank by default: the same bytes as --trace-ranks all, and no note.
  const Result plain = run("run " + kTiny + " --out plain");
  const Result all = run("run " + kTiny + " --out all --trace-ranks ' all '");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(plain.output.find("trace: "), std::string::npos) << plain.output;
  EXPECT_EQ(read_file(dir_ / "plain" / "trace.json"), read_file(dir_ / "all" / "trace.json"));
  EXPECT_EQ(run("run " + kTiny + " --out both --trace-ranks 0-1,0").exit_code, 0);
}

// --trace-format kineto: <out>/kineto/rank_N.json, one PyTorch profiler trace per rank, no
// trace.json; a trace scenario replays the folder to the same iteration time; gzip, --trace DIR,
// conflicts with an older run's folder, and bad values.
TEST_F(Cli, TraceFormatKinetoWritesOneProfilerTracePerRankThatReplays) {
  const Result r =
      run("run " + kTiny + " --out k --trace-format kineto --set simulation.warmup_iterations=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("outputs: k/ (kineto/, summary.txt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Kineto traces in k/kineto/, one per rank"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "k" / "trace.json"));
  for (const char* name : {"rank_0.json", "rank_1.json"}) {
    const std::string text = read_file(dir_ / "k" / "kineto" / name);
    EXPECT_NE(text.find("\"distributedInfo\": {\"backend\": \"nccl\""), std::string::npos);
    EXPECT_NE(text.find("\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\""),
              std::string::npos);
    EXPECT_NE(text.find("ProfilerStep#"), std::string::npos);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "k" / "kineto"), fs::directory_iterator()),
            2);

  // Replayed on the same GPU, the traces give back the predicted iteration time.
  std::ofstream(dir_ / "replay.yaml")
      << "platform:\n  gpu: " << UPSIM_CONFIGS_DIR << "/hardware/a100_sxm4_40gb.yaml\n"
      << "workload: {model: trace, traces: k/kineto}\n";
  const Result sim =
      run("run " + kTiny + " --out q --quiet --no-trace --set simulation.warmup_iterations=0");
  const Result back = run("run replay.yaml --out b --quiet --no-trace");
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_EQ(back.output, sim.output);

  // gzip, and a folder of one's own.
  ASSERT_EQ(run("run " + kTiny + " --out z --trace-format kineto --trace-gzip").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "z" / "kineto" / "rank_1.json.gz"));
  const Result own = run("run " + kTiny + " --out o --trace-format kineto --trace mine");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  EXPECT_TRUE(fs::exists(dir_ / "mine" / "rank_0.json"));
  EXPECT_FALSE(fs::exists(dir_ / "o" / "kineto"));
  const Result again = run("run " + kTiny + " --out o2 --trace-format kineto --trace mine");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("mine/rank_0.json already exists"), std::string::npos)
      << again.output;

  // An older run's Kineto traces stop a run into its folder, whatever its format, unless
  // --force, which removes those the new run does not write.
  fs::create_directories(dir_ / "old" / "kineto");
  std::ofstream(dir_ / "old" / "kineto" / "rank_0.json") << "{}";
  const Result conflict = run("run " + kTiny + " --out old");
  EXPECT_EQ(conflict.exit_code, 2);
  EXPECT_NE(conflict.output.find("old/kineto already exists"), std::string::npos)
      << conflict.output;
  ASSERT_EQ(run("run " + kTiny + " --out old --force").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "old" / "trace.json"));
  EXPECT_FALSE(fs::exists(dir_ / "old" / "kineto"));
  std::ofstream(dir_ / "k" / "kineto" / "rank_7.json") << "{}";
  ASSERT_EQ(run("run " + kTiny + " --out k --force --trace-format kineto").exit_code, 0);
  EXPECT_FALSE(fs::exists(dir_ / "k" / "kineto" / "rank_7.json"));
  EXPECT_TRUE(fs::exists(dir_ / "k" / "kineto" / "rank_1.json"));

  // Bad values and contradictions are refused before anything runs.
  const Result bad = run("run " + kTiny + " --out x --trace-format perfetto");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--trace-format: `perfetto` is not a trace format; valid: chrome"),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("kineto"), std::string::npos) << bad.output;
  const Result off = run("run " + kTiny + " --out x --trace-format kineto --no-trace");
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_NE(off.output.find("give one or the other"), std::string::npos) << off.output;
  std::ofstream(dir_ / "afile") << "x";
  const Result file = run("run " + kTiny + " --out x --trace-format kineto --trace afile");
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_NE(file.output.find("afile is a regular file; a Kineto trace is a folder"),
            std::string::npos)
      << file.output;
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

/// The per-iteration comm time (ms) of the summary row that starts with `row`.
double comm_ms(const std::string& summary, const std::string& row) {
  const size_t at = summary.find("\n" + row);
  if (at == std::string::npos) return -1.0;
  std::istringstream line(summary.substr(summary.find(')', at) + 1));
  double iter = 0;
  double compute = 0;
  std::string share;
  double comm = -1;
  line >> iter >> compute >> share >> comm;
  return comm;
}

// Model mode on one rank of the 8-rank DLRM job (rank 0's Kineto trace alone): its collectives
// are priced over the job's 8 GPUs of the DGX-1 fabric (the others mirrored), within 10% of
// the collective time of the same rank when all 8 traces run; priced over the trace alone they
// cost nothing.
TEST_F(Cli, OneRankOfAJobPricesItsCollectivesOverTheJobsFabric) {
  const fs::path dlrm =
      fs::path(UPSIM_CONFIGS_DIR).parent_path() / "test/data/param-et-replay/dlrm";
  fs::create_directories(dir_ / "one");
  fs::copy_file(dlrm / "worker0_step_12.1694128201545.pt.trace.json.gz",
                dir_ / "one" / "worker0_step_12.1694128201545.pt.trace.json.gz");
  const std::string configs = UPSIM_CONFIGS_DIR;
  const auto scenario = [&](const std::string& traces) {
    return "platform:\n  gpu: " + configs + "/hardware/v100_sxm2_32gb.yaml\n" +
           "  kernels: {model: calibrated, calibration: " + configs +
           "/calibration/a100_llmcompass.yaml}\n  host: {model: host_overheads, overheads: " +
           configs + "/host/v100_pytorch_kineto.yaml}\n  topology: " + configs +
           "/topologies/dgx1_v100.yaml\n  interconnect: {model: flow}\nworkload:\n  model: "
           "trace\n" +
           "  traces: " + traces + "\n  mode: model\n";
  };
  std::ofstream(dir_ / "one.yaml") << scenario((dir_ / "one").string());
  std::ofstream(dir_ / "all.yaml") << scenario(dlrm.string());
  const Result one = run("run one.yaml --out o1 --no-trace");
  const Result all = run("run all.yaml --out o8 --no-trace");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(one.out.find("platform: 8 x V100-SXM2-32GB"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("of rank 0 of a job of 8 GPUs"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("8 of 8 priced over their process group's GPUs"), std::string::npos)
      << one.out;
  const double alone = comm_ms(one.out, "rank 0 (");
  const double whole = comm_ms(all.out, "rank 0 (");
  ASSERT_GT(whole, 0.0) << all.out;
  EXPECT_NEAR(alone, whole, 0.10 * whole) << one.out << all.out;
}

// A replay takes every time from the traces: its scenario needs no kernel, host or interconnect
// model and predicts what the same replay with them does; a model-mode trace without them is
// refused, naming the section.
TEST_F(Cli, TraceReplayNeedsNoModelsItDoesNotUse) {
  const std::string configs = UPSIM_CONFIGS_DIR;
  const std::string traces = std::string(UPSIM_SOURCE_ROOT) + "/test/data/param-et-replay/dlrm";
  const auto scenario = [&](const std::string& mode) {
    return "platform:\n  gpu: " + configs +
           "/hardware/v100_sxm2_32gb.yaml\nworkload:\n  model: " + "trace\n  traces: " + traces +
           "\n  mode: " + mode + "\n  host: measured\n  iteration: 10\n";
  };
  std::ofstream(dir_ / "replay.yaml") << scenario("replay");
  std::ofstream(dir_ / "model.yaml") << scenario("model");
  const Result bare = run("run replay.yaml --out bare --no-trace");
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_NE(bare.out.find("kernels: none (replayed); host: none (replayed); interconnect: none "
                          "(replayed)"),
            std::string::npos)
      << bare.out;
  const Result full =
      run("run " + quote(configs + "/trace_dlrm_v100.yaml") + " --out full --no-trace");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto predicted = [](const std::string& out) {
    const size_t at = out.find("predicted iteration time: ");
    return at == std::string::npos ? std::string() : out.substr(at, 40);
  };
  EXPECT_FALSE(predicted(bare.out).empty());
  EXPECT_EQ(predicted(bare.out), predicted(full.out));
  // Its resolved scenario runs again as it is (no section added).
  const Result again = run("run bare/scenario.yaml --out again --no-trace");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(predicted(again.out), predicted(bare.out));
  const Result model = run("run model.yaml --out m --no-trace");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.output.find("missing `kernels`: this workload prices its kernels"),
            std::string::npos)
      << model.output;
}

// A trace of three steps of 100, 300 and 100 us: the summary prints each step's measured and
// predicted time, not only their mean (which would hide a step far off).
TEST_F(Cli, TraceScenariosPrintEveryMeasuredStep) {
  using namespace upsim::test;
  std::vector<std::string> events;
  int64_t t = 0;
  int64_t correlation = 1;
  for (int step = 1; step <= 3; ++step) {
    const int64_t kernel_us = step == 2 ? 280 : 80;
    events.push_back(annotation("ProfilerStep#" + std::to_string(step), kMainTid, std::to_string(t),
                                std::to_string(kernel_us + 20)));
    events.push_back(
        runtime("cudaLaunchKernel", kMainTid, std::to_string(t + 2), "4", correlation));
    events.push_back(gpu("kernel", "some_kernel", 7, std::to_string(t + 8),
                         std::to_string(kernel_us), correlation));
    events.push_back(runtime("cudaStreamSynchronize", kMainTid, std::to_string(t + 7),
                             std::to_string(kernel_us + 5), correlation + 1));
    correlation += 2;
    t += kernel_us + 20;
  }
  fs::create_directories(dir_ / "steps");
  std::ofstream(dir_ / "steps" / "rank0.json") << kineto_json(events);
  const std::string configs = UPSIM_CONFIGS_DIR;
  std::ofstream(dir_ / "steps.yaml")
      << "platform:\n  gpu: " << configs << "/hardware/v100_sxm2_32gb.yaml\n"
      << "  kernels: {model: roofline}\n  host: {model: host_overheads, overheads: " << configs
      << "/host/v100_pytorch_kineto.yaml}\n  interconnect: {model: alpha_beta, link: nvlink2}\n"
      << "workload:\n  model: trace\n  traces: steps\n";
  const Result r = run("run steps.yaml --out o --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.out.find("per step (3 steps; means over the ranks):"), std::string::npos) << r.out;
  for (const auto& [label, ms] : std::vector<std::pair<std::string, double>>{
           {"ProfilerStep#1", 0.1}, {"ProfilerStep#2", 0.3}, {"ProfilerStep#3", 0.1}}) {
    const size_t at = r.out.find("\n" + label + " ");
    ASSERT_NE(at, std::string::npos) << label << "\n" << r.out;
    std::istringstream row(r.out.substr(at + label.size() + 1));
    double measured = 0;
    double predicted = 0;
    row >> measured >> predicted;
    EXPECT_NEAR(measured, ms, 1e-9) << label;
    EXPECT_NEAR(predicted, ms, 0.05 * ms) << label;  // replay: each step as measured
  }
  EXPECT_NE(r.out.find("per-step |error|: geomean"), std::string::npos) << r.out;
}

/// The lines of `csv` split at commas (no quoted fields in these tables).
std::vector<std::vector<std::string>> csv_rows(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream f(line);
    for (std::string field; std::getline(f, field, ',');)
      fields.push_back(field);
    rows.push_back(std::move(fields));
  }
  return rows;
}

// summary.json and the CSV tables read back and agree with the text summary; the same run
// writes the same bytes.
TEST_F(Cli, RunWritesSummaryJsonAndCsvTablesThatAgreeWithTheText) {
  const std::string dlrm4 = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result r = run("run " + dlrm4 + " --out a --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  using upsim::JsonValue;
  const std::string json_text = read_file(dir_ / "a" / "summary.json");
  upsim::JsonCursor cursor(json_text, "summary.json");
  const JsonValue doc = upsim::read_json_value(cursor);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.find("schema")->string, "upsim.summary");
  EXPECT_EQ(doc.find("schema_version")->integer, 1);
  EXPECT_EQ(doc.find("scenario")->find("name")->string, "dlrm_4gpu");
  EXPECT_EQ(doc.find("platform")->find("gpus")->integer, 4);
  EXPECT_EQ(doc.find("platform")->find("gpu")->string, "A100-SXM4-40GB");
  // The text's "predicted iteration time: 3.3562 ms" is the JSON's value to 4 decimals.
  const std::string summary = read_file(dir_ / "a" / "summary.txt");
  const size_t at = summary.find("predicted iteration time: ");
  ASSERT_NE(at, std::string::npos);
  const double text_ms = std::stod(summary.substr(at + 26));
  const double json_ms = doc.find("predicted_iteration_time_ms")->number;
  EXPECT_NEAR(json_ms, text_ms, 5e-5);
  const JsonValue& ranks = *doc.find("ranks");
  ASSERT_EQ(ranks.items.size(), 4u);
  double max_rank_ms = 0.0;
  for (const JsonValue& rank : ranks.items) {
    max_rank_ms = std::max(max_rank_ms, rank.find("iteration_time_ms")->number);
    // compute + exposed comm + waits + idles = the iteration (run_summary.h).
    double sum = 0.0;
    for (const char* part : {"compute_ms", "exposed_communication_ms", "bubble_ms",
                             "rendezvous_wait_ms", "cpu_bound_idle_ms", "other_idle_ms"}) {
      sum += rank.find(part)->number;
    }
    EXPECT_NEAR(sum, rank.find("iteration_time_ms")->number, 1e-6);
  }
  EXPECT_EQ(max_rank_ms, json_ms);
  EXPECT_FALSE(doc.find("links")->items.empty());
  EXPECT_GT(doc.find("memory")->find("total_bytes")->integer, 0);

  // ranks.csv: a header and one row per rank with the JSON's times.
  const auto rank_rows = csv_rows(read_file(dir_ / "a" / "ranks.csv"));
  ASSERT_EQ(rank_rows.size(), 5u);
  EXPECT_EQ(rank_rows[0][2], "iteration_time_ms");
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(std::stod(rank_rows[i + 1][2]), ranks.items[i].find("iteration_time_ms")->number);
  // links.csv: one row per link of the JSON.
  EXPECT_EQ(csv_rows(read_file(dir_ / "a" / "links.csv")).size(),
            doc.find("links")->items.size() + 1);
  // ops.csv: every kernel's time, summed over the 4 ranks, covers their compute.
  double kernel_ms = 0.0;
  for (const auto& row : csv_rows(read_file(dir_ / "a" / "ops.csv"))) {
    if (row[0] == "kernel" || row[0] == "memcpy") kernel_ms += std::stod(row[4]);
  }
  double compute_ms = 0.0;
  for (const JsonValue& rank : ranks.items)
    compute_ms += rank.find("compute_ms")->number;
  EXPECT_GE(kernel_ms, compute_ms * 0.999);

  // Deterministic: a second run writes the same bytes.
  ASSERT_EQ(run("run " + dlrm4 + " --out b --no-trace").exit_code, 0);
  for (const char* file : {"summary.json", "ranks.csv", "links.csv", "ops.csv"})
    EXPECT_EQ(read_file(dir_ / "a" / file), read_file(dir_ / "b" / file)) << file;
}

// The throughput line and summary.json's `throughput`: tokens/s = the global batch's tokens over
// the predicted iteration time; model TFLOP/s per GPU = Megatron-LM's count over it and the
// GPUs; MFU and HFU against the dtype's dense peak of the GPU; DLRM reports samples/s and no
// model FLOPs.
TEST_F(Cli, RunReportsThroughputAndUtilisation) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml");
  const Result r = run("run " + gpt2 + " --out a --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.out.find("\nthroughput: "), std::string::npos) << r.out;
  using upsim::JsonValue;
  const std::string json_text = read_file(dir_ / "a" / "summary.json");
  upsim::JsonCursor cursor(json_text, "summary.json");
  const JsonValue doc = upsim::read_json_value(cursor);
  const double seconds = doc.find("predicted_iteration_time_ms")->number * 1e-3;
  const JsonValue& t = *doc.find("throughput");
  ASSERT_TRUE(t.is_object());
  EXPECT_EQ(t.find("unit")->string, "tokens");
  // gpt2_4gpu: global batch 128 of 128 tokens, 4 A100s in fp32 (19.5 TFLOP/s dense).
  EXPECT_NEAR(t.find("per_s")->number, 128.0 * 128.0 / seconds, 1e-5 * 128.0 * 128.0 / seconds);
  EXPECT_NEAR(t.find("per_gpu_per_s")->number, t.find("per_s")->number / 4.0,
              1e-5 * t.find("per_s")->number);
  EXPECT_EQ(t.find("peak_dtype")->string, "fp32");
  EXPECT_NEAR(t.find("peak_tflops")->number, 19.5, 1e-6);
  const double model = t.find("model_tflops_per_gpu")->number;
  EXPECT_NEAR(t.find("mfu")->number, model / 19.5, 1e-5);
  // No recomputation and the unfused attention computes every score: the kernels do the model's
  // matmuls and a little elementwise work, so the hardware rate is within a few percent of it.
  const double hardware = t.find("hardware_tflops_per_gpu")->number;
  EXPECT_GE(hardware, model * 0.98);
  EXPECT_LE(hardware, model * 1.10);
  EXPECT_LT(t.find("mfu")->number, 1.0);
  EXPECT_NEAR(t.find("hfu")->number, hardware / 19.5, 1e-5);
  const std::string summary = read_file(dir_ / "a" / "summary.txt");
  EXPECT_NE(summary.find(fmt::format("(MFU {:.1f}% of the 19.5 TFLOP/s fp32 dense peak)",
                                     100.0 * t.find("mfu")->number)),
            std::string::npos)
      << summary;

  const Result dlrm = run("run " + quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml") +
                          " --out b --no-trace");
  ASSERT_EQ(dlrm.exit_code, 0) << dlrm.output;
  const std::string dlrm_json = read_file(dir_ / "b" / "summary.json");
  upsim::JsonCursor dlrm_cursor(dlrm_json, "summary.json");
  const JsonValue d = upsim::read_json_value(dlrm_cursor);
  const JsonValue& dt = *d.find("throughput");
  EXPECT_EQ(dt.find("unit")->string, "samples");
  EXPECT_NEAR(dt.find("per_s")->number,
              4096.0 / (d.find("predicted_iteration_time_ms")->number * 1e-3), 1.0);
  EXPECT_EQ(dt.find("mfu")->type, upsim::JsonType::kNull);
  EXPECT_EQ(dt.find("model_tflops_per_gpu")->type, upsim::JsonType::kNull);
}

// A 24-point study of the tiny scenario: the same table at -j1 and -j2, and after a resume;
// another study is refused in the same folder; a point that fails is a row, not a crash.
TEST_F(Cli, SweepRunsEveryPointIntoOneTableThatResumesAndIsTheSameAtAnyJobs) {
  std::ofstream(dir_ / "study.yaml") << "study: tiny_grid\nbase: " << kData << "/tiny.yaml\naxes:\n"
                                     << "  workload.global_batch: [128, 256, 512, 1024]\n"
                                     << "  workload.embeddings.tables.0.pooling: [1, 2, 4]\n"
                                     << "zip:\n  - platform.interconnect.link: [nvlink3, pcie4]\n"
                                     << "    workload.embeddings.dim: [32, 32]\n";
  const Result one = run("sweep study.yaml --out s1 -j 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.out.find("study tiny_grid: 24 points (24 run now, 0 resumed): 24 ok"),
            std::string::npos)
      << one.out;
  const std::string table = read_file(dir_ / "s1" / "results.csv");
  const auto rows = csv_rows(table);
  ASSERT_EQ(rows.size(), 25u) << table;
  EXPECT_EQ(rows[0][0], "point");
  EXPECT_EQ(rows[0][1], "workload.global_batch");
  EXPECT_EQ(rows[0][5], "status");
  // Grid order: the last dimension (the zip) fastest, then pooling, then the batch.
  EXPECT_EQ(rows[1][1], "128");
  EXPECT_EQ(rows[2][3], "pcie4");
  EXPECT_EQ(rows[3][2], "2");
  EXPECT_EQ(rows[24][1], "1024");
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][5], "ok") << table;
    EXPECT_GT(std::stod(rows[i][6]), 0.0);
  }
  // Each point is what `upsim run` predicts for it.
  const Result point = run("run " + kTiny +
                           " --out p --no-trace --quiet --set "
                           "workload.global_batch=512 --set workload.embeddings.tables.0.pooling=4 "
                           "--set platform.interconnect.link=pcie4");
  ASSERT_EQ(point.exit_code, 0) << point.output;
  const std::vector<std::string>& r17 = rows[18];  // batch 512 (3rd), pooling 4 (3rd), pcie4
  ASSERT_EQ(r17[1] + r17[2] + r17[3], "5124pcie4");
  EXPECT_NEAR(std::stod(r17[6]), std::stod(point.out), 5e-5);

  const Result two = run("sweep study.yaml --out s2 -j 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(read_file(dir_ / "s2" / "results.csv"), table);

  // A killed sweep: some points done, no table. It resumes and writes the same table.
  fs::remove(dir_ / "s2" / "results.csv");
  for (int i : {3, 7, 11, 20})
    fs::remove(dir_ / "s2" / "points" / (std::to_string(i) + ".row"));
  const Result resumed = run("sweep study.yaml --out s2 -j 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.out.find("(4 run now, 20 resumed)"), std::string::npos) << resumed.out;
  EXPECT_EQ(read_file(dir_ / "s2" / "results.csv"), table);

  // A study without its base scenario, or without points, is bad input (exit 2) naming the key.
  std::ofstream(dir_ / "nobase.yaml") << "base: missing.yaml\naxes:\n  workload.dtype: [fp32]\n";
  const Result nobase = run("sweep nobase.yaml --out n");
  EXPECT_EQ(nobase.exit_code, 2) << nobase.output;
  EXPECT_NE(nobase.err.find("base: no scenario file"), std::string::npos) << nobase.err;
  std::ofstream(dir_ / "nopoints.yaml") << "base: " << kData << "/tiny.yaml\n";
  const Result nopoints = run("sweep nopoints.yaml --out n");
  EXPECT_EQ(nopoints.exit_code, 2) << nopoints.output;
  EXPECT_NE(nopoints.err.find("a study needs `axes` or `zip`"), std::string::npos) << nopoints.err;

  // Another study in the same folder is refused; --force starts over.
  std::ofstream(dir_ / "other.yaml")
      << "base: " << kData << "/tiny.yaml\naxes:\n  workload.global_batch: [64, oops]\n";
  const Result refused = run("sweep other.yaml --out s2");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.err.find("holds the results of another study"), std::string::npos)
      << refused.err;
  const Result forced = run("sweep other.yaml --out s2 --force");
  EXPECT_EQ(forced.exit_code, 1) << forced.output;  // the `oops` point fails
  const std::string other_table = read_file(dir_ / "s2" / "results.csv");
  const auto other = csv_rows(other_table);
  ASSERT_EQ(other.size(), 3u);
  EXPECT_EQ(other[1][2], "ok");
  EXPECT_EQ(other[2][2], "failed");
  EXPECT_NE(
      other_table.find("\"--set workload.global_batch: expected an integer, got \"\"oops\"\"\""),
      std::string::npos)
      << other_table;
}

// upsim diff: two runs of the tiny DLRM, the second on PCIe instead of NVLink: the iteration
// time and the collectives change, the kernels do not.
TEST_F(Cli, DiffShowsTheIterationTimeBreakdownAndTheOpsThatChanged) {
  ASSERT_EQ(run("run " + kTiny + " --out a --no-trace").exit_code, 0);
  ASSERT_EQ(
      run("run " + kTiny + " --out b --no-trace --set platform.interconnect.link=pcie4").exit_code,
      0);
  const Result d = run("diff a b --top 3 --csv d.csv");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.out.find("predicted iteration time: A "), std::string::npos) << d.out;
  // The tiny DLRM states samples/s (no model FLOPs: no MFU), with its HFU.
  EXPECT_NE(d.out.find("\nthroughput: A "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find(" samples/s, B "), std::string::npos) << d.out;
  EXPECT_EQ(d.out.find("MFU"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("--set platform.interconnect.link=pcie4"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("communication_ms"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("largest changes per op (ms per iteration"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("largest changes per op and kernel"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("collective "), std::string::npos) << d.out;
  const auto rows = csv_rows(read_file(dir_ / "d.csv"));
  ASSERT_GT(rows.size(), 3u);
  EXPECT_EQ(rows[0][5], "delta_ms");
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i][0] == "kernel") {
      EXPECT_EQ(std::stod(rows[i][5]), 0.0) << rows[i][2];
    }
  }
  // The same folders, the same output; a folder without results is an error naming the file.
  EXPECT_EQ(run("diff a b --top 3").out, run("diff a b --top 3").out);
  const Result missing = run("diff a nowhere");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.err.find("nowhere/summary.json: cannot read"), std::string::npos)
      << missing.err;
  EXPECT_EQ(run("diff a b --csv d.csv").exit_code, 2);  // exists: not overwritten unasked
}

// --trace-iterations draws the chosen iterations only; --trace-gzip writes trace.json.gz, the
// same JSON compressed.
TEST_F(Cli, TraceIterationsAndGzipShrinkTheTrace) {
  ASSERT_EQ(run("run " + kTiny + " --out all").exit_code, 0);
  const Result last = run("run " + kTiny + " --out last --trace-iterations last --trace-gzip");
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_TRUE(fs::exists(dir_ / "last" / "trace.json.gz"));
  EXPECT_FALSE(fs::exists(dir_ / "last" / "trace.json"));
  const std::string plain =
      run("run " + kTiny + " --out plain --trace-iterations last").exit_code == 0
          ? read_file(dir_ / "plain" / "trace.json")
          : "";
  ASSERT_FALSE(plain.empty());
  // gunzip with the system's gzip: the same bytes as the uncompressed trace.
  ASSERT_EQ(std::system(("gzip -dc " + quote((dir_ / "last" / "trace.json.gz").string()) + " > " +
                         quote((dir_ / "unzipped.json").string()))
                            .c_str()),
            0);
  EXPECT_EQ(read_file(dir_ / "unzipped.json"), plain);
  const std::string full = read_file(dir_ / "all" / "trace.json");
  EXPECT_LT(plain.size(), full.size());
  // tiny runs 2 iterations: the second alone has no "iteration 0" mark.
  EXPECT_NE(full.find("\"iteration 0\""), std::string::npos);
  EXPECT_EQ(plain.find("\"iteration 0\""), std::string::npos);
  EXPECT_NE(plain.find("\"iteration 1\""), std::string::npos);
  const Result bad = run("run " + kTiny + " --out bad --trace-iterations 3-1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.err.find("--trace-iterations"), std::string::npos) << bad.err;
}

// Plots: a sweep's iteration time against an axis and its breakdown, a run's per-rank
// breakdown and links; each SVG exists and names its axes.
TEST_F(Cli, PlotDrawsSvgsThatNameTheirAxes) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)";
  }
  const Result sweep =
      run("sweep " + quote(kData + "/study_small.yaml") + " --out s --plot workload.global_batch");
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  const std::string iteration = read_file(dir_ / "s" / "results_iteration.svg");
  EXPECT_NE(iteration.find("<svg"), std::string::npos);
  EXPECT_NE(iteration.find("workload.global_batch"), std::string::npos);
  EXPECT_NE(iteration.find("iteration time (ms)"), std::string::npos);
  const std::string breakdown = read_file(dir_ / "s" / "results_breakdown.svg");
  EXPECT_NE(breakdown.find("ms per iteration"), std::string::npos);
  EXPECT_NE(breakdown.find("exposed comm"), std::string::npos);  // a part, without its _ms
  EXPECT_TRUE(fs::exists(dir_ / "s" / "results_iteration.gp"));

  ASSERT_EQ(run("run " + kTiny + " --out r --no-trace").exit_code, 0);
  const Result plot = run("plot r");
  ASSERT_EQ(plot.exit_code, 0) << plot.output;
  const std::string ranks = read_file(dir_ / "r" / "ranks_breakdown.svg");
  EXPECT_NE(ranks.find("rank"), std::string::npos);
  EXPECT_NE(ranks.find("ms per iteration"), std::string::npos);
  const Result bad = run("plot s/results.csv --x nope");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.err.find("no column `nope`"), std::string::npos) << bad.err;
}

// The acceptance study: 200 points, the same table at -j1 and -j2 and after a resume of a sweep
// killed halfway (its table and half its points gone). (mpirun -np 2: the ctest
// sweep_under_mpirun_matches_single_process.)
TEST_F(Cli, TwoHundredPointStudyIsByteIdenticalAtAnyJobsAndAfterAResume) {
  const std::string study = quote(kData + "/study_200.yaml");
  ASSERT_EQ(run("sweep " + study + " --out a -j 1").exit_code, 0);
  ASSERT_EQ(run("sweep " + study + " --out b -j 2").exit_code, 0);
  const std::string table = read_file(dir_ / "a" / "results.csv");
  EXPECT_EQ(csv_rows(table).size(), 201u);
  EXPECT_EQ(read_file(dir_ / "b" / "results.csv"), table);
  fs::remove(dir_ / "b" / "results.csv");
  for (int i = 0; i < 200; i += 2)
    fs::remove(dir_ / "b" / "points" / (std::to_string(i) + ".row"));
  const Result resumed = run("sweep " + study + " --out b -j 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.out.find("(100 run now, 100 resumed)"), std::string::npos) << resumed.out;
  EXPECT_EQ(read_file(dir_ / "b" / "results.csv"), table);
  EXPECT_EQ(read_file(dir_ / "b" / "results.h5"), read_file(dir_ / "a" / "results.h5"));
}

// results.h5 holds the table of results.csv, one table member per column (tools/results_hdf5.h),
// and is the same at any -j.
TEST_F(Cli, SweepWritesTheResultsTableAsHdf5Too) {
  const std::string study = quote(kData + "/study_small.yaml");
  ASSERT_EQ(run("sweep " + study + " --out a -j 1").exit_code, 0);
  ASSERT_EQ(run("sweep " + study + " --out b -j 2").exit_code, 0);
  EXPECT_EQ(read_file(dir_ / "a" / "results.h5"), read_file(dir_ / "b" / "results.h5"));
  const auto rows = csv_rows(read_file(dir_ / "a" / "results.csv"));
  const ResultsTable t(dir_ / "a" / "results.h5");
  EXPECT_EQ(t.members(), rows[0]);
  ASSERT_EQ(t.rows(), rows.size() - 1);
  const std::vector<double> times = t.numbers("iteration_ms");
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_EQ(times[i - 1], std::stod(rows[i][4])) << i;
  EXPECT_EQ(t.member_class("status"), H5T_STRING);
  EXPECT_EQ(t.texts("status")[0], "ok");
  // Integer columns are integers: the point index and the memory bytes.
  EXPECT_EQ(t.member_class("point"), H5T_INTEGER);
  EXPECT_EQ(t.member_class("memory_bytes_per_gpu"), H5T_INTEGER);
  const std::vector<int64_t> points = t.integers("point");
  for (size_t i = 0; i < points.size(); ++i)
    EXPECT_EQ(points[i], static_cast<int64_t>(i));
}

// --point-outputs: each point's own results, whose iteration time is the table's.
TEST_F(Cli, SweepPointOutputsAreEachPointsOwnRun) {
  const Result r = run("sweep " + quote(kData + "/study_small.yaml") + " --out s --point-outputs");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = csv_rows(read_file(dir_ / "s" / "results.csv"));
  for (const int point : {0, 7, 11}) {
    const fs::path own = dir_ / "s" / "points" / std::to_string(point);
    for (const char* f :
         {"summary.txt", "summary.json", "ranks.csv", "links.csv", "ops.csv", "scenario.yaml"}) {
      EXPECT_TRUE(fs::exists(own / f)) << own / f;
    }
    const std::string json_text = read_file(own / "summary.json");
    upsim::JsonCursor cursor(json_text, "summary.json");
    const upsim::JsonValue doc = upsim::read_json_value(cursor);
    EXPECT_EQ(doc.find("predicted_iteration_time_ms")->number,
              std::stod(rows[static_cast<size_t>(point) + 1][4]))
        << point;
  }
}

TEST_F(Cli, BadTraceRanksExitTwoNamingTheOptionAndTheValidRanks) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"x", {"--trace-ranks", "`x` is not a rank", "0-7,56"}},
      {"''", {"--trace-ranks", "is not a rank"}},
      {"0-", {"--trace-ranks", "`0-`"}},
      {"1,,0", {"--trace-ranks", "``"}},
      {"-1", {"--trace-ranks", "`-1`"}},
      {"1.5", {"--trace-ranks", "`1.5`"}},
      {"1-0", {"--trace-ranks", "runs backwards", "0-1"}},
      {"99999999999", {"--trace-ranks", "too large"}},
      {"2", {"--trace-ranks", "rank 2 is not in the graph", "0-1"}},
      {"0,1-5", {"--trace-ranks", "rank 2 is not in the graph", "0-1"}},
  };
  for (const auto& [list, expected] : cases) {
    const Result r = run("run " + kTiny + " --out o --trace-ranks " + list);
    EXPECT_EQ(r.exit_code, 2) << list << "\n" << r.output;
    for (const std::string& text : expected)
      EXPECT_NE(r.output.find(text), std::string::npos) << list << ": " << text << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "o")) << list << ": outputs written";
  }
  const Result no_trace = run("run " + kTiny + " --out o --no-trace --trace-ranks 0");
  EXPECT_EQ(no_trace.exit_code, 2) << no_trace.output;
  EXPECT_NE(no_trace.output.find("--no-trace"), std::string::npos) << no_trace.output;
}

TEST_F(Cli, ExistingOutputsAreNotOverwrittenWithoutForce) {
  ASSERT_EQ(run("run " + kTiny + " --out out").exit_code, 0);
  const Result again = run("run " + kTiny + " --out out");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  EXPECT_EQ(run("run " + kTiny + " --out out --force").exit_code, 0);
}

TEST_F(Cli, DefaultOutputFolderNeverReusesAnExistingOne) {
  ASSERT_EQ(run("run " + kTiny + " --quiet").exit_code, 0);
  ASSERT_EQ(run("run " + kTiny + " --quiet").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "upsim-out" / "tiny" / "summary.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "upsim-out" / "tiny-2" / "summary.txt"));
}

TEST_F(Cli, SameScenarioTwiceGivesByteIdenticalOutputs) {
  ASSERT_EQ(run("run " + kTiny + " --out a").exit_code, 0);
  ASSERT_EQ(run("run " + kTiny + " --out b").exit_code, 0);
  for (const char* f : {"trace.json", "summary.txt", "scenario.yaml"}) {
    EXPECT_EQ(read_file(dir_ / "a" / f), read_file(dir_ / "b" / f)) << f << " differs";
  }
}

TEST_F(Cli, ResolvedScenarioReproducesTheRun) {
  ASSERT_EQ(run("run " + kTiny + " --out a --no-trace").exit_code, 0);
  EXPECT_FALSE(fs::exists(dir_ / "a" / "trace.json"));
  const Result again = run("run a/scenario.yaml --out b --no-trace");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(dir_ / "a" / "summary.txt"), read_file(dir_ / "b" / "summary.txt"));
}

TEST_F(Cli, ResultsOnStdoutWarningsAndProgressOnStderr) {
  // dlrm_4gv100 priced with the B200 calibration (another chip, no fp32 GEMM fit): warnings.
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gv100.yaml") +
                               " --set platform.kernels.calibration=" +
                               quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/b200_xla.yaml");
  const Result r = run("run " + scenario + " --out a --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.out.rfind("scenario: dlrm_4gv100", 0), 0U) << r.out;
  EXPECT_NE(r.out.find("predicted iteration time:"), std::string::npos) << r.out;
  for (const char* progress : {"warning", "simulated ", "outputs: "})
    EXPECT_EQ(r.out.find(progress), std::string::npos) << progress << " on stdout:\n" << r.out;
  EXPECT_NE(r.err.find("upsim: warning: kernel model: calibration fitted on B200-SXM-180GB, used "
                       "for Quadro-GV100"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("simulated "), std::string::npos) << r.err;
  // Without a trace the closing line has no trace share; with one it says its time apart.
  EXPECT_EQ(r.err.find("writing the trace"), std::string::npos) << r.err;
  const Result traced = run("run " + scenario + " --out c");
  ASSERT_EQ(traced.exit_code, 0) << traced.output;
  const std::regex share(
      R"((\d+\.\d+) s(?: in all)? \((\d+\.\d+) s of it writing the trace, (\d+\.\d+) s simulating\))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(traced.err, m, share)) << traced.err;
  EXPECT_NEAR(std::stod(m[2]) + std::stod(m[3]), std::stod(m[1]), 0.0015);
  // summary.txt keeps the warnings with the results.
  EXPECT_NE(read_file(dir_ / "a" / "summary.txt").find("\nwarning: kernel model: calibration"),
            std::string::npos);
  const Result quiet = run("run " + scenario + " --out b --no-trace --quiet");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.out.find('\n'), quiet.out.size() - 1) << quiet.out;
  EXPECT_GT(std::stod(quiet.out), 0.0);
  EXPECT_NE(quiet.err.find("upsim: warning:"), std::string::npos) << quiet.err;
}

// A power cap on the command line: the platform line says at what clock the peaks are priced,
// and the step is slower.
TEST_F(Cli, APowerCapIsNamedOnThePlatformLineAndSlowsTheStep) {
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result stock = run("run " + scenario + " --no-trace --out stock");
  const Result capped = run("run " + scenario +
                            " --no-trace --out capped --set platform.gpu.tdp_w=400 "
                            "--set platform.gpu.power_limit_w=300");
  ASSERT_EQ(stock.exit_code, 0) << stock.output;
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_NE(capped.out.find("4 x A100-SXM4-40GB (SMs at 1281 MHz sustained, of 1410 MHz boost"),
            std::string::npos)
      << capped.out;
  EXPECT_EQ(stock.out.find("sustained"), std::string::npos) << stock.out;
  const auto time_of = [](const std::string& text) {
    const size_t at = text.find("predicted iteration time: ");
    return std::stod(text.substr(at + 26));
  };
  EXPECT_GT(time_of(capped.out), time_of(stock.out));
}

TEST_F(Cli, OverrideChangesThePrediction) {
  const Result base = run("run " + kTiny + " --quiet --no-trace --out a");
  const Result slow = run(
      "run " + kTiny + " --quiet --no-trace --out b --set platform.interconnect.bandwidth=1MB/s");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  EXPECT_LT(std::stod(base.out), std::stod(slow.out));
}

// The header must not keep describing the file's platform after --set changed it: the
// description says which keys changed, in the summary and in the resolved scenario, and a run of
// that resolved scenario prints the same.
TEST_F(Cli, AfterOverridesTheDescriptionSaysWhichKeysChanged) {
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result r =
      run("run " + scenario +
          " --no-trace --out a --set platform.gpus=2 --set platform.partial_fabric=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string marked =
      "(as written before --set platform.gpus, platform.partial_fabric; the lines below are what "
      "runs)";
  EXPECT_NE(r.out.find("scenario: dlrm_4gpu — "), std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(0, r.out.find('\n')).find(marked), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nplatform: 2 x A100-SXM4-40GB"), std::string::npos) << r.out;
  EXPECT_NE(read_file(dir_ / "a" / "scenario.yaml").find(marked), std::string::npos);
  const Result again = run("run a/scenario.yaml --no-trace --out b");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(dir_ / "a" / "summary.txt"), read_file(dir_ / "b" / "summary.txt"));
  // A description the user overrides is theirs.
  const Result own = run("run " + scenario + " --no-trace --out c --set description=mine");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  EXPECT_EQ(own.out.rfind("scenario: dlrm_4gpu — mine\n", 0), 0U) << own.out;
}

// Invariant: halving the embeddings' bytes (tables, lookups, all-to-all payload) never slows an
// iteration, whatever the MLPs' dtype (the casts it adds are cheaper than what it saves) and
// whether FBGEMM's fused backward or torch.optim.SGD's sparse update applies the gradients.
TEST_F(Cli, HalfPrecisionEmbeddingsNeverSlowAnIteration) {
  for (const char* name : {"dlrm_4gpu", "dlrm_8gpu"}) {
    const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/" + name + ".yaml");
    for (const char* update : {"fused", "sparse"}) {
      for (const char* mlp : {"fp32", "fp16"}) {
        const auto time = [&](const std::string& embeddings, const std::string& out) {
          const Result r = run("run " + scenario + " --quiet --no-trace --out " + out +
                               " --set workload.dtype=" + mlp +
                               " --set workload.embeddings.dtype=" + embeddings +
                               " --set workload.embeddings.update=" + update);
          EXPECT_EQ(r.exit_code, 0) << r.output;
          return std::stod(r.out);
        };
        const std::string tag = std::string(name) + update + mlp;
        const double fp32 = time("fp32", tag + "a");
        for (const char* half : {"fp16", "bf16"}) {
          EXPECT_LE(time(half, tag + half), fp32)
              << name << ", " << update << ", MLPs " << mlp << ", embeddings " << half;
        }
      }
    }
  }
}

/// Each rank's iteration time (ms, as printed) from a summary's table, in rank order.
std::vector<std::string> rank_iteration_times(const std::string& summary) {
  std::vector<std::string> times;
  std::istringstream in(summary);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("rank ", 0) != 0 || line.rfind("rank  ", 0) == 0) continue;
    std::istringstream row(line.substr(5));
    std::string rank;
    std::string time;
    row >> rank >> time;
    times.push_back(time);
  }
  return times;
}

// dlrm_4gpu: ranks 0 and 1 have less work than ranks 2 and 3, so for a few iterations they run
// ahead and their wait at the collectives grows. Three iterations (one warm-up) report 4.0602
// ms for them; the default simulates until steady state and reports what a long run does.
TEST_F(Cli, DefaultSimulatesUntilSteadyStateAndMatchesALongExplicitRun) {
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result steady = run("run " + scenario + " --no-trace --out steady");
  const Result longer = run("run " + scenario +
                            " --no-trace --out long --set simulation.iterations=24 "
                            "--set simulation.warmup_iterations=20");
  ASSERT_EQ(steady.exit_code, 0) << steady.output;
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  const std::string summary = read_file(dir_ / "steady" / "summary.txt");
  EXPECT_NE(summary.find("steady state after 8 iterations (warm-up 6)"), std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("warning: no steady state"), std::string::npos) << summary;
  const std::vector<std::string> times = rank_iteration_times(summary);
  const std::vector<std::string> long_times =
      rank_iteration_times(read_file(dir_ / "long" / "summary.txt"));
  ASSERT_EQ(times.size(), 4u) << summary;
  ASSERT_EQ(long_times.size(), 4u);
  // The search's criterion: within 0.1% of what the long run reports, on every rank.
  for (size_t r = 0; r < times.size(); ++r)
    EXPECT_NEAR(std::stod(times[r]), std::stod(long_times[r]), 1e-3 * std::stod(long_times[r]))
        << "rank " << r << "\n"
        << summary;
  for (const std::string& t : times)
    EXPECT_EQ(t, "4.0859") << summary;
  EXPECT_NE(steady.err.find("steady-state search"), std::string::npos) << steady.err;
}

// An explicit `iterations` is honoured, but a transient is never reported silently.
TEST_F(Cli, ExplicitIterationsThatAreNotInSteadyStateWarn) {
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result r = run("run " + scenario +
                       " --no-trace --out out --set simulation.iterations=3 "
                       "--set simulation.warmup_iterations=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.err.find("upsim: warning: iterations 2..3 are not in steady state"),
            std::string::npos)
      << r.err;
  EXPECT_NE(read_file(dir_ / "out" / "summary.txt").find("warning: iterations 2..3 are not in"),
            std::string::npos);
}

/// A scenario whose header has a line starting `# slow scenario:` takes seconds in a Release
/// build; its golden test is opt-in (test/golden/CMakeLists.txt) and the suite does not run it.
bool is_slow_scenario(const fs::path& file) {
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# slow scenario:", 0) == 0) return true;
  }
  return false;
}

/// A summary with every path to a test/data folder cut to its `test/data/...` tail: a trace
/// scenario names its folder as the scenario file does (relative to it), its resolved copy
/// by the absolute path.
std::string without_data_folder_prefix(const std::string& summary) {
  static const std::regex kPathToData(R"([^ ]*test/data/)");
  return std::regex_replace(summary, kPathToData, "test/data/");
}

// Each shipped scenario runs, and its resolved scenario.yaml, run again from another working
// directory, predicts the same (trace folders were kept relative to the old file).
TEST_F(Cli, EveryShippedScenarioRunsAndItsResolvedScenarioReproducesIt) {
  int scenarios = 0;
  fs::create_directories(dir_ / "elsewhere");
  std::vector<fs::directory_entry> entries;
  for (const fs::path& folder :
       {fs::path(UPSIM_CONFIGS_DIR), fs::path(UPSIM_CONFIGS_DIR) / "schema"}) {
    for (const auto& entry : fs::directory_iterator(folder))
      entries.push_back(entry);
  }
  for (const fs::directory_entry& entry : entries) {
    if (entry.path().extension() != ".yaml" || is_slow_scenario(entry.path())) continue;
    ++scenarios;
    const std::string name = entry.path().stem().string();
    const Result r =
        run("run " + quote(entry.path().string()) + " --quiet --no-trace --out " + quote(name));
    ASSERT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.output;
    const Result again = upsim("run " + quote("../" + name + "/scenario.yaml") +
                                   " --quiet --no-trace --out " + quote("../" + name + "-again"),
                               dir_ / "elsewhere");
    ASSERT_EQ(again.exit_code, 0) << name << " resolved:\n" << again.output;
    EXPECT_EQ(without_data_folder_prefix(read_file(dir_ / name / "summary.txt")),
              without_data_folder_prefix(read_file(dir_ / (name + "-again") / "summary.txt")))
        << name;
  }
  EXPECT_GE(scenarios, 2);
}

TEST_F(Cli, ValidateKernelsPrintsHeldOutErrorPerOp) {
  const Result r = run(
      "validate kernels --llmcompass " +
      quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data/llmcompass") + " --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* op : {"gemm", "softmax", "layernorm", "gelu", "held-out"}) {
    EXPECT_NE(r.output.find(op), std::string::npos) << op << "\n" << r.output;
  }
  // Where the parameters came from and which rows are in-sample.
  EXPECT_NE(r.output.find("calibration fitted on A100-SXM4-80GB (LLMCompass A100 sweeps"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("`train` rows of those measurements are in-sample"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("declares no harness"), std::string::npos) << r.output;
  // A table that declares no harness is read as `fitted`, and the command says so.
  std::ofstream(dir_ / "plain.csv") << "op,dtype,m,n,k,time_us\ngemm,fp16,1024,1024,1024,20\n";
  const Result plain = run(
      "validate kernels --llmcompass '' --csv plain.csv --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("note: plain.csv declares no harness"), std::string::npos)
      << plain.output;
}

// The validate commands as a user runs them, through the binary from the repository root: the
// memory figures and one published step (the whole binary links every reader; a clash of two
// readers' names once crashed it there while the in-process tests passed).
TEST_F(Cli, ValidateMemoryAndAWorkloadRowRunFromTheRepositoryRoot) {
  const Result memory = upsim("validate memory", UPSIM_SOURCE_ROOT);
  ASSERT_EQ(memory.exit_code, 0) << memory.output;
  EXPECT_NE(memory.output.find("bounded rows: geomean |error|"), std::string::npos)
      << memory.output;
  const Result row = upsim("validate workloads --rows mpt-1b", UPSIM_SOURCE_ROOT);
  ASSERT_EQ(row.exit_code, 0) << row.output;
  EXPECT_NE(row.output.find("llm-foundry: geomean |error|"), std::string::npos) << row.output;
}

// Every shipped measurement set, per generation, from the repository root: the table with the
// data's provenance and what each calibration prices on defaults.
TEST_F(Cli, ValidateKernelsShippedPrintsEveryGenerationWithProvenance) {
  const Result r = upsim("validate kernels --shipped", UPSIM_SOURCE_ROOT);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"V100 (V100-SXM2-32GB), calibration configs/calibration/v100_deepbench.yaml",
        "A100 (A100-SXM4-80GB), calibration configs/calibration/a100_llmcompass.yaml",
        "H100 (H100-SXM5-80GB), calibration configs/calibration/h100_xla.yaml",
        "H100 with CUDA 12.1's cuBLAS (H100-SXM5-80GB), calibration "
        "configs/calibration/h100_cuda12_1.yaml",
        "attention_forward/flash3          published",
        "rms_norm                          published",
        "no fit of its own (default parameters): attention flash2",
        "gemm/tf32                         published      59        58",
        "gemm/fp32          published", "softmax                           published",
        "cross_entropy                     published",
        "attention_forward_backward/flash1 published      12        12",
        "held-out check (no fit reads it): test/data/tracelens/h100_bf16_gemm.csv",
        "test/data/flash-attention-2/a100_attention_fwd_bwd_tflops.csv\nop",
        "gemm/fp16                         published     362",
        "H200 (H200-SXM-141GB), calibration configs/calibration/h100_xla.yaml (fitted on "
        "H100-SXM5-80GB), no tables of its own",
        "held-out check (no fit reads it): "
        "test/data/hp-rms-norm/h200_flashinfer_fused_add_rmsnorm.csv\nop",
        "test/data/hp-rms-norm/b200_flashinfer_fused_add_rmsnorm.csv\nop"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("fp8; attention flash2"), std::string::npos) << "A100 has no fp8 unit\n"
                                                                       << r.output;
}

TEST_F(Cli, ValidateKernelsLayerPricesEveryOpOfBothPhasesAndTheAllReduces) {
  const std::string root = UPSIM_SOURCE_ROOT;
  const Result r = run(
      "validate kernels --layer --llmcompass " + quote(root + "/test/data/llmcompass") +
      " --layer-data " + quote(root + "/test/data/llmcompass") + " --layer-topology " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/topologies/a100x4_nvlink.yaml") + " --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"prefill (transformer_A100.csv)", "decode (transformerAR_A100.csv)", "held out",
        "source: github.com/PrincetonUniversity/LLMCompass", "a100x4_nvlink.yaml"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  // Every op and both all-reduces, in each phase, and a layer sum per phase.
  for (const char* op :
       {"Q_K_V", "Q_mul_K", "A_mul_V", "Wo_proj", "W1_proj", "W2_proj", "Softmax", "LayerNorm_MHA",
        "LayerNorm_FFN", "GeLU", "AllReduce_MHA", "AllReduce_FFN", "layer sum"}) {
    const size_t first = r.output.find(std::string("  ") + op + " ");
    ASSERT_NE(first, std::string::npos) << op << "\n" << r.output;
    EXPECT_NE(r.output.find(std::string("  ") + op + " ", first + 1), std::string::npos) << op;
  }
}

TEST_F(Cli, CalibrateKernelsWritesAFileAndNeverOverwritesUnasked) {
  const std::string args =
      "calibrate kernels --llmcompass " +
      quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data/llmcompass") + " --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --out fit.yaml";
  const Result first = run(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(fs::exists(dir_ / "fit.yaml"));
  const Result second = run(args);
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_NE(second.output.find("already exists"), std::string::npos) << second.output;
}

// bench/gpu's launch table -> the hardware profile's kernel_overhead (the table is synthetic).
TEST_F(Cli, CalibrateLaunchPrintsTheKernelFloorAndNeverOverwritesUnasked) {
  const std::string table =
      quote(std::string(UPSIM_SOURCE_ROOT) + "/test/unit/calibration/data/launch_synthetic.csv");
  const Result r = run("calibrate launch --csv " + table + " --out floor.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"7 quantities measured on Synthetic GPU at 2026-12-01T00:00:00Z",
        "empty_kernel_launch_and_sync", "kernel_overhead: 2.25us", "wrote floor.yaml"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  std::ifstream in(dir_ / "floor.yaml");
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(written.find("kernel_overhead: 2.25us"), std::string::npos) << written;
  const Result again = run("calibrate launch --csv " + table + " --out floor.yaml");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  const Result missing = run("calibrate launch --csv nothing.csv");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("nothing.csv"), std::string::npos) << missing.output;
}

// bench/gpu's tables (synthetic samples) convert with their `# key: value` metadata.
TEST_F(Cli, ConvertKernelsCarriesTheTablesMetadata) {
  const std::string dir = std::string(UPSIM_SOURCE_ROOT) + "/test/unit/calibration/data/";
  const Result r =
      run("convert kernels --csv " + quote(dir + "microbench_synthetic_gemm.csv") + " --csv " +
          quote(dir + "microbench_synthetic_memory.csv") + " --gpu-name H200 --out tables.h5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("metadata of the tables as file attributes: SYNTHETIC, table_gpu, "
                          "measured_utc, microbench_synthetic_memory.csv:SYNTHETIC"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("wrote tables.h5 (8 rows)"), std::string::npos) << r.output;
}

TEST_F(Cli, ConvertKernelsToHdf5KeepsEveryRowAndItsSplit) {
  const std::string llmcompass = quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data/llmcompass");
  const std::string model =
      " --hardware " + quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") +
      " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml");
  const Result convert = run("convert kernels --llmcompass " + llmcompass + " --out sweeps.h5");
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  EXPECT_NE(convert.output.find("wrote sweeps.h5 (84 rows)"), std::string::npos) << convert.output;
  // Same rows, same split: the validation tables from the CSVs and from the HDF5 file agree.
  const Result from_csv = run("validate kernels --llmcompass " + llmcompass + model);
  const Result from_hdf5 = run("validate kernels --llmcompass '' --hdf5 sweeps.h5" + model);
  ASSERT_EQ(from_csv.exit_code, 0) << from_csv.output;
  ASSERT_EQ(from_hdf5.exit_code, 0) << from_hdf5.output;
  EXPECT_EQ(from_csv.output, from_hdf5.output);
  const Result again = run("convert kernels --llmcompass " + llmcompass + " --out sweeps.h5");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  const Result nothing = run("convert kernels --out empty.h5");
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.output.find("no measurements"), std::string::npos) << nothing.output;
  EXPECT_FALSE(fs::exists(dir_ / "empty.h5"));
}

// --measured-on: a table measured on another GPU of the fit's chip is priced on its profile; an
// entry that names no input table, or has no `=`, is refused.
TEST_F(Cli, MeasuredOnPricesATableOnItsOwnGpuAndRefusesUnknownTables) {
  const std::string root = UPSIM_SOURCE_ROOT;
  const std::string table = root + "/test/data/triton-matmul/a100_pcie_fp32_cublas.csv";
  const std::string pcie = std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_pcie_80gb.yaml";
  const std::string common =
      "validate kernels --llmcompass '' --csv " + quote(table) + " --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml");
  const Result on_pcie = run(common + " --measured-on " + quote(table + "=" + pcie));
  ASSERT_EQ(on_pcie.exit_code, 0) << on_pcie.output;
  EXPECT_NE(on_pcie.output.find("gemm               published      12        12"),
            std::string::npos)
      << on_pcie.output;
  // The same rows read as SXM4 measurements: another (wrong) prediction.
  const Result on_sxm = run(common);
  ASSERT_EQ(on_sxm.exit_code, 0) << on_sxm.output;
  EXPECT_NE(on_pcie.output, on_sxm.output);
  const Result unknown = run(common + " --measured-on " + quote("other.csv=" + pcie));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("`other.csv` is not one of the --csv or --hdf5 tables"),
            std::string::npos)
      << unknown.output;
  // Another chip (V100 for an A100 fit) cannot lend its measurements.
  const Result other_chip =
      run(common + " --measured-on " +
          quote(table + "=" + std::string(UPSIM_CONFIGS_DIR) + "/hardware/v100_sxm2_32gb.yaml"));
  EXPECT_EQ(other_chip.exit_code, 2);
  EXPECT_NE(other_chip.output.find("V100-SXM2-32GB is another chip than --hardware's "
                                   "A100-SXM4-80GB (compute capability 7.0 vs 8.0, 80 vs 108 SMs)"),
            std::string::npos)
      << other_chip.output;
  const Result malformed = run(common + " --measured-on " + quote(table));
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.output.find("expected TABLE=PROFILE"), std::string::npos) << malformed.output;
}

// The kernels of the 8-rank DLRM traces as a measurement table: what model mode describes, each
// with its duration, even ranks train; the table reads back into `validate kernels`.
TEST_F(Cli, ConvertTracesWritesTheTracedKernelsAsAMeasurementTable) {
  const std::string traces =
      quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data/param-et-replay/dlrm");
  const Result r = run("convert traces " + traces + " --out kernels.csv --provenance published");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"gemm/fp32           184 kernels (92 train, 92 held out)",
        "left out: 64 collective kernels",
        "wrote kernels.csv (1102 rows from 8 ranks; GPU: Tesla V100-SXM2-32GB)"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  const std::string table = read_file(dir_ / "kernels.csv");
  EXPECT_TRUE(
      table.starts_with("# source: upsim convert traces dlrm\n# harness: none\n"
                        "# provenance: published\n# gpu: Tesla V100-SXM2-32GB\n"
                        "op,dtype,m,n,k,batch,reads,writes,time_us,split\n"))
      << table.substr(0, 300);
  const Result v = run("validate kernels --llmcompass '' --csv kernels.csv --hardware " +
                       quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/v100_sxm2_32gb.yaml") +
                       " --calibration " +
                       quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("gemm "), std::string::npos) << v.output;
  const Result again = run("convert traces " + traces + " --out kernels.csv");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  const Result bad = run("convert traces " + traces + " --out other.csv --provenance guessed");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--provenance `guessed`; valid: measured, published"),
            std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "other.csv"));
}

// The GPT-3 layer's ops against measured per-kernel tables (synthetic rows): the ops with a row
// are priced and labelled, the others listed as not measured.
TEST_F(Cli, ValidateKernelsLayerFromTablesPricesTheMeasuredOps) {
  const Result r = run(
      "validate kernels --llmcompass '' --csv " + quote(kData + "/layer_tables_synthetic.csv") +
      " --layer-from-tables --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"each kernel op vs its row in the measurement tables", "Q_mul_K [train]", "Softmax ",
        "prefill:", "decode:", "no op of the layer has a row in the tables",
        "not measured (no row with their shape): Q_K_V, A_mul_V"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
}

TEST_F(Cli, BadMeasurementTableNamesFileAndLine) {
  const Result r =
      run("validate kernels --llmcompass '' --csv " + quote(kData + "/bad_measurements.csv") +
          " --hardware " + quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") +
          " --calibration " +
          quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad_measurements.csv:3"), std::string::npos) << r.output;
}

TEST_F(Cli, ValidateTracesReplaysTheEightRankDlrmWithinThreePercent) {
  const Result r =
      run("validate traces " +
          quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data/param-et-replay/dlrm") + " --step 10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ProfilerStep#10"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("19.9010"), std::string::npos) << "rank 1's measured step, in ms\n"
                                                         << r.output;
  EXPECT_NE(r.output.find("geomean |error|"), std::string::npos) << r.output;
  const Result missing = run("validate traces does-not-exist");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("does-not-exist"), std::string::npos) << missing.output;
}

TEST_F(Cli, CalibrateHostOverheadsWritesTheShippedV100File) {
  const std::string dlrm = std::string(UPSIM_SOURCE_ROOT) + "/test/data/param-et-replay/dlrm/";
  std::string args = "calibrate host-overheads --out host.yaml";
  for (const auto& entry : fs::directory_iterator(dlrm)) {
    if (entry.path().string().find("trace.json") != std::string::npos) {
      args += " " + quote(entry.path().string());
    }
  }
  const Result r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(body(read_file(dir_ / "host.yaml")),
            body(read_file(std::string(UPSIM_CONFIGS_DIR) + "/host/v100_pytorch_kineto.yaml")));
  EXPECT_EQ(run(args).exit_code, 2) << "no overwrite without --force";
}

TEST_F(Cli, CalibrateHostOverheadsWritesTheShippedRtx2080TiFileWithCleanedT4) {
  const std::string data = std::string(UPSIM_SOURCE_ROOT) + "/test/data/param-et-replay/";
  const std::string traces = quote(data + "resnet/resnet_kineto.json.gz") + " " +
                             quote(data + "linear/linear_kineto.json.gz");
  const Result r = run("calibrate host-overheads " + traces + " --t4 cleaned --out host.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string written = read_file(dir_ / "host.yaml");
  EXPECT_EQ(body(written), body(read_file(std::string(UPSIM_CONFIGS_DIR) +
                                          "/host/rtx2080ti_pytorch_kineto.yaml")));
  EXPECT_NE(written.find("after Tukey's rule"), std::string::npos) << written;
  const Result bad = run("calibrate host-overheads " + traces + " --t4 median --out other.yaml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("valid: mean, cleaned"), std::string::npos) << bad.output;
}

TEST_F(Cli, ValidateCollectivesIsWithinBoundsOnEveryMeasuredSystem) {
  const Result r = run("validate collectives --configs " + quote(UPSIM_CONFIGS_DIR) + " --data " +
                       quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* system :
       {"A100", "H100", "geomean |error|", "all systems within bounds", "IN-SAMPLE"}) {
    EXPECT_NE(r.output.find(system), std::string::npos) << system << "\n" << r.output;
  }
}

// A reduced leave-one-system-out run (50 evaluations per fold): the tables say what is held out
// and what it was fitted on. The full run is CollectiveCrossValidation in topology_test.
TEST_F(Cli, ValidateCollectivesHeldOutLabelsEveryTable) {
  const std::string args = "validate collectives --held-out --held-out-evaluations 50 --configs " +
                           quote(UPSIM_CONFIGS_DIR) + " --data " +
                           quote(std::string(UPSIM_SOURCE_ROOT) + "/test/data");
  const Result r = run(args + " --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("whose 15 calibrated parameters were fitted on all 166 points"),
            std::string::npos)
      << r.output;
  for (const char* text :
       {"== In-sample validation ==", "IN-SAMPLE",
        "== Held-out validation (leave one system out) ==",
        "HELD OUT: 4x A100 NVLink3 (LLMCompass)", "HELD OUT: GCP A3 Mega 2x8 H100 TCPXO",
        "HELD OUT: NVIDIA DGX H100 1x8", "HELD OUT: VMware 4x8 H100 NDR IB",
        "fitted on 7 other system(s)", "start (prior)", "held out (128K-32M)",
        "PARTLY IN-SAMPLE variant", "own network fitted",
        "measurements: nccl-tests/nccl_tests_allreduce_published.csv (run"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  const Result bad = run(args + " --jobs -1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--jobs must be 0"), std::string::npos) << bad.output;
}

TEST_F(Cli, CalibrateCollectivesWritesARepeatableTuningThatValidateReads) {
  const std::string root = UPSIM_SOURCE_ROOT;
  const std::string args =
      "calibrate collectives --topology " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/topologies/gcp_a3mega_h100_2node.yaml") +
      " --nccl-tests " + quote(root + "/test/data/nccl-tests/gcp_a3mega_2x8_h100_tcpxo.log") +
      " --collective all_reduce --fit launch_overhead,link_families.tcpxo.efficiency"
      " --max-evaluations 40 --out ";
  const Result first = run(args + "a.yaml");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const char* text : {"geomean |e|", "plateau busbw e", "launch_overhead",
                           "link_families.tcpxo.efficiency", "wrote a.yaml"}) {
    EXPECT_NE(first.output.find(text), std::string::npos) << text << "\n" << first.output;
  }
  const Result again = run(args + "a.yaml");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  // The same fit with the systems simulated on two threads (one system here: nothing to share).
  ASSERT_EQ(run(args + "b.yaml --jobs 2").exit_code, 0);
  EXPECT_EQ(read_file(dir_ / "a.yaml"), read_file(dir_ / "b.yaml"));
  const Result bad_jobs = run(args + "c.yaml --jobs -2");
  EXPECT_EQ(bad_jobs.exit_code, 2);
  EXPECT_NE(bad_jobs.output.find("--jobs must be 0"), std::string::npos) << bad_jobs.output;
  const Result validate = run("validate collectives --configs " + quote(UPSIM_CONFIGS_DIR) +
                              " --data " + quote(root + "/test/data") + " --tuning a.yaml");
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  const Result help = run("calibrate collectives --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option : {"--topology", "--nccl-tests", "--collective", "--fit", "--tuning",
                             "--out", "--force", "--max-evaluations", "--validation-systems"}) {
    EXPECT_NE(help.output.find(option), std::string::npos) << option << "\n" << help.output;
  }
}

TEST_F(Cli, DevicesAsInputsAreRefusedNotReadForever) {
  // --nccl-tests /dev/zero and --csv /dev/urandom once never finished (memory kept growing).
  const std::string topology =
      quote(std::string(UPSIM_CONFIGS_DIR) + "/topologies/a100x4_nvlink.yaml");
  const Result zero =
      run("calibrate collectives --topology " + topology + " --nccl-tests /dev/zero --out t.yaml");
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_NE(zero.output.find("/dev/zero: a device, not a regular file"), std::string::npos)
      << zero.output;
  const Result random = run(
      "validate kernels --llmcompass '' --csv /dev/urandom --hardware " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/hardware/a100_sxm4_80gb.yaml") + " --calibration " +
      quote(std::string(UPSIM_CONFIGS_DIR) + "/calibration/a100_llmcompass.yaml"));
  EXPECT_EQ(random.exit_code, 2) << random.output;
  EXPECT_NE(random.output.find("/dev/urandom: a device, not a regular file"), std::string::npos)
      << random.output;
  const Result trace = run("validate traces /dev");
  EXPECT_NE(trace.exit_code, 0) << trace.output;
}

// A per-call harness overhead is declared, not fitted: it is added to every prediction of its
// log, so the fitted launch overhead no longer has to absorb it.
TEST_F(Cli, CalibrateCollectivesAccountsForADeclaredHarnessOverhead) {
  const std::string root = UPSIM_SOURCE_ROOT;
  const std::string topology =
      quote(std::string(UPSIM_CONFIGS_DIR) + "/topologies/gcp_a3mega_h100_2node.yaml");
  const std::string log = root + "/test/data/nccl-tests/gcp_a3mega_2x8_h100_tcpxo.log";
  const std::string args = "calibrate collectives --topology " + topology + " --nccl-tests " +
                           quote(log) +
                           " --collective all_reduce --fit launch_overhead --max-evaluations 60";
  const Result plain = run(args + " --out p.yaml");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const Result with = run(args + " --harness-overhead 40us --out h.yaml");
  ASSERT_EQ(with.exit_code, 0) << with.output;
  EXPECT_NE(with.output.find("harness overhead of 40 us per call"), std::string::npos)
      << with.output;
  EXPECT_NE(read_file(dir_ / "h.yaml").find("harness adding 40 us per call"), std::string::npos);
  EXPECT_EQ(plain.output.find("harness overhead"), std::string::npos) << plain.output;
  EXPECT_NE(read_file(dir_ / "p.yaml"), read_file(dir_ / "h.yaml"));
  const Result bad = run(args + " --harness-overhead 40 --out b.yaml");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--harness-overhead `40`"), std::string::npos) << bad.output;
}

TEST_F(Cli, CalibrateCollectivesNamesTheLineOfABadLog) {
  const std::string topology =
      quote(std::string(UPSIM_CONFIGS_DIR) + "/topologies/a100x4_nvlink.yaml");
  {
    std::ofstream log(dir_ / "broken.log");
    log << "# Collective test starting: all_reduce_perf\n"
           "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
           "        1024           256     float     sum      -1    12.00    0.09    0.09      0\n"
           "        2048           512     float     sum      -1    12.50\n";
  }
  const Result bad =
      run("calibrate collectives --topology " + topology + " --nccl-tests broken.log --out t.yaml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("broken.log:4:"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "t.yaml"));
  const Result wrong_fabric =
      run("calibrate collectives --topology " + topology + " --nccl-tests " +
          quote(std::string(UPSIM_SOURCE_ROOT) +
                "/test/data/nccl-tests/oci_bm.gpu4.8_1x8_a100_40gb.log") +
          " --out t.yaml");
  EXPECT_EQ(wrong_fabric.exit_code, 2);
  EXPECT_NE(wrong_fabric.output.find("the log lists 8 ranks"), std::string::npos)
      << wrong_fabric.output;
  const Result pairs =
      run("calibrate collectives --topology a.yaml --topology b.yaml "
          "--nccl-tests x.log --out t.yaml");
  EXPECT_EQ(pairs.exit_code, 2);
  EXPECT_NE(pairs.output.find("one --topology for all logs or one per log"), std::string::npos)
      << pairs.output;
}

TEST_F(Cli, FabricScenarioReportsBusiestLinksAndNvlinkWhatIfChangesTheRun) {
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");
  const Result base = run("run " + scenario + " --no-trace --out a");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  EXPECT_NE(base.output.find("busiest links"), std::string::npos) << base.output;
  EXPECT_NE(base.output.find("(nvlink3)"), std::string::npos) << base.output;
  const Result slow = run("run " + scenario +
                          " --quiet --no-trace --out b --set "
                          "platform.topology.node.link_kinds.nvlink3.bandwidth=1GB/s");
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  const Result fast = run("run " + scenario + " --quiet --no-trace --out c");
  EXPECT_GT(std::stod(slow.out), std::stod(fast.out));
}

/// Writes `ranks` Chakra traces of a data-parallel step (a 2 ms kernel, an all-reduce of 256 MiB,
/// a 2 ms kernel; measured all-reduce 20 ms) to `dir`/rank<r>.et and a model-mode scenario over
/// them on a DGX-1 (V100) fabric with the flow network to `dir`/chakra.yaml.
void write_chakra_scenario(const fs::path& dir, int ranks) {
  namespace chakra = upsim::test::chakra;
  fs::create_directories(dir / "dp");
  for (int r = 0; r < ranks; ++r) {
    std::ofstream(dir / "dp" / ("rank" + std::to_string(r) + ".et"), std::ios::binary)
        << chakra::data_parallel_rank(2000, int64_t{256} << 20, 20000);
  }
  const std::string configs = UPSIM_CONFIGS_DIR;
  std::ofstream(dir / "chakra.yaml") << "platform:\n"
                                     << "  gpu: " << configs << "/hardware/v100_sxm2_32gb.yaml\n"
                                     << "  kernels: {model: roofline}\n"
                                     << "  host: {model: host_overheads, overheads: " << configs
                                     << "/host/v100_pytorch_kineto.yaml}\n"
                                     << "  topology: " << configs << "/topologies/dgx1_v100.yaml\n"
                                     << "  interconnect: {model: flow}\n"
                                     << "workload: {model: trace, traces: dp, mode: model}\n";
}

TEST_F(Cli, ChakraScenarioRunsAndAnNvlinkWhatIfChangesOnlyTheModelPrediction) {
  write_chakra_scenario(dir_, 8);
  const Result full = run("run chakra.yaml --out full");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  for (const char* text :
       {"trace (Chakra ET, model mode) of 8 ranks", "kept measured 16 of 16 kernels",
        "0 of 8 collectives", "measured (ms)", "geomean |error|"}) {
    EXPECT_NE(full.output.find(text), std::string::npos) << text << "\n" << full.output;
  }
  for (const char* f : {"trace.json", "summary.txt", "scenario.yaml"})
    EXPECT_TRUE(fs::exists(dir_ / "full" / f)) << f;

  const std::string halved = " --set platform.topology.node.link_kinds.nvlink2.bandwidth=12.5GB/s";
  auto predicted_ms = [&](const std::string& out, const std::string& sets) {
    const Result r = run("run chakra.yaml --quiet --no-trace --out " + out + sets);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? std::stod(r.out) : 0.0;
  };
  const double base = predicted_ms("a", "");
  const double slow = predicted_ms("b", halved);
  // The kernels keep their measured 2 + 2 ms; NVLink at half its bandwidth stretches the 256 MiB
  // ring all-reduce, which then takes most of the rest, by more than half.
  EXPECT_GT(base, 4.0);
  EXPECT_GT(slow - 4.0, 1.5 * (base - 4.0)) << base << " " << slow;
  const double alpha_beta = predicted_ms("c",
                                         " --set platform.interconnect.model=alpha_beta"
                                         " --set platform.interconnect.link=nvlink2");
  EXPECT_NE(alpha_beta, base);
  // Replay: the measured 2 + 20 + 2 ms whatever the fabric.
  EXPECT_DOUBLE_EQ(predicted_ms("d", " --set workload.mode=replay"), 24.0);
  EXPECT_DOUBLE_EQ(predicted_ms("e", " --set workload.mode=replay" + halved), 24.0);
}

TEST_F(Cli, ChakraScenarioKeysWithBadValuesNameTheKey) {
  write_chakra_scenario(dir_, 2);
  const std::string kineto = std::string(UPSIM_SOURCE_ROOT) + "/test/data/param-et-replay/dlrm";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"workload.format=protobuf", {"workload.format", "chakra", "kineto"}},
      {"workload.format=kineto", {"workload.format", "no Kineto trace"}},
      {"workload.host=modelled", {"workload.host", "must be measured"}},
      {"workload.iteration=3", {"workload.iteration", "not for Chakra traces"}},
      {"workload.mode=modle", {"workload.mode", "model"}},
      {"workload.traces=" + kineto + " --set workload.format=chakra",
       {"workload.format", "no Chakra trace"}},
  };
  for (const auto& [set, expected] : cases) {
    const Result r = run("run chakra.yaml --no-trace --out x --set " + set);
    EXPECT_EQ(r.exit_code, 2) << set << "\n" << r.output;
    for (const std::string& text : expected)
      EXPECT_NE(r.output.find(text), std::string::npos) << set << ": " << text << "\n" << r.output;
  }
}

TEST_F(Cli, ShippedChakraExampleReplaysTheTraceAndCallsItsMeasuredTimeAnUpperBound) {
  const std::string scenario = quote(std::string(UPSIM_CONFIGS_DIR) + "/trace_chakra_example.yaml");
  const Result replay = run("run " + scenario + " --no-trace --out a");
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  // The list-scheduling replay of the trace's JSON dump (test/data/chakra/SOURCES.md): 297046 us.
  EXPECT_NE(replay.output.find("predicted iteration time: 297.0460 ms"), std::string::npos)
      << replay.output;
  EXPECT_NE(replay.output.find("an upper bound"), std::string::npos) << replay.output;
  EXPECT_NE(replay.output.find("27356.0000"), std::string::npos) << replay.output;  // the window
  // The window is not an iteration: no error column (it printed -98.91% error), and the reason.
  EXPECT_NE(replay.out.find("measured (ms) predicted (ms)\n"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("no error: chakra.0.et.gz: no node has a start time, so the measured "
                            "time is the execution-trace observer's window"),
            std::string::npos)
      << replay.out;
  EXPECT_NE(replay.out.find("27356.0000       297.0460\nno error:"), std::string::npos)
      << replay.out;
  for (const char* text : {"geomean |error|", "what-if"})
    EXPECT_EQ(replay.out.find(text), std::string::npos) << text << "\n" << replay.out;
  const Result model =
      run("run " + scenario + " --quiet --no-trace --out b --set workload.mode=model");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  EXPECT_NE(std::stod(model.out), 297.046);
}

TEST_F(Cli, ATraceOnAnotherPlatformPrintsAWhatIfChangeNotAnError) {
  // The summary compared every run with the traced one as an "error", whatever the platform.
  const std::string configs = UPSIM_CONFIGS_DIR;
  const std::string scenario = quote(configs + "/trace_dlrm_v100.yaml");
  const std::string a100 =
      " --set platform.gpu=" + quote(configs + "/hardware/a100_sxm4_40gb.yaml");
  const std::string model = " --set workload.mode=model";
  const auto is_error_table = [](const Result& r) {
    return r.out.find("predicted (ms)     error\n") != std::string::npos &&
           r.out.find("geomean |error|") != std::string::npos &&
           r.out.find("what-if") == std::string::npos;
  };
  const auto is_what_if = [](const Result& r, const std::string& reason) {
    return r.out.find("what-if: " + reason) != std::string::npos &&
           r.out.find("predicted (ms)    change\n") != std::string::npos &&
           r.out.find("geomean |error|") == std::string::npos &&
           r.out.find("predicted (ms)     error\n") == std::string::npos;
  };
  // The traces' GPU (deviceProperties "Tesla V100-SXM2-32GB") is platform.gpu: an accuracy, in
  // replay and in model mode (kernels re-priced on the measured GPU).
  const Result replay = run("run " + scenario + " --no-trace --out a");
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_TRUE(is_error_table(replay)) << replay.out;
  const Result same = run("run " + scenario + " --no-trace --out b" + model);
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_TRUE(is_error_table(same)) << same.out;
  // Re-priced on an A100: a change, not an error.
  const Result other = run("run " + scenario + " --no-trace --out c" + model + a100);
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_TRUE(is_what_if(other,
                         "platform.gpu is A100-SXM4-40GB, the traces ran on Tesla V100-SXM2-32GB; "
                         "--set platform.gpu; measured is the traced run"))
      << other.out;
  // Host time by another host's model, or any other platform override: a what-if too.
  const Result host = run("run " + scenario + " --no-trace --out d --set workload.host=platform");
  ASSERT_EQ(host.exit_code, 0) << host.output;
  EXPECT_TRUE(is_what_if(host,
                         "host time priced by platform.host (host_overheads), not the "
                         "traced host"))
      << host.out;
  const Result link = run("run " + scenario + " --no-trace --out e" + model +
                          " --set platform.interconnect.link=nvlink3");
  ASSERT_EQ(link.exit_code, 0) << link.output;
  EXPECT_TRUE(is_what_if(link, "--set platform.interconnect.link;")) << link.out;
  // Replay prices nothing with the platform: another GPU is a what-if with a warning that the
  // prediction is still the measured platform's.
  const Result replayed = run("run " + scenario + " --no-trace --out f" + a100);
  ASSERT_EQ(replayed.exit_code, 0) << replayed.output;
  EXPECT_TRUE(is_what_if(replayed, "platform.gpu is A100-SXM4-40GB")) << replayed.out;
  EXPECT_NE(replayed.err.find("upsim: warning: the platform is not the measured one (platform.gpu "
                              "is A100-SXM4-40GB"),
            std::string::npos)
      << replayed.err;
  EXPECT_NE(replayed.err.find("so the prediction is the measured platform's"), std::string::npos)
      << replayed.err;

  // Chakra traces record no GPU: the scenario's platform as written is the measured one, and a
  // --set on it is a what-if.
  write_chakra_scenario(dir_, 8);
  const Result chakra = run("run chakra.yaml --no-trace --out g");
  ASSERT_EQ(chakra.exit_code, 0) << chakra.output;
  EXPECT_TRUE(is_error_table(chakra)) << chakra.out;
  const Result chakra_a100 = run("run chakra.yaml --no-trace --out h" + a100);
  ASSERT_EQ(chakra_a100.exit_code, 0) << chakra_a100.output;
  EXPECT_TRUE(is_what_if(chakra_a100, "--set platform.gpu; measured is the traced run"))
      << chakra_a100.out;
}

TEST_F(Cli, AProfileTheScenarioSaysTheTracesRanOnMakesTheRunAValidation) {
  // The traces record "Tesla V100-SXM2-32GB", which the rule does not take for the 16 GB part's
  // profile (a GPU name no profile spells, such as an OEM part, is the same case): a what-if,
  // until the scenario file says the profile stands for that name (platform.gpu_recorded_as);
  // the summary then says so, and an error is printed.
  const std::string configs = UPSIM_CONFIGS_DIR;
  std::string text = read_file(fs::path(configs) / "trace_dlrm_v100.yaml");
  const auto replace_line = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace_line("gpu: hardware/v100_sxm2_32gb.yaml",
               "gpu: " + configs + "/hardware/v100_sxm2_16gb.yaml");
  replace_line("calibration/v100_deepbench.yaml", configs + "/calibration/v100_deepbench.yaml");
  replace_line("host/v100_pytorch_kineto.yaml", configs + "/host/v100_pytorch_kineto.yaml");
  replace_line("../test/data/param-et-replay/dlrm", configs + "/../test/data/param-et-replay/dlrm");
  std::ofstream(dir_ / "other.yaml") << text;
  const Result other = run("run other.yaml --no-trace --out a --set workload.mode=model");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.out.find("what-if: platform.gpu is V100-SXM2-16GB"), std::string::npos)
      << other.out;
  replace_line("  gpu: ", "  gpu_recorded_as: [Tesla V100-SXM2-32GB]\n  gpu: ");
  std::ofstream(dir_ / "stated.yaml") << text;
  const Result stated = run("run stated.yaml --no-trace --out b --set workload.mode=model");
  ASSERT_EQ(stated.exit_code, 0) << stated.output;
  EXPECT_EQ(stated.out.find("what-if"), std::string::npos) << stated.out;
  EXPECT_NE(stated.out.find("geomean |error|"), std::string::npos) << stated.out;
  EXPECT_NE(stated.out.find("measured on: V100-SXM2-16GB recorded as Tesla V100-SXM2-32GB "
                            "(platform.gpu_recorded_as: the profile stands for it)"),
            std::string::npos)
      << stated.out;
  // A name the traces did not record is an error naming the key and what they recorded.
  const Result wrong =
      run("run stated.yaml --no-trace --out c --set 'platform.gpu_recorded_as=[A100-PG509-200]'");
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("platform.gpu_recorded_as: `A100-PG509-200` is no GPU the "
                           "measurements recorded (Tesla V100-SXM2-32GB)"),
            std::string::npos)
      << wrong.err;
}

TEST_F(Cli, AnH100TraceUnderCudasOwnNameIsMeasuredOnTheH100Profile) {
  // CUDA names the H100 SXM5 "NVIDIA H100 80GB HBM3", which the name rule cannot tell from the
  // PCIe part; the profile lists that name (recorded_names), so its traces validate, while a
  // trace under another H100's name stays a what-if.
  const std::string configs = UPSIM_CONFIGS_DIR;
  const auto write_trace = [&](const std::string& gpu_name) {
    fs::create_directories(dir_ / "h100");
    std::ofstream(dir_ / "h100" / "rank0.pt.trace.json")
        << R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": ")" << gpu_name
        << R"(", "numSms": 132}], "traceEvents": [)"
        << R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, )"
        << R"("tid": 100, "ts": 0, "dur": 100, "args": {}},)"
        << R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100, "ts": 10, )"
        << R"("dur": 30, "args": {}},)"
        << R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, )"
        << R"("tid": 100, "ts": 20, "dur": 5, "args": {"correlation": 1}},)"
        << R"({"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 25, )"
        << R"("dur": 50, "args": {"device": 0, "stream": 7, "correlation": 1}},)"
        << R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 100, )"
        << R"("tid": 100, "ts": 50, "dur": 27, "args": {"correlation": 2}}]})";
  };
  std::ofstream(dir_ / "h100.yaml")
      << "platform:\n  gpu: " << configs << "/hardware/h100_sxm5_80gb.yaml\n"
      << "  kernels: {model: roofline}\n  host: {model: host_overheads, overheads: " << configs
      << "/host/v100_pytorch_kineto.yaml}\n  interconnect: {model: alpha_beta, link: nvlink2}\n"
      << "workload: {model: trace, traces: h100, mode: replay, host: measured}\n";
  write_trace("NVIDIA H100 80GB HBM3");
  const Result sxm = run("run h100.yaml --no-trace --out a");
  ASSERT_EQ(sxm.exit_code, 0) << sxm.output;
  EXPECT_NE(sxm.out.find("geomean |error|"), std::string::npos) << sxm.out;
  EXPECT_EQ(sxm.out.find("what-if"), std::string::npos) << sxm.out;
  write_trace("NVIDIA H100 NVL");
  const Result nvl = run("run h100.yaml --no-trace --out b");
  ASSERT_EQ(nvl.exit_code, 0) << nvl.output;
  EXPECT_NE(nvl.out.find("what-if: platform.gpu is H100-SXM5-80GB, the traces ran on NVIDIA H100 "
                         "NVL"),
            std::string::npos)
      << nvl.out;
}

/// Writes `dir`/gpt.yaml: a 4-layer GPT (hidden 1024, 16 heads, seq 512, fp16, 8 sequences) on
/// one DGX A100 with the flow network, TP 4 x PP 2 unless overridden.
void write_small_transformer_scenario(const fs::path& dir) {
  const std::string configs = UPSIM_CONFIGS_DIR;
  std::ofstream(dir / "gpt.yaml") << "platform:\n"
                                  << "  gpu: " << configs << "/hardware/a100_sxm4_80gb.yaml\n"
                                  << "  kernels: {model: calibrated, calibration: " << configs
                                  << "/calibration/a100_llmcompass.yaml}\n"
                                  << "  host: {model: host_overheads, overheads: " << configs
                                  << "/host/v100_pytorch_kineto.yaml}\n"
                                  << "  topology: " << configs << "/topologies/dgx_a100.yaml\n"
                                  << "  interconnect: {model: flow}\n"
                                  << "workload:\n"
                                  << "  model: transformer\n"
                                  << "  layers: 4\n"
                                  << "  hidden: 1024\n"
                                  << "  heads: 16\n"
                                  << "  vocab: 32000\n"
                                  << "  seq: 512\n"
                                  << "  global_batch: 8\n"
                                  << "  dtype: fp16\n"
                                  << "  parallelism: {tensor: 4, pipeline: 2, data: 1}\n"
                                  << "simulation: {iterations: 2, warmup_iterations: 1}\n";
}

TEST_F(Cli, DoublingNvlinkBandwidthNeverSlowsATransformerIteration) {
  write_small_transformer_scenario(dir_);
  // DGX A100: 12 NVLink3 links of 25 GB/s per GPU to the NVSwitches (nodes/dgx_a100.yaml).
  const std::string doubled = " --set platform.topology.node.link_kinds.nvlink3.bandwidth=50GB/s";
  const std::vector<std::string> layouts = {
      "",  // TP 4 x PP 2
      " --set workload.parallelism.tensor=8 --set workload.parallelism.pipeline=1",
      " --set workload.parallelism.tensor=2 --set workload.parallelism.data=2 "
      "--set workload.parallelism.sequence=true --set workload.parallelism.zero=1",
      " --set workload.parallelism.tensor=1 --set workload.parallelism.pipeline=1 "
      "--set workload.parallelism.data=8",
  };
  int n = 0;
  for (const std::string& layout : layouts) {
    const std::string out = " --out r" + std::to_string(n++);
    const Result base = run("run gpt.yaml --quiet --no-trace" + out + "a" + layout);
    const Result fast = run("run gpt.yaml --quiet --no-trace" + out + "b" + layout + doubled);
    ASSERT_EQ(base.exit_code, 0) << layout << "\n" << base.output;
    ASSERT_EQ(fast.exit_code, 0) << layout << "\n" << fast.output;
    EXPECT_LE(std::stod(fast.out), std::stod(base.out)) << layout;
  }
}

TEST_F(Cli, InconsistentTransformerLayoutsExitTwoNamingTheKey) {
  write_small_transformer_scenario(dir_);
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      // 6 heads over tensor parallel 4
      {"--set workload.heads=6", {"workload.heads", "not divisible by tensor parallel 4"}},
      // 4 layers over pipeline 2 x 4 model chunks
      {"--set workload.parallelism.virtual_stages=4",
       {"workload.layers", "pipeline 2 x virtual_stages 4 = 8"}},
      // 8 sequences in micro-batches of 3 on data parallel 1
      {"--set workload.micro_batch=3", {"workload.global_batch", "micro_batch 3 x data 1"}},
      {"--set workload.dtype=fp4", {"workload.dtype", "fp4", "bf16"}},
  };
  for (const auto& [set, expected] : cases) {
    const Result r = run("run gpt.yaml --quiet --no-trace --out o " + set);
    EXPECT_EQ(r.exit_code, 2) << set << "\n" << r.output;
    for (const std::string& text : expected)
      EXPECT_NE(r.output.find(text), std::string::npos) << set << ": " << text << "\n" << r.output;
  }
}

TEST_F(Cli, ATransformerThatDoesNotFitTheGpuIsAnErrorOrWithMemoryCheckWarnAWarning) {
  write_small_transformer_scenario(dir_);
  // 52B parameters on 8 GPUs: weights, gradients and Adam state alone exceed 80 GiB per GPU.
  const std::string big =
      " --set workload.layers=16 --set workload.hidden=16384 --set workload.heads=128";
  const Result error = run("run gpt.yaml --no-trace --out a" + big);
  EXPECT_EQ(error.exit_code, 2) << error.output;
  for (const char* text : {"workload", "needs ", "GiB of GPU memory", "more than the 80 GiB",
                           "A100-SXM4-80GB", "platform.memory_check"}) {
    EXPECT_NE(error.output.find(text), std::string::npos) << text << "\n" << error.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "a" / "summary.txt"));
  const Result warn =
      run("run gpt.yaml --no-trace --out b" + big + " --set platform.memory_check=warn");
  ASSERT_EQ(warn.exit_code, 0) << warn.output;
  EXPECT_NE(warn.output.find("warning: the workload needs "), std::string::npos) << warn.output;
  EXPECT_NE(warn.output.find("predicted iteration time"), std::string::npos) << warn.output;
}

// ---- upsim plan -------------------------------------------------------------------------------

// A small GPT-2 on 4 GPUs: every layout the space holds is ranked or left out with a reason; the
// best is no slower than the scenario's own, and best.yaml reproduces its time; the same
// ranking at any -j; a DLRM scenario goes to the sharding search, a trace is refused.
TEST_F(Cli, PlanRanksLayoutsAndItsBestScenarioReproducesTheTime) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.global_batch=32 --set workload.micro_batch=8 "
                           "--set workload.layers=4";
  const Result r = run("plan " + gpt2 + " --out p -j 2 --top 50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex row(
      R"(^ *(\d+)  (TP\d+ PP\d+(?: VP\d+)? DP\d+ mb\d+(?: with [a-z +]+[a-z])?)( \*)? +(\d+\.\d+) .*)");
  std::vector<double> times;
  double own_ms = -1.0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    times.push_back(std::stod(m[4]));
    if (m[3].matched) own_ms = std::stod(m[4]);
  }
  ASSERT_GE(times.size(), 10U) << r.out;
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end())) << r.out;
  ASSERT_GT(own_ms, 0.0) << r.out;
  EXPECT_LE(times.front(), own_ms);
  // plan.csv: one row per layout, with its outcome; the simulated ones are the ranked ones.
  const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
  size_t simulated = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    simulated += rows[i][2] == "simulated";
    if (rows[i][2] != "simulated") {
      EXPECT_FALSE(rows[i].back().empty()) << rows[i][0];
    }
  }
  EXPECT_EQ(simulated, times.size());
  // best.yaml runs to the time the ranking gave it.
  const Result again = run("run p/best.yaml --quiet --no-trace --out again");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NEAR(std::stod(again.out), times.front(), 0.005);
  // The same ranking at -j 1; an existing folder is not overwritten unasked.
  const Result serial = run("plan " + gpt2 + " --out p --force --top 50");
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  EXPECT_EQ(serial.out, r.out);
  EXPECT_EQ(run("plan " + gpt2 + " --out p").exit_code, 2);
  // Progress lines on stderr, one per batch.
  EXPECT_NE(r.err.find("plan: 5 layouts simulated in "), std::string::npos) << r.err;
  // A DLRM scenario is handed over to the sharding search; a trace has no layout to search.
  const Result dlrm = run("plan " + kTiny + " --out q");
  ASSERT_EQ(dlrm.exit_code, 0) << dlrm.output;
  EXPECT_NE(dlrm.err.find("handing over to `upsim shard`"), std::string::npos) << dlrm.err;
  EXPECT_TRUE(fs::exists(dir_ / "q" / "sharding_plan.yaml"));
  const Result trace =
      run("plan " + quote(std::string(UPSIM_CONFIGS_DIR) + "/trace_dlrm_v100.yaml") + " --out t");
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_NE(trace.err.find("upsim plan lays out transformer training"), std::string::npos)
      << trace.err;
}

// A layout over the GPU's memory is tried with the distributed optimizer, then with it selective
// and full recompute, and keeps the first that fits (in its label); a layout that fits is never
// given recompute.
TEST_F(Cli, PlanTriesMemorySaversOnLayoutsThatDoNotFit) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.seq=2048 --set workload.micro_batch=8 "
                           "--set workload.global_batch=32 --set platform.memory_check=warn";
  const Result r = run("plan " + gpt2 + " --out p -j 2 --top 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
  size_t saved = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::string& label = rows[i][0];
    const bool with_savers = label.find(" (zero 1") != std::string::npos;
    saved += with_savers;
    if (rows[i][2] == "no_memory") {
      EXPECT_FALSE(with_savers) << label;
    }
    if (label.find(" with ") != std::string::npos) continue;  // a framework-options variant
    // TP2 DP2 mb16 needs 27+ GiB of activations alone at seq 2048: not without savers.
    if (label.rfind("TP2 PP1 DP2 mb16", 0) == 0) {
      EXPECT_EQ(label, "TP2 PP1 DP2 mb16 (zero 1 + selective recompute)");
      EXPECT_EQ(rows[i][2], "simulated");
    }
    // mb1 fits as it is.
    if (label.rfind("TP1 PP1 DP4 mb1", 0) == 0) {
      EXPECT_EQ(label, "TP1 PP1 DP4 mb1");
    }
  }
  EXPECT_GT(saved, 0U) << r.out;

  // Without savers the layouts that needed them are refused as they are.
  const Result plain = run("plan " + gpt2 + " --out q -j 2 --top 100 --no-memory-savers");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto plain_rows = csv_rows(read_file(dir_ / "q" / "plan.csv"));
  bool refused_mb16 = false;
  for (size_t i = 1; i < plain_rows.size(); ++i) {
    EXPECT_EQ(plain_rows[i][0].find(" (zero 1"), std::string::npos) << plain_rows[i][0];
    // Neither the distributed optimizer nor FSDP as a framework option either.
    EXPECT_EQ(plain_rows[i][0].find("optimizer"), std::string::npos) << plain_rows[i][0];
    EXPECT_EQ(plain_rows[i][0].find("fsdp"), std::string::npos) << plain_rows[i][0];
    refused_mb16 =
        refused_mb16 || (plain_rows[i][0] == "TP2 PP1 DP2 mb16" && plain_rows[i][2] == "no_memory");
  }
  EXPECT_TRUE(refused_mb16) << plain.out;
}

// The fastest layouts are tried again with the framework options their keys leave open: each
// variant belongs to one of the --refine fastest layouts, says its options in the label and in
// plan.csv, and is simulated, refused with the reason, or (FSDP on this GPT-2) ranked; --refine 0
// tries none.
// A compiled scenario of torchtitan's modules is tried with torchtitan's own overlap, async TP,
// not Transformer Engine's (which those modules refuse).
TEST_F(Cli, PlanTriesAsyncTpOnACompiledTorchtitanScenario) {
  const std::set<std::string> options =
      plan_framework_options("transformer_async_tp.yaml", "workload.parallelism.async_tp=false", 3);
  EXPECT_EQ(options.count("async tp"), 1U);
  EXPECT_EQ(options.count("tp overlap"), 0U);
}

// A Megatron-Core MoE scenario over expert parallel (tensor 1, the all-to-all dispatcher) is
// tried with the flex dispatcher on DeepEP, alone and with each sharding; a dense one never.
TEST_F(Cli, PlanTriesDeepEpAndTheEpOverlapOnAMegatronMoeScenario) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.layers=4 --set workload.dtype=bf16"
                           " --set workload.attention=flash --set platform.memory_check=warn"
                           " --set workload.global_batch=16 --set workload.micro_batch=2";
  for (const bool moe : {true, false}) {
    SCOPED_TRACE(moe);
    fs::remove_all(dir_ / "p");
    const std::string set =
        moe ? " --set workload.moe.experts=4 --set workload.moe.top_k=2" : std::string();
    const Result r = run("plan " + gpt2 + set + " --out p -j 2 --top 100 --refine 3");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
    ASSERT_EQ(rows.front()[10], "framework_options");
    std::set<std::string> options;
    for (size_t i = 1; i < rows.size(); ++i) {
      if (rows[i][10].find("deepep") == std::string::npos) continue;
      options.insert(rows[i][10]);
      EXPECT_NE(rows[i][7], "1") << rows[i][0];  // expert parallel
      EXPECT_EQ(rows[i][3], "1") << rows[i][0];  // tensor 1
    }
    if (moe) {
      EXPECT_EQ(options.count("deepep"), 1U) << r.output;
      EXPECT_EQ(options.count("distributed optimizer + deepep"), 1U) << r.output;
      EXPECT_EQ(options.count("deepep + ep a2a overlap"), 1U) << r.output;
    } else {
      EXPECT_TRUE(options.empty());
    }
    std::set<std::string> overlapped;
    for (size_t i = 1; i < rows.size(); ++i) {
      if (rows[i][10].find("ep a2a overlap") != std::string::npos) overlapped.insert(rows[i][10]);
    }
    if (moe) {
      EXPECT_EQ(overlapped.count("ep a2a overlap"), 1U) << r.output;
    } else {
      EXPECT_TRUE(overlapped.empty());
    }
  }
}

// A torchao tensorwise scenario under FSDP is tried with FSDP's float8 weight all-gather, never
// with async TP (which float8 refuses).
TEST_F(Cli, PlanTriesFloat8AllGatherOnATensorwiseFsdpScenario) {
  const std::set<std::string> options = plan_framework_options(
      "transformer_torchao_float8.yaml", "workload.fp8_fsdp_all_gather=false", 2);
  EXPECT_EQ(options.count("float8 all-gather"), 1U);
  EXPECT_EQ(options.count("async tp"), 0U);
}

// An encoder-decoder model's layouts over pipeline stages name their split (ES: the stages of
// the encoder), one per split its stacks' layers divide: 4 + 4 layers over 4 stages split
// 1 + 3 (4 and 4 / 3: no), 2 + 2, not 3 + 1.
TEST_F(Cli, PlanSearchesTheEncoderDecoderSplit) {
  const std::string t5 = quote(std::string(UPSIM_CONFIGS_DIR) + "/t5_3b_8gpu.yaml") +
                         " --set workload.layers=4 --set workload.decoder.layers=4 "
                         "--set workload.global_batch=64 --set workload.micro_batch=8";
  const Result r = run("plan " + t5 + " --out p -j 2 --max-simulations 2 --refine 0 --top 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
  std::set<std::string> splits;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::string& label = rows[i][0];
    if (label.find(" PP4 ") == std::string::npos) continue;
    const size_t es = label.find(" ES");
    ASSERT_NE(es, std::string::npos) << label;
    splits.insert(label.substr(es + 1, 3));
  }
  EXPECT_EQ(splits, (std::set<std::string>{"ES2"})) << r.output;
}

// Pipeline stages that do not divide the layers split them with the embedding and the loss
// counted as layers (Megatron-Core's account_for_*_in_pipeline_split, "E+L"): 6 layers over 4
// stages as 8 counted; over 2 evenly. A scenario stating its own pipeline layout keeps its
// pipeline and virtual stages.
TEST_F(Cli, PlanCountsTheEmbeddingAndLossWhereTheStagesDoNotDivideTheLayers) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.layers=6 --set workload.global_batch=32 "
                           "--set workload.micro_batch=8";
  const Result r = run("plan " + gpt2 + " --out p -j 2 --refine 0 --top 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
  int counted = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::string& label = rows[i][0];
    const bool e_l = label.find(" E+L ") != std::string::npos;
    EXPECT_EQ(e_l, rows[i][4] == "4") << label;  // the pipeline column
    EXPECT_NE(rows[i][2], "invalid") << label << ": " << rows[i].back();
    counted += e_l && rows[i][2] == "simulated";
  }
  EXPECT_GT(counted, 0) << r.output;

  const Result own =
      run("plan " + gpt2 +
          " --set workload.parallelism.pipeline=2 --set workload.parallelism.data=2 --set "
          "'workload.parallelism.pipeline_layout=Ettt|tttL' --out q -j 2 "
          "--refine 0 --top 100");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  const auto own_rows = csv_rows(read_file(dir_ / "q" / "plan.csv"));
  ASSERT_GT(own_rows.size(), 2U);
  for (size_t i = 1; i < own_rows.size(); ++i)
    EXPECT_EQ(own_rows[i][4], "2") << own_rows[i][0];
}

TEST_F(Cli, PlanTriesTheFrameworkOptionsOnItsFastestLayouts) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.global_batch=32 --set workload.micro_batch=8 "
                           "--set workload.layers=4";
  const Result r = run("plan " + gpt2 + " --out p -j 2 --top 100 --refine 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
  ASSERT_EQ(rows.front()[10], "framework_options");
  // The base layouts, fastest first (plan.csv lists the simulated by time).
  std::vector<std::vector<std::string>> fastest;
  for (size_t i = 1; i < rows.size() && fastest.size() < 2; ++i) {
    if (rows[i][2] == "simulated" && rows[i][10].empty()) fastest.push_back(rows[i]);
  }
  ASSERT_EQ(fastest.size(), 2U);
  // A layout: its degrees and micro-batch (plan.csv's columns 3 to 9).
  const auto layout_of = [](const std::vector<std::string>& row) {
    return fmt::format("{}", fmt::join(row.begin() + 3, row.begin() + 10, " "));
  };
  std::map<std::string, std::set<std::string>> tried;  // layout -> options
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::string& options = rows[i][10];
    if (options.empty()) continue;
    const std::string& label = rows[i][0];
    EXPECT_NE(label.find(" with " + options), std::string::npos) << label;
    EXPECT_TRUE(rows[i][2] == "simulated" || !rows[i].back().empty()) << label;
    tried[layout_of(rows[i])].insert(options);
  }
  std::map<std::string, std::set<std::string>> expected;
  for (const auto& base : fastest) {
    // Data-parallel sharding where the state is replicated; TP overlap where TP > 1.
    std::vector<std::string> sharding = {""};
    if (std::stoi(base[8]) * std::stoi(base[6]) > 1) {
      sharding.push_back("distributed optimizer");
      sharding.push_back("fsdp");
    }
    std::vector<std::string> tensor = {""};
    if (std::stoi(base[3]) > 1) tensor.push_back("tp overlap");
    for (const std::string& t : tensor) {
      for (const std::string& d : sharding) {
        if (t.empty() && d.empty()) continue;
        expected[layout_of(base)].insert(t.empty() ? d : d.empty() ? t : t + " + " + d);
      }
    }
  }
  EXPECT_EQ(tried, expected) << r.out;
  // The best may be a variant: best.yaml reproduces it all the same.
  const Result again = run("run p/best.yaml --quiet --no-trace --out again");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NEAR(std::stod(again.out), std::stod(rows[1][11]), 0.005);

  // Sequence parallel comes with TP unless the scenario states it: then as it says, in every
  // layout.
  EXPECT_NE(r.out.find("with sequence parallel; set workload.parallelism.sequence to choose"),
            std::string::npos)
      << r.out;
  const Result no_sp =
      run("plan " + gpt2 + " --set workload.parallelism.sequence=false --out s -j 2 --top 100");
  ASSERT_EQ(no_sp.exit_code, 0) << no_sp.output;
  EXPECT_NE(no_sp.out.find("without sequence parallel as the scenario states"), std::string::npos)
      << no_sp.out;
  size_t tensor_parallel_records = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "s" / "layouts")) {
    const std::string record = read_file(entry.path());
    EXPECT_EQ(record.find("sequence: true"), std::string::npos) << entry.path();
    tensor_parallel_records += record.find("tensor: 2") != std::string::npos;
  }
  EXPECT_GT(tensor_parallel_records, 0U);
  const Result none = run("plan " + gpt2 + " --out q -j 2 --top 100 --refine 0");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  const auto plain_rows = csv_rows(read_file(dir_ / "q" / "plan.csv"));
  for (size_t i = 1; i < plain_rows.size(); ++i)
    EXPECT_EQ(plain_rows[i][10], "") << plain_rows[i][0];
}

// Every simulated layout leaves a record; --resume takes the layouts whose inputs are unchanged
// from them (the same ranking, nothing run again but the scenario's own layout), runs again a
// layout whose record is damaged, and takes nothing when the inputs change.
TEST_F(Cli, PlanResumesFromTheRecordsOfLayoutsWithUnchangedInputs) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.global_batch=32 --set workload.micro_batch=8 "
                           "--set workload.layers=4";
  const Result first = run("plan " + gpt2 + " --out p -j 2 --top 50");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::vector<fs::path> records;
  for (const auto& entry : fs::directory_iterator(dir_ / "p" / "layouts"))
    records.push_back(entry.path());
  std::sort(records.begin(), records.end());
  const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
  size_t simulated = 0;
  for (size_t i = 1; i < rows.size(); ++i)
    simulated += rows[i][2] == "simulated";
  ASSERT_GE(simulated, 3U);
  EXPECT_EQ(records.size(), simulated - 1);  // the scenario's own layout always runs
  const std::string first_csv = read_file(dir_ / "p" / "plan.csv");
  const std::string first_best = read_file(dir_ / "p" / "best.yaml");

  const Result resumed = run("plan " + gpt2 + " --out p -j 2 --top 50 --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.out, first.out);
  EXPECT_NE(resumed.err.find(fmt::format("resumed {} layouts", records.size())), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("simulated 1 layouts"), std::string::npos) << resumed.err;
  EXPECT_EQ(read_file(dir_ / "p" / "plan.csv"), first_csv);
  EXPECT_EQ(read_file(dir_ / "p" / "best.yaml"), first_best);

  // A damaged record: that layout runs again, to the same result.
  {
    std::ofstream damage(records.front(), std::ios::app);
    damage << "x";
  }
  const Result damaged = run("plan " + gpt2 + " --out p -j 2 --top 50 --resume");
  ASSERT_EQ(damaged.exit_code, 0) << damaged.output;
  EXPECT_EQ(damaged.out, first.out);
  EXPECT_NE(damaged.err.find(fmt::format("resumed {} layouts", records.size() - 1)),
            std::string::npos)
      << damaged.err;
  EXPECT_NE(damaged.err.find("1 records were from another version or other inputs"),
            std::string::npos)
      << damaged.err;

  // A DLRM scenario has no layouts to resume; a file where the records go is refused up front.
  const Result dlrm = run("plan " + kTiny + " --out d --resume");
  EXPECT_EQ(dlrm.exit_code, 2) << dlrm.output;
  EXPECT_NE(dlrm.err.find("--resume applies to transformer layouts"), std::string::npos)
      << dlrm.err;
  fs::create_directories(dir_ / "blocked");
  { std::ofstream(dir_ / "blocked" / "layouts") << "a file"; }
  const Result blocked = run("plan " + gpt2 + " --out blocked -j 2");
  EXPECT_NE(blocked.exit_code, 0);
  EXPECT_NE(blocked.err.find("cannot keep the layout records in"), std::string::npos)
      << blocked.err;

  // Other inputs: nothing is taken.
  const Result other =
      run("plan " + gpt2 + " --set workload.seq=256 --out p -j 2 --top 50 --resume");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.err.find("resumed 0 layouts"), std::string::npos) << other.err;
}

// Context parallel is searched for long sequences (at least 4K tokens per rank), expert
// parallel for MoE models; the label and plan.csv's columns agree, and a best layout with either
// reproduces its time.
TEST_F(Cli, PlanSearchesContextParallelOnLongSequencesAndExpertParallelOnMoe) {
  const std::string gpt2 = quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") +
                           " --set workload.layers=4 --set workload.dtype=bf16"
                           " --set workload.attention=flash --set platform.memory_check=warn";
  struct Case {
    std::string set;
    size_t column;  // plan.csv: 6 context, 7 expert
    std::string label;
  };
  const std::vector<Case> cases = {
      // 16K tokens: context 2 and 4 keep at least 4K tokens per rank.
      {" --set workload.seq=16384 --set workload.global_batch=8 --set workload.micro_batch=1", 6,
       " CP"},
      {" --set workload.moe.experts=4 --set workload.moe.top_k=2 --set workload.global_batch=16 "
       "--set workload.micro_batch=2",
       7, " EP"},
      // Dense, 1024 tokens: neither.
      {" --set workload.global_batch=16 --set workload.micro_batch=2", 0, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.set);
    fs::remove_all(dir_ / "p");
    const Result r = run("plan " + gpt2 + c.set + " --out p -j 2 --top 100");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = csv_rows(read_file(dir_ / "p" / "plan.csv"));
    ASSERT_EQ(rows.front()[6], "context");
    ASSERT_EQ(rows.front()[7], "expert");
    std::set<std::string> degrees;
    size_t simulated = 0;
    for (size_t i = 1; i < rows.size(); ++i) {
      const std::string& label = rows[i][0];
      for (const size_t column : {size_t{6}, size_t{7}}) {
        const std::string tag = column == 6 ? " CP" : " EP";
        const std::string& degree = rows[i][column];
        EXPECT_EQ(label.find(tag) != std::string::npos, degree != "1") << label;
        if (degree != "1") {
          EXPECT_NE(label.find(tag + degree + " "), std::string::npos) << label;
        }
      }
      if (c.column == 0) continue;
      degrees.insert(rows[i][c.column]);
      simulated += rows[i][2] == "simulated" && rows[i][c.column] != "1";
    }
    if (c.column == 0) continue;
    EXPECT_EQ(degrees, (std::set<std::string>{"1", "2", "4"}));
    EXPECT_GT(simulated, 0U) << r.out;
  }
}

// ---- upsim shard ------------------------------------------------------------------------------

/// One row of `upsim shard`'s ranking: place ("1", "2", ... or "-" for a plan that does not
/// fit), sharder, predicted iteration time in ms (-1 when it does not fit), the rest of the line.
struct ShardRow {
  std::string place;
  std::string sharder;
  double ms = -1.0;
  std::string line;
};

std::vector<ShardRow> shard_rows(const std::string& out) {
  static const std::regex kRow(R"(^ *(\d+|-)  (\w+) +(\d+\.\d+|-) .*)");
  std::vector<ShardRow> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, kRow)) continue;
    rows.push_back({m[1], m[2], m[3] == "-" ? -1.0 : std::stod(m[3]), line});
  }
  return rows;
}

const std::string kDlrm4 = quote(std::string(UPSIM_CONFIGS_DIR) + "/dlrm_4gpu.yaml");

TEST_F(Cli, ShardRanksEverySharderAndItsPlanReproducesTheBest) {
  const Result r = run("shard " + kDlrm4 + " --out plan.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<ShardRow> rows = shard_rows(r.out);
  std::vector<std::string> names;
  for (const ShardRow& row : rows)
    names.push_back(row.sharder);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"capped_size_greedy", "lookup_greedy", "naive",
                                             "naive_chunk", "norm_lookup_greedy", "random",
                                             "size_greedy", "size_lookup_greedy"}))
      << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].place, std::to_string(i + 1)) << rows[i].line;
    EXPECT_NE(rows[i].line.find("  yes"), std::string::npos) << rows[i].line;
    if (i > 0) {
      EXPECT_TRUE(rows[i - 1].ms < rows[i].ms ||
                  (rows[i - 1].ms == rows[i].ms && rows[i - 1].sharder < rows[i].sharder))
          << r.out;
    }
  }
  ASSERT_FALSE(rows.empty());
  const ShardRow& best = rows.front();
  EXPECT_NE(r.out.find("best: " + best.sharder), std::string::npos) << r.out;
  // The scenario's own sharder is the baseline of the change column.
  for (const ShardRow& row : rows) {
    if (row.sharder == "size_lookup_greedy") {
      EXPECT_NE(row.line.find("+0.00%"), std::string::npos) << row.line;
    }
  }

  const std::string plan = read_file(dir_ / "plan.yaml");
  for (const std::string& text :
       {std::string("scenario `dlrm_4gpu`"), "sharder: " + best.sharder,
        fmt::format("predicted iteration time {:.4f} ms", best.ms), std::string("tables: 48"),
        std::string("ranks: 4"), std::string("rank_of_table: [")}) {
    EXPECT_NE(plan.find(text), std::string::npos) << text << "\n" << plan;
  }
  // The plan, run as the scenario's sharder, predicts what the ranking said.
  const Result again = run("run " + kDlrm4 +
                           " --quiet --no-trace --out again --set workload.sharding=plan "
                           "--set workload.sharding_plan=plan.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.out, fmt::format("{:.4f}\n", best.ms));

  // A scenario that uses a plan ranks it too, next to every sharder (run without its plan).
  const Result with_plan = run("shard " + kDlrm4 +
                               " --out plan2.yaml --set workload.sharding=plan "
                               "--set workload.sharding_plan=plan.yaml");
  ASSERT_EQ(with_plan.exit_code, 0) << with_plan.output;
  const std::vector<ShardRow> plan_rows = shard_rows(with_plan.out);
  ASSERT_EQ(plan_rows.size(), rows.size() + 1) << with_plan.out;
  for (const ShardRow& row : plan_rows) {
    if (row.sharder == "plan") {
      EXPECT_EQ(row.ms, best.ms) << row.line;
      EXPECT_NE(row.line.find("+0.00%"), std::string::npos) << row.line;
    }
  }

  // Never overwritten unasked; the same ranking at any --jobs.
  const Result refused = run("shard " + kDlrm4 + " --out plan.yaml");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("plan.yaml already exists"), std::string::npos) << refused.err;
  const Result parallel = run("shard " + kDlrm4 + " --out plan.yaml --force --jobs 3");
  ASSERT_EQ(parallel.exit_code, 0) << parallel.output;
  EXPECT_EQ(parallel.out, r.out);
  EXPECT_EQ(read_file(dir_ / "plan.yaml"), plan);
}

// Under embeddings.two_d a plan places the tables on one sharding group, as the scenario's own
// sharders do: the plan spans 2 of the 4 GPUs and reproduces the ranked time; hybrid tables,
// which two_d refuses, are not searched.
TEST_F(Cli, ShardUnderTwoDPlansOneShardingGroupAndItsPlanReproducesTheBest) {
  const std::string two_d = " --set 'workload.embeddings.two_d={sharding_group_size: 2}'";
  const Result r = run("shard " + kDlrm4 + two_d + " --out plan.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.out.find("48 tables on 4 x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("one sharding group of 2 GPUs, which all 2 groups hold"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(table_wise, row_wise, data_parallel)"), std::string::npos) << r.out;
  const std::vector<ShardRow> rows = shard_rows(r.out);
  ASSERT_FALSE(rows.empty());
  EXPECT_NE(read_file(dir_ / "plan.yaml").find("ranks: 2"), std::string::npos);
  const Result again = run("run " + kDlrm4 + two_d +
                           " --quiet --no-trace --out again --set workload.sharding=plan "
                           "--set workload.sharding_plan=plan.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.out, fmt::format("{:.4f}\n", rows.front().ms));
}

TEST_F(Cli, ShardListsASharderThatDoesNotFitLastWithItsReason) {
  // 10 GiB of table memory per GPU: naive_chunk's first 12 tables (17.2 GiB) overflow rank 0.
  const Result r =
      run("shard " + kDlrm4 + " --out plan.yaml --set platform.table_memory_fraction=0.25");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<ShardRow> rows = shard_rows(r.out);
  ASSERT_EQ(rows.size(), 8U) << r.out;
  EXPECT_EQ(rows.back().sharder, "naive_chunk") << r.out;
  EXPECT_EQ(rows.back().place, "-");
  EXPECT_NE(rows.back().line.find("does not fit: naive_chunk sharding puts table"),
            std::string::npos)
      << rows.back().line;
  for (size_t i = 0; i + 1 < rows.size(); ++i)
    EXPECT_GT(rows[i].ms, 0.0) << rows[i].line;
  EXPECT_NE(read_file(dir_ / "plan.yaml").find("platform.table_memory_fraction=0.25"),
            std::string::npos);

  // Nothing fits: the ranking says why, no plan is written, exit 2.
  const Result none =
      run("shard " + kDlrm4 + " --out none.yaml --set platform.table_memory_fraction=0.1");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_EQ(shard_rows(none.out).size(), 8U) << none.out;
  EXPECT_NE(none.err.find("no plan places the 48 tables"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("platform.table_memory_fraction"), std::string::npos) << none.err;
  EXPECT_FALSE(fs::exists(dir_ / "none.yaml"));
}

// A group that states its sharding type keeps it: with the 18 tables of 20 k rows data-parallel,
// every sharder places the other tables, the type search varies only the open ones, and the plan
// written (the placement form, with the data-parallel entries) reproduces the best time.
TEST_F(Cli, ShardKeepsAStatedTypeAndWritesAPlacementPlanThatReproducesIt) {
  const std::string data_parallel =
      " --set workload.embeddings.tables.3.sharding_type=data_parallel";
  const Result r = run("shard " + kDlrm4 + " --out plan.yaml" + data_parallel);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<ShardRow> rows = shard_rows(r.out);
  ASSERT_EQ(rows.size(), 8U) << r.out;
  for (const ShardRow& row : rows)
    EXPECT_GT(row.ms, 0.0) << row.line;
  EXPECT_NE(r.out.find("searched over 3 classes of identical open tables"), std::string::npos)
      << r.out;
  // Every searched plan keeps the 18 data-parallel tables (other classes may join them).
  const std::regex searched_row(R"(^ *(\d+|-)  \w+: .*?(\d+) dp.*)");
  std::istringstream lines(r.out);
  size_t searched = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" tw") == std::string::npos || line.find(": ") == std::string::npos) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, searched_row)) << line;
    EXPECT_GE(std::stoi(m[2]), 18) << line;
    ++searched;
  }
  EXPECT_GT(searched, 0U) << r.out;
  const std::string plan = read_file(dir_ / "plan.yaml");
  EXPECT_NE(plan.find("placement:\n"), std::string::npos) << plan;
  EXPECT_NE(plan.find("  - {type: data_parallel}  # table 30\n"), std::string::npos) << plan;
  const std::regex best_line(R"(best: [^\n]*, (\d+\.\d+) ms)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, best_line)) << r.out;
  const Result again = run("run " + kDlrm4 + data_parallel +
                           " --quiet --no-trace --out again --set workload.sharding=plan "
                           "--set workload.sharding_plan=plan.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.out, m[1].str() + "\n");
  // The plan may not retype a stated table.
  std::string retyped = plan;
  retyped.replace(retyped.find("  - {type: data_parallel}  # table 30"), 37,
                  "  - {type: row_wise}  # table 30");
  std::ofstream(dir_ / "retyped.yaml") << retyped;
  const Result refused = run("run " + kDlrm4 + data_parallel +
                             " --quiet --no-trace --out refused --set workload.sharding=plan "
                             "--set workload.sharding_plan=retyped.yaml");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.err.find("placement[30].type: table 30's group states sharding_type: "
                             "data_parallel, which a plan keeps"),
            std::string::npos)
      << refused.err;
}

// A table larger than a GPU's table memory: no sharder places it whole, the type search splits it
// by rows (and whatever else is faster), and the plan it writes reproduces the time it ranked.
TEST_F(Cli, ShardSearchesShardingTypesWhenNoSharderFits) {
  const std::string huge =
      " --set workload.embeddings.tables.0.count=1 --set workload.embeddings.tables.0.rows="
      "80000000";
  const Result r = run("shard " + kDlrm4 + " --out plan.yaml -j 2" + huge);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const ShardRow& row : shard_rows(r.out))
    EXPECT_EQ(row.place, "-") << row.line;
  EXPECT_NE(r.out.find("  table 0: row_wise\n"), std::string::npos) << r.out;
  const std::regex best_line(R"(best: [^\n]*: \d+ tw, \d+ rw, (\d+\.\d+) ms; plan written)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, best_line)) << r.out;
  const std::string plan = read_file(dir_ / "plan.yaml");
  EXPECT_NE(plan.find("  - {type: row_wise}  # table 0\n"), std::string::npos) << plan;
  const Result again = run("run " + kDlrm4 + huge +
                           " --quiet --no-trace --out again --set workload.sharding=plan "
                           "--set workload.sharding_plan=plan.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.out, m[1].str() + "\n");
  // Without the type search nothing fits: exit 2, no plan.
  const Result sharders_only = run("shard " + kDlrm4 + " --out none.yaml --no-type-search" + huge);
  EXPECT_EQ(sharders_only.exit_code, 2) << sharders_only.output;
  EXPECT_NE(sharders_only.out.find("sharding types: not searched: --no-type-search"),
            std::string::npos)
      << sharders_only.out;
  EXPECT_FALSE(fs::exists(dir_ / "none.yaml"));
  // A budget of one plan stops the search and says so.
  const Result budget = run("shard " + kDlrm4 + " --out budget.yaml --max-plans 1" + huge);
  EXPECT_NE(budget.out.find("(stopped at --max-plans)"), std::string::npos) << budget.output;
}

TEST_F(Cli, ShardRefusesAScenarioThatIsNotDlrm) {
  const Result r =
      run("shard " + quote(std::string(UPSIM_CONFIGS_DIR) + "/gpt2_4gpu.yaml") + " --out p.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("workload.model: upsim shard places DLRM embedding tables"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "p.yaml"));
  const Result help = run("shard --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option :
       {"--set", "--out", "--force", "--jobs", "--no-type-search", "--max-plans", "--top"})
    EXPECT_NE(help.out.find(option), std::string::npos) << option << "\n" << help.out;
  EXPECT_NE(run("--help").out.find("shard SCENARIO"), std::string::npos);
}

}  // namespace

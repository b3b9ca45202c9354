// The round trip of `upsim run --trace-format kineto` (sim/export/kineto_trace_writer.h): a
// model-mode run writes its Kineto traces, a trace scenario on the same GPU profile replays them
// (workloads/trace: measured durations, host time as traced), and the replay predicts the
// simulated iteration time.
//
// Why the gap is zero: every time is written to the picosecond, every GPU task with its measured
// duration and every host interval between the cut points the replay recovers (launches,
// synchronizations, stream waits, iteration marks) with its own; the dependencies the run had
// are in the files exactly (launches by correlation, stream waits and syncs by their cuda_sync
// records, collectives by process group and sequence number, whose shortest member is the
// transfer after the last arrival). A gap would mean a dependency the files do not carry; the
// tests allow none.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sim/export/kineto_trace_writer.h"
#include "tools/kineto_trace_folder.h"
#include "tools/scenario.h"
#include "tools/steady_state.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kConfigs = UPSIM_CONFIGS_DIR;

class TempFolder {
 public:
  TempFolder() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("upsim-kineto-" + std::string(info->name()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// `scenario` (under configs/) with `sets`, run with every rank's Kineto trace written to
/// `folder`.
SteadyRun simulate(const std::string& scenario, const std::vector<std::string>& sets,
                   const fs::path& folder) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / scenario);
  for (const std::string& set : sets)
    doc.apply_override(set);
  std::unique_ptr<KinetoTraceWriter> writer;
  const auto attach = [&](const Scenario& s, GraphExecutor& executor) {
    writer = std::make_unique<KinetoTraceWriter>(
        kineto_rank_files(s.graph, std::nullopt, folder, false),
        KinetoTraceOptions{std::nullopt, s.models.set.devices, false});
    executor.add_observer(writer.get());
  };
  return run_to_steady_state(doc, attach);
}

/// The trace scenario that replays `folder` on GPU profile `gpu` (under configs/hardware/).
SteadyRun replay(const fs::path& folder, const std::string& gpu, const fs::path& yaml) {
  std::ofstream(yaml) << "name: kineto_round_trip\n"
                      << "platform:\n  gpu: " << (kConfigs / "hardware" / gpu).string() << "\n"
                      << "workload:\n  model: trace\n  traces: " << folder.string()
                      << "\n  mode: replay\n  host: measured\n";
  ConfigDocument doc = ConfigDocument::load_file(yaml);
  return run_to_steady_state(doc);
}

/// The simulated and the replayed run agree: the predicted iteration time and each rank's
/// iteration times, to the picosecond; the replay's measured times are the simulated ones.
void expect_same_iterations(const SteadyRun& sim, const SteadyRun& back) {
  EXPECT_EQ(back.summary.predicted_iteration_time.ps(), sim.summary.predicted_iteration_time.ps())
      << "simulated " << sim.summary.predicted_iteration_time.ms() << " ms, replayed "
      << back.summary.predicted_iteration_time.ms() << " ms";
  ASSERT_EQ(back.summary.ranks.size(), sim.summary.ranks.size());
  for (size_t r = 0; r < sim.summary.ranks.size(); ++r) {
    // The replay has one more iteration mark, where the last ProfilerStep ends.
    ASSERT_EQ(back.summary.ranks[r].iteration_times.size(),
              sim.summary.ranks[r].iteration_times.size() + 1);
    for (size_t k = 0; k < sim.summary.ranks[r].iteration_times.size(); ++k) {
      EXPECT_EQ(back.summary.ranks[r].iteration_times[k].ps(),
                sim.summary.ranks[r].iteration_times[k].ps())
          << "rank " << r << ", iteration " << k + 1;
    }
    ASSERT_EQ(back.scenario.measured_iteration.size(), sim.summary.ranks.size());
    EXPECT_EQ(back.scenario.measured_iteration[r].ps(), sim.summary.ranks[r].iteration_time.ps())
        << "rank " << r;
  }
}

// DLRM on 4x A100 over the NVLink fabric (flow network: collectives that share links): all-to-all
// and all-reduce on a comm stream after events on the compute stream, blocking copies, syncs.
// Every iteration is measured (no warm-up), as the replay measures every traced step.
TEST(KinetoRoundTrip, DlrmReplayedFromItsKinetoTracesGivesBackItsIterationTime) {
  TempFolder dir;
  const fs::path traces = dir.path() / "kineto";
  fs::create_directories(traces);
  const SteadyRun sim = simulate(
      "dlrm_4gpu.yaml", {"simulation.iterations=3", "simulation.warmup_iterations=0"}, traces);
  ASSERT_EQ(std::distance(fs::directory_iterator(traces), fs::directory_iterator()), 4);
  const SteadyRun back = replay(traces, "a100_sxm4_40gb.yaml", dir.path() / "replay.yaml");
  expect_same_iterations(sim, back);
  // The same GPU: the measured comparison is an accuracy ("error"), not a what-if.
  EXPECT_EQ(back.scenario.comparison.kind, MeasuredComparison::Kind::kError)
      << back.scenario.comparison.reason;
}

// A transformer with tensor and pipeline parallelism (GPT-2, two layers per stage): TP
// all-reduces, p2p sends and receives on their own streams (the pipeline bubble is rendezvous
// wait in the replay), 1F1B's synchronous exchanges (a cudaStreamSynchronize of the compute
// stream while a cudaStreamWaitEvent holds it for the receive), the optimizer's host sync.
TEST(KinetoRoundTrip, TransformerReplayedFromItsKinetoTracesGivesBackItsIterationTime) {
  TempFolder dir;
  const fs::path traces = dir.path() / "kineto";
  fs::create_directories(traces);
  const SteadyRun sim =
      simulate("gpt2_4gpu.yaml",
               {"workload.layers=4", "workload.parallelism.data=1", "workload.parallelism.tensor=2",
                "workload.parallelism.pipeline=2", "simulation.iterations=2",
                "simulation.warmup_iterations=0"},
               traces);
  ASSERT_EQ(std::distance(fs::directory_iterator(traces), fs::directory_iterator()), 4);
  const SteadyRun back = replay(traces, "a100_sxm4_40gb.yaml", dir.path() / "replay.yaml");
  expect_same_iterations(sim, back);
}

// Data parallelism under rank symmetry (GPT-2 DDP on 4 GPUs simulates replica 0 only): one trace
// of a job of 4 GPUs (world_size 4), replayed alone.
TEST(KinetoRoundTrip, OneSimulatedReplicaReplaysAsOneTraceOfALargerJob) {
  TempFolder dir;
  const fs::path traces = dir.path() / "kineto";
  fs::create_directories(traces);
  const SteadyRun sim = simulate(
      "gpt2_4gpu.yaml",
      {"workload.layers=2", "simulation.iterations=2", "simulation.warmup_iterations=0"}, traces);
  ASSERT_EQ(sim.summary.ranks.size(), 1u);
  const SteadyRun back = replay(traces, "a100_sxm4_40gb.yaml", dir.path() / "replay.yaml");
  expect_same_iterations(sim, back);
}

}  // namespace
}  // namespace upsim::cli

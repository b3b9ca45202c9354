// `workload: {model: trace, ...}` as a Workload (workloads/workload.h): replay or re-cost a set
// of measured per-rank PyTorch traces (workloads/trace/trace_replay.h, chakra_trace.h).
//
// Schema:
//   workload:
//     model: trace
//     traces: ../test/data/param-et-replay/dlrm   # folder of per-rank Kineto (+ ET) traces,
//                                   #   or of per-rank Chakra ETs (*.et, *.et.gz)
//     format: kineto                # optional: kineto or chakra; default: chakra when the
//                                   #   folder holds *.et / *.et.gz and no *.json / *.json.gz
//     mode: replay                  # replay: measured durations; model: kernels, copies and
//                                   #   collectives re-priced by the platform's models
//                                   #   (Chakra: ChakraGraphOptions::mode in chakra_trace.h)
//     host: measured                # host time: measured (the traced timeline), modelled (the
//                                   #   seed's T1-T5 extracted from these traces) or platform
//                                   #   (platform.host's model, e.g. another host's T1-T5 file)
//     iteration: 10                 # optional: measure this step only (else every complete one)
//     iteration_marker: "ProfilerStep#"
//     lenient_et: false             # a mismatched execution trace: error (false) or warning
//   Chakra traces are one iteration per rank with host: measured (no iteration,
//   iteration_marker, lenient_et).
//
// Contract:
//  - the factory reads the keys and the traces (a read failure is a ConfigError at `format`
//    when the scenario chose it, else at `traces`); implied_gpus() = the rank count;
//    simulates_iterations() = false (the scenario may have no `simulation:` section);
//    host_overheads() = the traces' own T1-T5 with `host: modelled`.
//  - build() rebuilds the graph and measures the chosen iteration (or every complete one) from
//    rank 0's iteration mark to the next: WorkloadBuild's iterations, warm-up and measured count
//    say which, measured_iteration holds each rank's measured mean. No memory footprint.
//  - Warnings and files are named as the scenario names the folder, so the summary does not
//    depend on where the scenario is run from.
//  - Measured vs predicted (WorkloadBuild::measured_run; tools/ prints it, MeasuredComparison in
//    tools/scenario.h): the summary prints an "error" only when the run's platform is the one the
//    traces were measured on; otherwise "what-if: <how it differs>" and the same ratio as a
//    "change". The measured platform is: the GPU the Kineto traces name (deviceProperties of each
//    rank's device, e.g. "Tesla V100-SXM2-32GB", against platform.gpu's profile name), or, when
//    the traces name none (Chakra), platform.gpu as the scenario file declares it; every other
//    platform key as the scenario file declares it, so any `--set platform...` makes a what-if;
//    and host time as measured or modelled from these traces (host: platform prices it with
//    platform.host's model: a what-if). measured_run.prices_gpu_work is mode: model,
//    prices_host is host: platform; with neither, the platform prices nothing and a differing
//    platform also gets a warning (the prediction stays the measured platform's). A Chakra
//    trace whose measured time is the execution-trace observer's window (no node start times)
//    sets measured_run.not_an_iteration: no error and no change is printed, and the summary
//    says why.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "workloads/trace/chakra_trace.h"
#include "workloads/trace/trace_replay.h"
#include "workloads/workload.h"

namespace upsim {

class TraceWorkload final : public Workload {
 public:
  explicit TraceWorkload(const ConfigNode& workload);

  std::optional<uint32_t> implied_gpus() const override;
  std::string implied_gpus_reason() const override;
  bool simulates_iterations() const override { return false; }
  std::optional<HostOverheads> host_overheads() const override;
  WorkloadBuild build(const WorkloadPlatform& platform, TaskGraph& graph) override;

 private:
  size_t ranks() const { return chakra_format_ ? chakra_.size() : traces_.ranks.size(); }

  /// Rank 0's iteration marks, of which build() measures marks[first] to marks[first + count].
  struct MeasuredMarks {
    std::vector<uint32_t> marks;
    uint32_t first = 0;
    uint32_t count = 0;
  };

  /// The task graph of the traces (a ParseError fails at `traces`); the builder's warnings are
  /// appended to `warnings`.
  TraceGraphInfo build_graph(TaskGraph& graph, std::vector<std::string>& warnings) const;

  /// The measured iterations of `graph`: the chosen one, else every complete one; `out`'s
  /// iterations, warm-up and measured count say which. Fails at `traces` (no complete iteration)
  /// or `iteration` (not a complete one).
  MeasuredMarks measured_marks(const TaskGraph& graph, WorkloadBuild& out) const;

  /// Each rank's mean measured time of the measured iterations, and the first reason one is not
  /// an iteration's length.
  static void add_measured_times(const TraceGraphInfo& info, const MeasuredMarks& m,
                                 WorkloadBuild& out);

  /// With more than one measured iteration: each one's label and each rank's time of it.
  static void add_measured_steps(const TraceGraphInfo& info, const MeasuredMarks& m,
                                 WorkloadBuild& out);

  /// What the measurement ran on (the traces' GPUs) and what the platform prices.
  void add_measured_run(const TraceGraphInfo& info, WorkloadBuild& out) const;

  /// The description lines: the workload, and in model mode add_model_mode_description's.
  void add_description(const TraceGraphInfo& info, uint32_t count, WorkloadBuild& out) const;

  /// Model mode: the kernels and collectives kept measured and why, and for one trace of a
  /// larger job, its collectives priced over their process groups (and represented_gpus).
  void add_model_mode_description(const TraceGraphInfo& info, WorkloadBuild& out) const;

  ConfigNode node_;
  bool chakra_format_ = false;
  LoadedTraces traces_;              ///< kineto
  std::vector<ChakraTrace> chakra_;  ///< chakra, in rank order
  TraceSetOptions options_;
  std::filesystem::path dir_;
  /// `traces` as the scenario wrote it.
  std::string traces_text_;
  /// `host`: measured, modelled (T1-T5 of the traces) or platform (platform.host's model).
  std::string host_;
};

std::unique_ptr<Workload> make_trace_workload(const ConfigNode& workload);

/// What each key above means, one line each (sim/config/key_meaning.h), relative to `workload`.
std::span<const KeyMeaning> trace_key_meanings();

/// The seed's host overheads T1-T5 of a trace set itself (extract_host_overheads over every
/// rank's Kineto trace, means of the cleaned samples, unrounded): the host model of `host:
/// modelled`. Unlike `upsim calibrate host-overheads` (the seed's 2 us per traced event taken
/// off, to describe the run without the profiler), nothing is taken off: the iterations it
/// predicts are the traced ones.
HostOverheads trace_host_overheads(const std::vector<RankTrace>& traces);

}  // namespace upsim

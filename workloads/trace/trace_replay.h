// Replaying measured traces, and validating the replay against the measured iteration times.
//
// `upsim validate traces DIR` (tools/) calls validate_trace_directory and prints
// format_trace_validation; `upsim run` on a trace scenario uses load_trace_directory +
// build_replay_graph (Kineto) or load_chakra_directory + build_chakra_graph (Chakra) with its
// own models and observers.
//
// Contract:
//  - A directory holds one Kineto trace per rank (*.json, *.json.gz; recognised by their
//    `traceEvents`) and optionally the matching execution traces (recognised by their `nodes`),
//    or only Chakra traces (*.et, *.et.gz).
//    Ranks come from distributedInfo.rank (else the first number in the file name); execution
//    traces pair with Kineto traces by process id, else by the first number in their file names.
//  - Missing ranks (fewer traces than distributedInfo.world_size), duplicate ranks, traces of
//    different world sizes, an execution trace that belongs to another process or run, and
//    unreadable, truncated or malformed files throw ParseError naming the file (or directory).
//    With `strict_et = false`, a mismatched execution trace is reported as a warning and the
//    rank is replayed from its Kineto trace alone.
//  - Warnings (LoadedTraces::warnings, one line each, naming the files): ranks without an
//    execution trace while other ranks have one ("execution trace missing for 1 of 8 ranks (rank
//    5: FILE)": they replay from Kineto alone, which no mode forbids, so it is never an error);
//    per rank, the GPU work (kernels, copies, memsets) whose measured duration is 0 ("FILE (rank
//    3): 12 kernels with zero duration ..."; host events of dur 0 are not counted: see
//    kineto_trace.h). Negative durations and steps of no measured time are errors (ParseError,
//    kineto_trace.h and trace_graph.h).
//  - Replay runs every task with its measured duration; the error of a rank is
//    predicted / measured - 1 over its complete iterations (TraceIteration).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/time.h"
#include "workloads/trace/chakra_trace.h"
#include "workloads/trace/trace_graph.h"

namespace upsim {

struct TraceSetOptions {
  TraceGraphOptions graph;
  /// A mismatched execution trace is an error (true) or a warning (false).
  bool strict_et = true;
  /// Measure only the iteration that starts at this IterationMark (e.g. 10 for ProfilerStep#10);
  /// nullopt: the mean of every complete iteration.
  std::optional<uint32_t> iteration;
};

struct LoadedTraces {
  std::vector<RankTrace> ranks;  ///< in rank order
  std::vector<std::string> warnings;
};

/// Reads one rank: a Kineto trace and optionally its execution trace (linked and checked).
RankTrace load_rank_trace(const std::filesystem::path& kineto,
                          const std::optional<std::filesystem::path>& et,
                          const TraceSetOptions& options, std::vector<std::string>& warnings);

/// Reads every rank's traces in `dir`.
LoadedTraces load_trace_directory(const std::filesystem::path& dir,
                                  const TraceSetOptions& options = {});

/// Measured and predicted iteration time of one rank.
struct RankValidation {
  RankId rank = 0;
  std::string file;
  std::string iteration;    ///< "ProfilerStep#10", or "mean of 29 iterations"
  uint32_t iterations = 0;  ///< iterations averaged
  Duration measured;
  Duration predicted;
  double error = 0.0;  ///< predicted / measured - 1; 0 when not_an_iteration is set
  /// Why `measured` is not an iteration time (TraceIteration::not_an_iteration), or "": then no
  /// error is printed for the rank and the geomean leaves it out.
  std::string not_an_iteration;
  /// Each averaged iteration: its label, measured and predicted time (in trace order).
  std::vector<std::string> step_labels;
  std::vector<Duration> step_measured;
  std::vector<Duration> step_predicted;
};

struct TraceReplayResult {
  TraceGraphInfo graph;
  std::vector<RankValidation> ranks;
  RunStats stats;
  std::vector<std::string> warnings;
};

/// Builds the replay graph of `traces` and runs it with measured GPU durations. `host` prices the
/// host work when options.graph.host is TraceHost::kModelled (then it must be given; e.g. the
/// T1-T5 that extract_host_overheads finds in `traces`), and is not asked otherwise.
TraceReplayResult replay_traces(const std::vector<RankTrace>& traces,
                                const TraceSetOptions& options = {},
                                const CpuCostModel* host = nullptr);

/// Runs a sealed graph that build_replay_graph made (`info` is what it returned), every task with
/// its fixed duration, host work without one priced by `host` (nullptr: every task must have
/// one), and measures the iterations (what-if edits of fixed durations included).
TraceReplayResult run_replay_graph(const TaskGraph& graph, const TraceGraphInfo& info,
                                   const TraceSetOptions& options = {},
                                   const CpuCostModel* host = nullptr);

/// Runs a sealed trace graph with the given models (model mode and what-if: tools/ builds them
/// from calibration/ and topology/; `models.devices` has one profile per rank) and measures the
/// iterations. `observers` (Chrome trace, run summary, ...) are attached to the run.
TraceReplayResult run_trace_graph(const TaskGraph& graph, const TraceGraphInfo& info,
                                  const ModelSet& models, const TraceSetOptions& options = {},
                                  const std::vector<Observer*>& observers = {});

/// load_trace_directory + replay_traces; a directory of Chakra traces only (*.et, rank = the
/// last number in the file name, e.g. dlrm.3.et) goes to validate_chakra_directory.
TraceReplayResult validate_trace_directory(const std::filesystem::path& dir,
                                           const TraceSetOptions& options = {});

/// Whether `dir` holds Chakra traces and no Kineto / execution traces: some *.et or *.et.gz and no
/// *.json or *.json.gz (the format validate_trace_directory and trace scenarios detect).
bool is_chakra_directory(const std::filesystem::path& dir);

/// Reads every Chakra trace of `dir` (*.et, *.et.gz), in rank order (the last number in the file
/// name). Throws ParseError naming the directory when it has none, or the file that is unreadable.
std::vector<ChakraTrace> load_chakra_directory(const std::filesystem::path& dir);

/// Replays the Chakra traces of `dir` (*.et, *.et.gz; chakra_trace.h); measured = each trace's
/// own time span (or, without node start times, its execution-trace observer window, with a
/// warning).
TraceReplayResult validate_chakra_directory(const std::filesystem::path& dir);

/// The table `upsim validate traces` prints: rank, trace, iteration, measured, predicted, error,
/// and the geometric mean of |error| (Lin et al., TPDS 2024: exp(mean(ln(|e| + 4e-4)))). Ranks
/// whose measured time is not an iteration's print "n/a" and the reason, outside the geomean.
std::string format_trace_validation(const std::vector<RankValidation>& ranks);

/// With more than one iteration per rank: per step (by label, in order) the measured and
/// predicted time as means over the ranks that have it, the error, and the rank whose error is
/// largest; then the per-step geomean |error| and the worst step. "" with one iteration.
std::string format_trace_steps(const std::vector<RankValidation>& ranks);
double geomean_abs_error(const std::vector<RankValidation>& ranks);

}  // namespace upsim

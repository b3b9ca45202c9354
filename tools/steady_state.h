// Steady state: a scenario's predicted iteration time is that of training in progress, not of
// the first steps after a cold start. Ranks start together at time 0, but a rank with less work
// per iteration finishes earlier, starts the next one earlier and waits for the slower ranks at
// the collectives; that wait grows from iteration to iteration until it reaches the point
// where it holds the faster rank back, and only from then on do all ranks repeat the same
// iteration. In dlrm_4gpu, ranks 0 and 1 settle in their 5th iteration: with 3 iterations (1
// warm-up) they reported 3.3328 ms against the steady 3.3562 ms.
//
// The check (check_steady_state): over the summary's measured iterations,
//  - every rank's iteration times agree within the tolerance: (max - min) / max <= tolerance;
//  - the ranks of one coupled group (ranks joined by some collective, coupled_rank_groups) have
//    mean iteration times that agree within the tolerance: ranks that wait for each other every
//    iteration run at one pace once steady, however different their work.
// The tolerance is 0.1% (kSteadyStateTolerance): the summary prints 4 decimals of ms, and the
// shipped scenarios' steady iterations agree to far better than that (dlrm_4gpu: exactly).
// A workload whose iterations repeat by design with a period P (WorkloadBuild::iteration_period:
// 2 for torchtitan's per-op checkpointing, a DLRM 2D parallel run's sync interval) is steady
// when each rank's last P iterations together take what the P before took, within the
// tolerance; the search then measures one whole period (the last max(2, P) iterations) and runs
// at least two.
//
// The search (run_to_steady_state): without `simulation.iterations`, the scenario is built and
// run with 2 iterations (warm-up 0), then 4, 8, 16 and 32 (kMaxChosenIterations), all but the
// last two iterations warm-up, until the check passes. Each attempt is a fresh build and run of
// the whole graph (the engine cannot extend a sealed graph), so the search costs at most about
// twice the last attempt; a workload whose every iteration is the same (all ranks end each
// iteration together) stops after the first attempt, twice the cost of one iteration.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "sim/task_graph.h"
#include "tools/scenario.h"

namespace upsim::cli {

/// Relative difference below which iteration times count as equal (0.1%).
inline constexpr double kSteadyStateTolerance = 1e-3;
/// The most iterations the steady-state search simulates before it gives up and warns.
inline constexpr uint32_t kMaxChosenIterations = 32;
/// The most it simulates for a workload whose iterations repeat with a period over 16: two
/// periods, up to this many (a longer period is warned about: not checked).
inline constexpr uint32_t kMaxPeriodicIterations = 256;

/// For each rank, the lowest rank of its coupled group: ranks that share a collective (directly
/// or through other ranks) are in one group.
std::vector<RankId> coupled_rank_groups(const TaskGraph& graph);

struct SteadyStateCheck {
  bool steady = true;
  /// The largest relative difference found, (max - min) / max, over all ranks and groups.
  double difference = 0.0;
  /// Where that difference is, in words ("rank 0: 3.3328 to 3.3364 ms over iterations 3..4",
  /// "rank 0 takes 3.3328 ms per iteration, rank 2 3.3562 ms"); empty when nothing differs.
  std::string where;
};

/// Checks `summary`'s measured iterations (see the file comment). `group_of_rank` is
/// coupled_rank_groups of the graph the summary is of. `period` P >= 2 (iterations that repeat by
/// design, WorkloadBuild::iteration_period): each rank's time over its last P iterations must
/// agree with its time over the P before (which a run of fewer than 2P iterations lacks: not
/// steady), instead of its measured iterations agreeing with each other.
SteadyStateCheck check_steady_state(const RunSummary& summary,
                                    const std::vector<RankId>& group_of_rank,
                                    double tolerance = kSteadyStateTolerance, uint32_t period = 1);

/// The outcome of run_to_steady_state: the last attempt's scenario, summary and statistics.
struct SteadyRun {
  /// Its header ends with the steady-state line (none for trace workloads); a run that is not in
  /// steady state adds a warning to `warnings` and `description`.
  Scenario scenario;
  RunSummary summary;
  RunStats stats;
  SteadyStateCheck check;
  /// The iteration counts of the attempts, in order (one entry unless the search grew it).
  std::vector<uint32_t> attempts;
  /// Wall-clock seconds of all the attempts' builds and runs.
  double wall_s = 0.0;
};

/// Called before each attempt's run to attach more observers (a Chrome trace) to its executor;
/// they must outlive that run. A later attempt replaces an earlier one's outputs.
using AttachObservers = std::function<void(const Scenario&, GraphExecutor&)>;

/// Builds and runs the scenario of `doc` (overrides applied); without `simulation.iterations`,
/// again with more iterations until it reaches steady state (see the file comment). The
/// workload is looked up in `workloads`; every attempt is built under `limits`. Throws what
/// build_scenario and the run throw.
SteadyRun run_to_steady_state(ConfigDocument& doc, const AttachObservers& attach,
                              const WorkloadRegistry& workloads, const ScenarioLimits& limits);
SteadyRun run_to_steady_state(ConfigDocument& doc, const AttachObservers& attach = {},
                              const ScenarioLimits& limits = {});

/// What a run warns about, one sentence each without a prefix: the scenario's warnings (the
/// steady-state search's among them), then stream waits that reached the GPU before their event.
/// `upsim run` prints them and `upsim sweep` puts them in the point's row.
std::vector<std::string> run_warnings(const std::vector<std::string>& scenario_warnings,
                                      const RunStats& stats);

}  // namespace upsim::cli

// `upsim shard`'s search: which sharding types and which placement make a DLRM scenario train
// fastest, by simulation (the TorchRec planner's question, answered with upsim's step model
// instead of its analytic estimators: torchrec/distributed/planner).
//
// Contract:
//  - Sharders: the scenario (with its --set overrides) is simulated once per sharder, each to
//    steady state as `upsim run` does (tools/steady_state.h), on the scenario's own sharding
//    types: every value `workload.sharding` accepts (sharding_strategies()) except `plan`, and
//    `plan` too when the scenario itself uses one (the others then run with its sharding_plan
//    unset).
//  - Sharding types (unless ShardOptions::search_types is off, the run has one GPU, every group
//    states its sharding_type, or the tables are a random task, which a plan cannot hold): the
//    open tables (workloads/dlrm/sharding_search_space.h) are varied in classes of identical
//    tables over the types sharding_type_choices offers, with the fastest fitting sharder of the
//    first step placing the table-wise tables and column shards (the scenario's own sharder, or
//    size_lookup_greedy, when none fits). First each type for every open table at once
//    (TorchRec's UniformProposer), then coordinate descent from the fastest so far: each round
//    tries every class in every other type and keeps the fastest if it is faster than the best
//    (strictly: ties keep the earlier plan); it stops when a round finds nothing faster or after
//    ShardOptions::max_plans simulations. The fastest type assignment is then placed by every
//    sharder. Each candidate is placed first (place_dlrm_tables); one that does not fit the
//    table memory is not simulated; the others are simulated as a `sharding: plan` scenario
//    whose plan is that placement, so a written plan reproduces its time exactly. A plan
//    simulated once is not simulated again (candidates are keyed by their placement).
//  - embeddings.two_d: a plan spans one sharding group's ranks (DlrmConfig::sharding_ranks) and
//    every group holds it, as the scenario's own sharders do; each candidate still runs the whole
//    scenario, replica syncs included. Hybrid and table-row-wise, which two_d refuses, are not
//    searched.
//  - A candidate that does not fit, or whose run the scenario's memory check refuses, is listed
//    with the reason. Any other error of a sharder's run (a bad scenario) stops the command, as
//    it stops `upsim run`.
//  - Ranking: plans that fit by predicted iteration time, ties by label; then those that do
//    not fit, by label. The same scenario gives the same ranking, byte for byte, at any --jobs.
//  - Per plan: the predicted iteration time; its change against the scenario's own sharder;
//    the load imbalance, max / mean over ranks of each rank's simulated embedding kernel time
//    (the FBGEMM lookup forward and the fused backward + optimizer, summed over the run's
//    iterations); the exposed communication of the slowest rank (the first of equals,
//    RunSummary); each rank's table memory (max and min over ranks, from the placement).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/time.h"
#include "workloads/dlrm/sharders.h"
#include "workloads/dlrm/sharding_search_space.h"

namespace upsim::cli {

struct ShardOptions {
  std::string scenario;
  std::vector<std::string> overrides;  ///< "a.b=value", applied in order before the sharder's
  /// The plan file; empty: upsim-out/<scenario stem>[-N]/sharding_plan.yaml.
  std::string out_file;
  bool force = false;
  /// Plans simulated at once (>= 1).
  int jobs = 1;
  /// Search the open tables' sharding types (see the contract); off: rank the sharders only.
  bool search_types = true;
  /// The most plans the sharding-type search simulates (>= 1).
  int max_plans = 400;
  /// Type-search plans printed (>= 1); the rest are counted.
  int top = 10;
};

/// One candidate placement and its simulated outcome.
struct ShardedPlan {
  /// What the ranking shows: the sharder's name, or for the type search "sharder: 84 tw, 12 rw".
  std::string label;
  std::string sharder;  ///< sharding_strategy_name of what placed the table-wise pieces
  /// From the type search (not the scenario's own types).
  bool searched = false;
  bool fits = false;
  std::string does_not_fit;  ///< why not, when !fits
  Duration iteration_time;   ///< predicted (RunSummary::predicted_iteration_time)
  /// max / mean over ranks of each rank's embedding kernel time; 0 when no rank has any.
  double imbalance = 0.0;
  uint32_t slowest_rank = 0;
  Duration slowest_exposed_communication;
  int64_t table_bytes_max = 0;  ///< the most table memory on one rank
  int64_t table_bytes_min = 0;  ///< the least table memory on one rank
  /// Each table's type, and the placement as a plan reproduces it (when it fits).
  std::vector<TypeChoice> types;
  std::vector<PlannedTable> placement;
};

struct ShardRanking {
  std::string scenario_name;
  std::string own_sharder;  ///< the scenario's workload.sharding (after the overrides)
  size_t tables = 0;
  uint32_t gpus = 0;
  /// Ranks each plan spans: gpus, or a sharding group's under embeddings.two_d.
  uint32_t ranks = 0;
  std::string gpu;
  int64_t table_capacity_bytes = 0;  ///< per rank
  double table_memory_fraction = 0.0;
  /// Why no plan file can hold the placement (a random task); empty: one can.
  std::string no_plan_reason;
  /// The sharders on the scenario's own types, ranked (see the contract).
  std::vector<ShardedPlan> plans;

  /// The sharding-type search: why it did not run (empty when it ran), the sharder that placed
  /// its table-wise pieces, the types it tried, the open table classes (table ids), its rounds of
  /// descent, the plans it simulated, whether max_plans cut it short, and every distinct plan it
  /// tried, ranked.
  std::string search_skipped;
  std::string search_sharder;
  std::vector<TypeChoice> search_choices;
  std::vector<std::vector<uint32_t>> classes;
  size_t search_rounds = 0;
  size_t search_simulated = 0;
  bool search_cut_short = false;
  std::vector<ShardedPlan> searched;

  /// The scenario's own sharder's plan, or nullptr (it does not fit).
  const ShardedPlan* own() const;
  /// The fastest plan that fits of both lists (ties: the sharders' first), else the first of
  /// `plans`.
  const ShardedPlan& best() const;
};

/// Simulates and ranks (see the contract); writes nothing. Throws ConfigError for a bad or
/// non-DLRM scenario, SimulationError when a run cannot complete.
ShardRanking rank_sharders(const ShardOptions& options);

}  // namespace upsim::cli

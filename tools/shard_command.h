// `upsim shard`: which table placement makes a DLRM scenario train fastest.
//
// Contract:
//  - The scenario (with its --set overrides) is simulated once per sharder, each to steady state
//    as `upsim run` does (tools/steady_state.h): every value `workload.sharding` accepts
//    (sharding_strategies()) except `plan`, and `plan` too when the scenario itself uses one.
//    A scenario whose sharding is `plan` runs the other sharders with its sharding_plan unset.
//  - A sharder that cannot place the tables within each rank's table memory (a ShardingError:
//    table_memory_fraction x the GPU's memory) does not fit; it is not simulated and is listed
//    after every plan that fits, with the reason. Any other error of a run (a bad scenario, the
//    platform.memory_check) stops the command, as it stops `upsim run`.
//  - Ranking: plans that fit by predicted iteration time, ties by sharder name; then those
//    that do not fit, by name. The same scenario gives the same ranking, byte for byte, at any
//    --jobs.
//  - Per plan: the predicted iteration time; its change against the scenario's own sharder;
//    the load imbalance, max / mean over ranks of each rank's simulated embedding kernel time
//    (the FBGEMM lookup forward and the fused backward + optimizer, summed over the run's
//    iterations, which every rank runs alike); the exposed communication of the slowest rank
//    (the first of equals, RunSummary); each rank's table memory (max and min over ranks, from
//    the placement).
//  - The best plan is written as a sharding plan file (workloads/dlrm/dlrm_config.h: tables,
//    ranks, rank_of_table) whose comments name the scenario, its overrides, the sharder and the
//    predicted time; `sharding: plan` with `sharding_plan:` that file reproduces the run. Files
//    are never overwritten without --force and are written whole (tools/output_folder.h).
//  - A plan places table-wise tables only (dlrm_config.h): when some table of the scenario has
//    another sharding_type (row_wise, column_wise, data_parallel), every sharder is still ranked
//    (it places the table-wise tables and column-wise shards in the memory the others leave),
//    but no plan is written; the command says why and names the best sharder to set instead.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/time.h"

namespace upsim::cli {

struct ShardOptions {
  std::string scenario;
  std::vector<std::string> overrides;  ///< "a.b=value", applied in order before the sharder's
  /// The plan file; empty: upsim-out/<scenario stem>[-N]/sharding_plan.yaml.
  std::string out_file;
  bool force = false;
  /// Sharders simulated at once (>= 1).
  int jobs = 1;
};

/// One sharder's plan and its simulated outcome.
struct ShardedPlan {
  std::string sharder;  ///< sharding_strategy_name
  bool fits = false;
  std::string does_not_fit;  ///< why not, when !fits (the sharder's message)
  Duration iteration_time;   ///< predicted (RunSummary::predicted_iteration_time)
  /// max / mean over ranks of each rank's embedding kernel time; 0 when no rank has any.
  double imbalance = 0.0;
  uint32_t slowest_rank = 0;
  Duration slowest_exposed_communication;
  int64_t table_bytes_max = 0;  ///< the most table memory on one rank
  int64_t table_bytes_min = 0;  ///< the least table memory on one rank
  /// The placement's rank of each table (kNoSingleRank for one that is not table-wise).
  std::vector<uint32_t> rank_of_table;
};

struct ShardRanking {
  std::string scenario_name;
  std::string own_sharder;  ///< the scenario's workload.sharding (after the overrides)
  size_t tables = 0;
  uint32_t ranks = 0;
  std::string gpu;
  int64_t table_capacity_bytes = 0;  ///< per rank
  double table_memory_fraction = 0.0;
  /// Why no plan file can hold the placement (some table is not table-wise); empty: one can.
  std::string no_plan_reason;
  std::vector<ShardedPlan> plans;  ///< ranked (see the file comment)

  /// The scenario's own sharder's plan, or nullptr (it does not fit).
  const ShardedPlan* own() const;
};

/// Simulates and ranks every sharder (see the file comment); writes nothing. Throws ConfigError
/// for a bad or non-DLRM scenario, SimulationError when a run cannot complete.
ShardRanking rank_sharders(const ShardOptions& options);

/// The ranking as a table, with a header that says what each column measures.
std::string format_shard_ranking(const ShardRanking& ranking);

/// The plan file of `plan`, with comments naming where it came from.
std::string format_sharding_plan(const ShardRanking& ranking, const ShardedPlan& plan,
                                 const ShardOptions& options);

/// `upsim shard SCENARIO [options]`: prints the ranking to `out`, progress to `err`, writes the
/// best plan (or, with a table that is not table-wise, says why it writes none). Returns the exit
/// code (0); throws for bad input, and std::runtime_error when no sharder fits (after printing
/// the ranking).
int shard_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace upsim::cli

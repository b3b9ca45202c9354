// `upsim shard`: which sharding types and table placement make a DLRM scenario train fastest
// (the search: tools/shard_search.h).
//
// Contract:
//  - Prints the sharders' ranking (on the scenario's own types), then the sharding-type search's
//    best plans (ShardOptions::top of them; the rest counted), the overall best and the type of
//    each open table class in it.
//  - The best plan is written as a sharding plan file (workloads/dlrm/dlrm_config.h: tables,
//    ranks, and rank_of_table when every table is table-wise, else placement) whose comments
//    name the scenario, its overrides, the plan and the predicted time; `sharding: plan` with
//    `sharding_plan:` that file reproduces the run. Files are never overwritten without --force
//    and are written whole (tools/output_folder.h). A random task (a table list drawn for the
//    platform) takes no plan: the command says so and names the best sharder to set instead.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "tools/shard_search.h"

namespace upsim::cli {

/// The ranking as tables, with a header that says what each column measures.
std::string format_shard_ranking(const ShardRanking& ranking, int top = 10);

/// The plan file of `plan`, with comments naming where it came from.
std::string format_sharding_plan(const ShardRanking& ranking, const ShardedPlan& plan,
                                 const ShardOptions& options);

/// `upsim shard SCENARIO [options]`: prints the ranking to `out`, progress to `err`, writes the
/// best plan (or, for a random task, says why it writes none). Returns the exit code (0); throws
/// for bad input, and std::runtime_error when no plan fits (after printing the ranking).
int shard_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace upsim::cli

// `upsim plan SCENARIO`: the fastest parallel layout of a transformer scenario, by simulation
// (the search: tools/layout_search.h).
//
// Contract:
//  - Prints the simulated layouts ranked (iteration time, its change vs the scenario's layout,
//    tokens/s, model TFLOP/s per GPU, MFU, memory per GPU, the slowest rank's exposed
//    communication by dimension and its bubble; --top of them), then how many layouts were
//    pruned by the bound, refused for memory or by the workload, with the first reasons.
//  - A progress line per batch of simulations on stderr, with an estimate of the rest.
//  - A DLRM scenario, whose layout is its table placement, is handed over to `upsim shard`
//    (its --set, --jobs, --force; --out DIR gets DIR/sharding_plan.yaml).
//  - Writes into the output folder (default upsim-out/<scenario>-plan/, --out DIR; never over an
//    existing folder without --force): plan.csv (every layout, its outcome and numbers) and
//    best.yaml, the best layout as a resolved scenario, which `upsim run best.yaml` reproduces.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "tools/layout_search.h"

namespace upsim::cli {

/// The ranking as text (the simulated layouts, `top` of them, then the rest counted).
std::string format_layout_plan(const LayoutPlan& plan, size_t top);

/// plan.csv: every layout, one row each.
std::string layout_plan_csv(const LayoutPlan& plan);

int plan_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace upsim::cli

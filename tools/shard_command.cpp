#include "tools/shard_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "sim/cost_models.h"
#include "sim/observer.h"
#include "sim/parallel.h"
#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/steady_state.h"
#include "topology/fabric_loader.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_workload.h"
#include "workloads/dlrm/sharders.h"

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

constexpr const char* kPlanFile = "sharding_plan.yaml";

/// "+1.23%": the change of `t` against `base`.
std::string change(Duration t, Duration base) {
  return fmt::format("{:+.2f}%", 100.0 * (t.seconds() / base.seconds() - 1.0));
}

}  // namespace

namespace {

/// One row of a ranking table; `place` counts the fitting rows printed so far.
std::string plan_row(const ShardedPlan& p, const ShardedPlan* own, size_t width, size_t& place) {
  if (!p.fits) {
    return fmt::format("{:>4}  {:<{}} {:>10} {:>9} {:>9} {:>13} {:>11} {:>11}  does not fit: {}\n",
                       "-", p.label, width, "-", "-", "-", "-", "-", "-", p.does_not_fit);
  }
  return fmt::format("{:>4}  {:<{}} {:>10.4f} {:>9} {:>9.3f} {:>13.4f} {:>11} {:>11}  yes\n",
                     ++place, p.label, width, p.iteration_time.ms(),
                     own ? change(p.iteration_time, own->iteration_time) : "-", p.imbalance,
                     p.slowest_exposed_communication.ms(), format_bytes(p.table_bytes_max),
                     format_bytes(p.table_bytes_min));
}

std::string table_header(std::string_view first, size_t width) {
  return fmt::format("{:>4}  {:<{}} {:>10} {:>9} {:>9} {:>13} {:>11} {:>11}  {}\n", "#", first,
                     width, "iter (ms)", "change", "imbalance", "exposed (ms)", "tables max",
                     "tables min", "fits");
}

/// "tables 0-11" / "tables 3, 7" / "table 5": a class's ids, runs collapsed.
std::string table_ids(const std::vector<uint32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1)
      ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return fmt::format("{} {}", ids.size() == 1 ? "table" : "tables", out);
}

}  // namespace

std::string format_shard_ranking(const ShardRanking& r, int top) {
  std::string out = fmt::format(
      "shard: {} — {} tables on {} x {}, {} of table memory per GPU (table_memory_fraction "
      "{}); the scenario's sharder: {}\n",
      r.scenario_name, r.tables, r.gpus, r.gpu, format_bytes(r.table_capacity_bytes),
      r.table_memory_fraction, r.own_sharder);
  if (r.ranks != r.gpus) {
    out += fmt::format(
        "embeddings.two_d: each plan places the tables on one sharding group of {} GPUs, which "
        "all {} groups hold (TorchRec's planner plans one group); the times are the whole "
        "run's, replica syncs included\n",
        r.ranks, r.gpus / r.ranks);
  }
  out +=
      "iter: predicted iteration time; change: vs the scenario's sharder; imbalance: max / mean "
      "over ranks of\neach rank's simulated embedding kernel time (lookup forward + fused "
      "backward); exposed: exposed communication\nof the slowest rank; tables: table memory per "
      "GPU, max and min over ranks\n";
  const ShardedPlan* own = r.own();
  size_t width = 7;
  for (const ShardedPlan& p : r.plans)
    width = std::max(width, p.label.size());
  out += "\nsharders, each placing the scenario's own sharding types:\n";
  out += table_header("sharder", width);
  size_t place = 0;
  for (const ShardedPlan& p : r.plans)
    out += plan_row(p, own, width, place);

  if (!r.search_skipped.empty()) {
    out += fmt::format("\nsharding types: not searched: {}\n", r.search_skipped);
    return out;
  }
  std::vector<std::string> tried;
  for (const TypeChoice c : r.search_choices)
    tried.push_back(type_choice_name(c));
  out += fmt::format(
      "\nsharding types, searched over {} class{} of identical open tables ({}), {} placing the "
      "table-wise tables: {} plans simulated, {} round{} of descent{}:\n",
      r.classes.size(), r.classes.size() == 1 ? "" : "es", fmt::join(tried, ", "), r.search_sharder,
      r.search_simulated, r.search_rounds, r.search_rounds == 1 ? "" : "s",
      r.search_cut_short ? " (stopped at --max-plans)" : "");
  const auto shown = std::min(r.searched.size(), static_cast<size_t>(std::max(top, 1)));
  size_t search_width = 4;
  for (size_t i = 0; i < shown; ++i)
    search_width = std::max(search_width, r.searched[i].label.size());
  out += table_header("plan", search_width);
  place = 0;
  for (size_t i = 0; i < shown; ++i)
    out += plan_row(r.searched[i], own, search_width, place);
  if (shown < r.searched.size()) {
    size_t unfit = 0;
    for (size_t i = shown; i < r.searched.size(); ++i)
      unfit += r.searched[i].fits ? 0 : 1;
    out += fmt::format("   ({} more plan{} tried, {} of them not fitting; --top to list them)\n",
                       r.searched.size() - shown, r.searched.size() - shown == 1 ? "" : "s", unfit);
  }
  const ShardedPlan& best = r.best();
  if (best.fits && best.searched) {
    out += "sharding types of the best plan:\n";
    for (const std::vector<uint32_t>& cls : r.classes) {
      out += fmt::format("  {}: {}\n", table_ids(cls), type_choice_name(best.types[cls.front()]));
    }
  }
  return out;
}

std::string format_sharding_plan(const ShardRanking& ranking, const ShardedPlan& plan,
                                 const ShardOptions& options) {
  std::string out = fmt::format(
      "# Sharding plan written by `upsim shard`: the fastest of {} plans for scenario `{}` ({})",
      ranking.plans.size() + ranking.searched.size(), ranking.scenario_name, options.scenario);
  for (std::string assignment : options.overrides) {
    std::replace(assignment.begin(), assignment.end(), '\n', ' ');  // one comment line
    out += fmt::format(" --set {}", assignment);
  }
  out += "\n";
  out += fmt::format("# {}: {}; predicted iteration time {:.4f} ms",
                     plan.searched ? "plan" : "sharder", plan.label, plan.iteration_time.ms());
  if (const ShardedPlan* own = ranking.own()) {
    out += fmt::format(" ({} vs the scenario's {}, {:.4f} ms)",
                       change(plan.iteration_time, own->iteration_time), own->sharder,
                       own->iteration_time.ms());
  }
  out += "\n";
  out += fmt::format(
      "# Use it with `workload: {{sharding: plan, sharding_plan: <this file>}}` (a path relative "
      "to the scenario), or --set workload.sharding=plan --set workload.sharding_plan=<path>.\n");
  out += fmt::format("tables: {}\nranks: {}\n", plan.placement.size(), ranking.ranks);
  const bool table_wise = std::all_of(
      plan.placement.begin(), plan.placement.end(),
      [](const PlannedTable& p) { return p.type == EmbeddingShardingType::kTableWise; });
  if (table_wise) {
    std::vector<uint32_t> ranks;
    for (const PlannedTable& p : plan.placement)
      ranks.push_back(p.ranks.front());
    out += fmt::format("rank_of_table: [{}]\n", fmt::join(ranks, ", "));
    return out;
  }
  out += "placement:\n";
  for (size_t t = 0; t < plan.placement.size(); ++t)
    out += fmt::format("  - {}  # table {}\n", sharding_plan_entry(plan.placement[t]), t);
  return out;
}

int shard_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ShardOptions options;
  bool no_type_search = false;
  po::options_description desc(
      "usage: upsim shard SCENARIO [options]\n\n"
      "Searches the DLRM embedding-table placement of SCENARIO by simulation, each plan to\n"
      "steady state as `upsim run` does. First every sharder workload.sharding accepts\n"
      "(naive, naive_chunk, random, size_greedy, lookup_greedy, norm_lookup_greedy,\n"
      "size_lookup_greedy, capped_size_greedy; plan only when the scenario uses one) on the\n"
      "scenario's own sharding types; then the sharding type of every table whose group does\n"
      "not state one (TorchRec's types: table_wise, row_wise, data_parallel, column_wise in\n"
      "128-column shards above dim 128, table_row_wise across nodes), by classes of identical\n"
      "tables: each type for all of them, then coordinate descent, the best types then placed\n"
      "by every sharder. Prints per plan the predicted iteration time, its change vs the\n"
      "scenario's sharder, the load imbalance (max / mean over ranks of the simulated embedding\n"
      "kernel time), the slowest rank's exposed communication and the table memory per GPU\n"
      "(max, min); a plan whose tables do not fit the GPUs' table memory is listed last with\n"
      "the reason. Writes the best plan as a file that a scenario reads with `sharding: plan`\n"
      "and `sharding_plan: FILE`. Under embeddings.two_d a plan places the tables on one\n"
      "sharding group, which every group holds (TorchRec's planner plans one group), and\n"
      "hybrid and table_row_wise, which two_d refuses, are not tried.\n\noptions");
  desc.add_options()           //
      ("help,h", "this help")  //
      ("set,s", po::value<std::vector<std::string>>(&options.overrides)->composing(),
       "override a scenario value before the sharder's, e.g. --set workload.global_batch=8192 "
       "(repeatable; applied in order)")  //
      ("out,o", po::value<std::string>(&options.out_file),
       "the plan file (default: upsim-out/<scenario name>/sharding_plan.yaml, or -2, -3, ... if "
       "that folder exists); an existing file is not overwritten without --force")                //
      ("force", po::bool_switch(&options.force), "overwrite an existing plan file")               //
      ("jobs,j", po::value<int>(&options.jobs)->default_value(1), "plans simulated in parallel")  //
      ("no-type-search", po::bool_switch(&no_type_search),
       "rank the sharders on the scenario's own sharding types only")  //
      ("max-plans", po::value<int>(&options.max_plans)->default_value(400),
       "the most plans the sharding-type search simulates")  //
      ("top", po::value<int>(&options.top)->default_value(10),
       "sharding-type plans listed (the rest are counted)");
  if (!parse_with_positional(args, desc, out, "scenario", options.scenario)) return 0;
  if (options.scenario.empty()) {
    throw po::error("missing SCENARIO (a DLRM scenario, e.g. configs/dlrm_4gpu.yaml)");
  }
  if (options.jobs < 1) throw po::error("--jobs must be at least 1");
  if (options.max_plans < 1) throw po::error("--max-plans must be at least 1");
  if (options.top < 1) throw po::error("--top must be at least 1");
  options.search_types = !no_type_search;
  // An existing plan file fails before the simulations, not after.
  if (!options.out_file.empty()) refuse_to_overwrite(options.out_file, options.force);

  const auto start = std::chrono::steady_clock::now();
  const ShardRanking ranking = rank_sharders(options);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << format_shard_ranking(ranking, options.top);
  out.flush();
  err << fmt::format("simulated {} plans in {:.3f} s\n",
                     ranking.plans.size() + ranking.search_simulated, wall_s);
  const ShardedPlan& best = ranking.best();
  if (!best.fits) {
    throw std::runtime_error(fmt::format(
        "no plan places the {} tables within {} of table memory per GPU (a GPU's memory times "
        "platform.table_memory_fraction); no plan written: raise that fraction, use more or "
        "larger GPUs (platform.gpus, platform.gpu), or fewer or smaller tables",
        ranking.tables, format_bytes(ranking.table_capacity_bytes)));
  }
  const ShardedPlan* own = ranking.own();
  const std::string versus =
      own ? fmt::format(" ({} vs the scenario's {})",
                        change(best.iteration_time, own->iteration_time), own->sharder)
          : std::string();
  if (!ranking.no_plan_reason.empty()) {
    out << fmt::format(
        "best: {}, {:.4f} ms{}; no plan written: {}; set workload.sharding: {} to run this "
        "placement\n",
        best.label, best.iteration_time.ms(), versus, ranking.no_plan_reason, best.sharder);
    return 0;
  }
  fs::path file = options.out_file;
  OutputFolder folder;
  if (file.empty()) {
    folder = prepare_output_folder(options.scenario, "", {kPlanFile}, options.force);
    file = folder.path / kPlanFile;
  } else {
    refuse_to_overwrite(file, options.force);
  }
  OutputFiles plan(folder);
  plan.stage(file, format_sharding_plan(ranking, best, options));
  plan.commit();
  out << fmt::format("best: {}, {:.4f} ms{}; plan written to {}\n", best.label,
                     best.iteration_time.ms(), versus, file.string());
  return 0;
}

}  // namespace upsim::cli

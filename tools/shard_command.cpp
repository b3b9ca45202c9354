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

/// Each rank's summed kernel time of its embedding lookups (forward) and fused backwards, over
/// the whole run; reset at every run's start (each attempt of the steady-state search).
class EmbeddingWorkObserver final : public Observer {
 public:
  void on_run_begin(const TaskGraph& graph) override {
    graph_ = &graph;
    busy_.assign(graph.rank_count(), Duration::zero());
    begin_.clear();
  }
  void on_task_begin(TaskId task, Time at) override {
    if (is_embedding(task)) begin_[task] = at;
  }
  void on_task_end(TaskId task, Time at) override {
    const auto it = begin_.find(task);
    if (it == begin_.end()) return;
    busy_[graph_->task(task).rank] += at - it->second;
    begin_.erase(it);
  }
  const std::vector<Duration>& busy() const { return busy_; }

 private:
  bool is_embedding(TaskId task) const {
    if (graph_->task(task).kind != TaskKind::kKernel) return false;
    const KernelClass cls = graph_->kernel(task).cls;
    return cls == KernelClass::kEmbeddingForward || cls == KernelClass::kEmbeddingBackward;
  }

  const TaskGraph* graph_ = nullptr;
  std::vector<Duration> busy_;
  std::unordered_map<TaskId, Time> begin_;
};

/// The scenario document with the command's overrides, then the sharder's.
ConfigDocument load_for(const ShardOptions& options, std::string_view sharder, bool unset_plan) {
  ConfigDocument doc = ConfigDocument::load_file(options.scenario);
  for (const std::string& assignment : options.overrides)
    doc.apply_override(assignment);
  if (!sharder.empty()) doc.apply_override(fmt::format("workload.sharding={}", sharder));
  if (unset_plan) doc.apply_override("workload.sharding_plan=null");
  return doc;
}

/// What the DLRM workload places on `doc`'s platform, read back after build_scenario has read
/// (and defaulted) the platform keys: the same pure placement the generator makes
/// (place_dlrm_tables).
struct PlatformTables {
  DlrmConfig config;
  WorkloadPlatform platform;
  std::vector<int64_t> capacity;
};

PlatformTables platform_tables(ConfigDocument& doc) {
  PlatformTables out;
  const ConfigNode platform = doc.root().child("platform");
  out.platform.gpus = static_cast<uint32_t>(platform.get_positive_int("gpus"));
  out.platform.device = load_hardware_profile(platform.load_reference("gpu")).device;
  out.platform.table_memory_fraction = platform.get_double("table_memory_fraction");
  if (platform.has("topology")) {
    out.platform.node_of_gpu =
        load_fabric(platform.load_reference("topology")).gpu_nodes(out.platform.gpus);
  }
  out.config = parse_dlrm_config(doc.root().child("workload"), out.platform.gpus);
  // build_scenario drew the same task already (draws are pure); this cannot fail.
  draw_dlrm_random_task(out.config, out.platform.gpus, out.platform.device.hbm_bytes);
  out.capacity.assign(out.platform.gpus, dlrm_table_capacity_bytes(out.platform));
  choose_sharding_types(out.config, out.platform.gpus, out.capacity.front());
  return out;
}

TablePlacement place(const PlatformTables& t) {
  return place_dlrm_tables(t.config, t.capacity, dlrm_ranks_per_node(t.config, t.platform));
}

struct Outcome {
  ShardedPlan plan;
  PlatformTables tables;
};

Outcome simulate(const ShardOptions& options, std::string_view sharder, bool unset_plan) {
  ConfigDocument doc = load_for(options, sharder, unset_plan);
  Outcome out;
  out.plan.sharder = std::string(sharder);
  EmbeddingWorkObserver work;
  std::optional<SteadyRun> run;
  try {
    run.emplace(run_to_steady_state(
        doc, [&](const Scenario&, GraphExecutor& executor) { executor.add_observer(&work); }));
  } catch (const ConfigError&) {
    // A sharder that cannot place the tables does not fit; anything else is the scenario's.
    std::optional<std::string> reason;
    try {
      out.tables = platform_tables(doc);
      (void)place(out.tables);
    } catch (const ShardingError& e) {
      reason = e.what();
    } catch (const ConfigError&) {
    }
    if (!reason) throw;
    out.plan.does_not_fit = *reason;
    return out;
  }
  out.tables = platform_tables(doc);
  const TablePlacement placement = place(out.tables);
  const RunSummary& summary = run->summary;
  out.plan.fits = true;
  out.plan.iteration_time = summary.predicted_iteration_time;
  out.plan.rank_of_table = placement.rank_of_table;
  const auto [least, most] =
      std::minmax_element(placement.memory_bytes.begin(), placement.memory_bytes.end());
  out.plan.table_bytes_min = *least;
  out.plan.table_bytes_max = *most;
  for (size_t r = 0; r < summary.ranks.size(); ++r) {
    if (summary.ranks[r].iteration_time > summary.ranks[out.plan.slowest_rank].iteration_time) {
      out.plan.slowest_rank = static_cast<uint32_t>(r);
    }
  }
  out.plan.slowest_exposed_communication =
      summary.ranks[out.plan.slowest_rank].exposed_communication;
  Duration total = Duration::zero();
  Duration max = Duration::zero();
  for (const Duration d : work.busy()) {
    total += d;
    max = std::max(max, d);
  }
  if (total > Duration::zero()) {
    const double mean = total.seconds() / static_cast<double>(work.busy().size());
    out.plan.imbalance = max.seconds() / mean;
  }
  return out;
}

/// Why a plan file cannot hold a placement of `config`'s tables (a plan places a fixed list of
/// table-wise tables only: dlrm_config.h), or "" when it can.
std::string no_plan_reason(const DlrmConfig& config) {
  if (config.random_task) {
    return "a sharding plan places a fixed table list, and embeddings.random_task draws the "
           "tables for the platform";
  }
  const std::vector<EmbeddingTable>& tables = config.tables;
  size_t others = 0;
  size_t first = 0;
  for (size_t t = 0; t < tables.size(); ++t) {
    if (tables[t].sharding_type == EmbeddingShardingType::kTableWise) continue;
    if (others++ == 0) first = t;
  }
  if (others == 0) return "";
  return fmt::format(
      "a sharding plan places table-wise tables only, and {} of the {} tables {} not (table {} "
      "is {})",
      others, tables.size(), others == 1 ? "is" : "are", first,
      embedding_sharding_type_name(tables[first].sharding_type));
}

/// "+1.23%": the change of `t` against `base`.
std::string change(Duration t, Duration base) {
  return fmt::format("{:+.2f}%", 100.0 * (t.seconds() / base.seconds() - 1.0));
}

}  // namespace

const ShardedPlan* ShardRanking::own() const {
  for (const ShardedPlan& p : plans) {
    if (p.sharder == own_sharder && p.fits) return &p;
  }
  return nullptr;
}

ShardRanking rank_sharders(const ShardOptions& options) {
  if (options.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  ShardRanking ranking;
  {
    ConfigDocument doc = load_for(options, "", false);
    const ConfigNode root = doc.root();
    const ConfigNode workload = root.child("workload");
    const std::string model = workload.get_string("model");
    if (model != "dlrm") {
      workload.child("model").fail(fmt::format(
          "upsim shard places DLRM embedding tables, but this scenario's workload is `{}` "
          "(workload.model: dlrm)",
          model));
    }
    ranking.scenario_name = root.get_string_or("name", doc.file().stem().string());
    std::vector<std::string_view> names;
    for (const ShardingStrategy s : sharding_strategies())
      names.push_back(sharding_strategy_name(s));
    ranking.own_sharder = workload.get_choice_or(
        "sharding", names, sharding_strategy_name(ShardingStrategy::kSizeLookupGreedy));
  }
  const bool own_is_plan = ranking.own_sharder == sharding_strategy_name(ShardingStrategy::kPlan);
  std::vector<std::string> sharders;
  for (const ShardingStrategy s : sharding_strategies()) {
    if (s != ShardingStrategy::kPlan || own_is_plan) {
      sharders.emplace_back(sharding_strategy_name(s));
    }
  }

  // Simulate on `jobs` threads; results land in sharder order (the first error in that order
  // is rethrown once all have run).
  std::vector<std::optional<Outcome>> outcomes(sharders.size());
  parallel_for(sharders.size(), static_cast<size_t>(options.jobs), [&](size_t i) {
    const bool unset_plan = own_is_plan && sharders[i] != ranking.own_sharder;
    outcomes[i].emplace(simulate(options, sharders[i], unset_plan));
  });

  for (std::optional<Outcome>& o : outcomes) {
    if (ranking.ranks == 0) {
      ranking.tables = o->tables.config.tables.size();
      ranking.ranks = o->tables.platform.gpus;
      ranking.gpu = o->tables.platform.device.name;
      ranking.table_capacity_bytes = dlrm_table_capacity_bytes(o->tables.platform);
      ranking.table_memory_fraction = o->tables.platform.table_memory_fraction;
      ranking.no_plan_reason = no_plan_reason(o->tables.config);
    }
    ranking.plans.push_back(std::move(o->plan));
  }
  std::sort(ranking.plans.begin(), ranking.plans.end(),
            [](const ShardedPlan& a, const ShardedPlan& b) {
              if (a.fits != b.fits) return a.fits;
              if (a.fits && a.iteration_time != b.iteration_time) {
                return a.iteration_time < b.iteration_time;
              }
              return a.sharder < b.sharder;
            });
  return ranking;
}

std::string format_shard_ranking(const ShardRanking& r) {
  std::string out = fmt::format(
      "shard: {} — {} tables on {} x {}, {} of table memory per GPU (table_memory_fraction "
      "{}); the scenario's sharder: {}\n",
      r.scenario_name, r.tables, r.ranks, r.gpu, format_bytes(r.table_capacity_bytes),
      r.table_memory_fraction, r.own_sharder);
  out +=
      "iter: predicted iteration time; change: vs the scenario's sharder; imbalance: max / mean "
      "over ranks of\neach rank's simulated embedding kernel time (lookup forward + fused "
      "backward); exposed: exposed communication\nof the slowest rank; tables: table memory per "
      "GPU, max and min over ranks\n";
  size_t width = 7;
  for (const ShardedPlan& p : r.plans)
    width = std::max(width, p.sharder.size());
  out += fmt::format("{:>4}  {:<{}} {:>10} {:>9} {:>9} {:>13} {:>11} {:>11}  {}\n", "#", "sharder",
                     width, "iter (ms)", "change", "imbalance", "exposed (ms)", "tables max",
                     "tables min", "fits");
  const ShardedPlan* own = r.own();
  size_t place = 0;
  for (const ShardedPlan& p : r.plans) {
    if (!p.fits) {
      out +=
          fmt::format("{:>4}  {:<{}} {:>10} {:>9} {:>9} {:>13} {:>11} {:>11}  does not fit: {}\n",
                      "-", p.sharder, width, "-", "-", "-", "-", "-", "-", p.does_not_fit);
      continue;
    }
    out += fmt::format("{:>4}  {:<{}} {:>10.4f} {:>9} {:>9.3f} {:>13.4f} {:>11} {:>11}  yes\n",
                       ++place, p.sharder, width, p.iteration_time.ms(),
                       own ? change(p.iteration_time, own->iteration_time) : "-", p.imbalance,
                       p.slowest_exposed_communication.ms(), format_bytes(p.table_bytes_max),
                       format_bytes(p.table_bytes_min));
  }
  return out;
}

std::string format_sharding_plan(const ShardRanking& ranking, const ShardedPlan& plan,
                                 const ShardOptions& options) {
  std::string out = fmt::format(
      "# Sharding plan written by `upsim shard`: the fastest of {} sharders for scenario `{}` "
      "({})",
      ranking.plans.size(), ranking.scenario_name, options.scenario);
  for (std::string assignment : options.overrides) {
    std::replace(assignment.begin(), assignment.end(), '\n', ' ');  // one comment line
    out += fmt::format(" --set {}", assignment);
  }
  out += "\n";
  out += fmt::format("# sharder: {}; predicted iteration time {:.4f} ms", plan.sharder,
                     plan.iteration_time.ms());
  if (const ShardedPlan* own = ranking.own()) {
    out += fmt::format(" ({} vs the scenario's {}, {:.4f} ms)",
                       change(plan.iteration_time, own->iteration_time), own->sharder,
                       own->iteration_time.ms());
  }
  out += "\n";
  out += fmt::format(
      "# Use it with `workload: {{sharding: plan, sharding_plan: <this file>}}` (a path relative "
      "to the scenario), or --set workload.sharding=plan --set workload.sharding_plan=<path>.\n");
  out += fmt::format("tables: {}\nranks: {}\nrank_of_table: [{}]\n", plan.rank_of_table.size(),
                     ranking.ranks, fmt::join(plan.rank_of_table, ", "));
  return out;
}

int shard_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ShardOptions options;
  po::options_description desc(
      "usage: upsim shard SCENARIO [options]\n\n"
      "Ranks the DLRM embedding-table sharders of SCENARIO (every value workload.sharding\n"
      "accepts: naive, naive_chunk, random, size_greedy, lookup_greedy, norm_lookup_greedy,\n"
      "size_lookup_greedy, capped_size_greedy; plan only when the scenario uses one): simulates\n"
      "the scenario once\n"
      "per sharder, each to steady state as `upsim run` does, and prints per plan\n"
      "the predicted iteration time, its change vs the scenario's sharder, the load imbalance\n"
      "(max / mean over ranks of the simulated embedding kernel time), the slowest rank's exposed\n"
      "communication and the table memory per GPU (max, min). A sharder whose tables do not fit\n"
      "the GPUs' table memory is listed last with the reason. Writes the best plan as a file\n"
      "that a scenario reads with `sharding: plan` and `sharding_plan: FILE` (a plan places\n"
      "table_wise tables only: with a row_wise, column_wise or data_parallel table the\n"
      "sharders are ranked but no plan is written).\n\noptions");
  desc.add_options()           //
      ("help,h", "this help")  //
      ("set,s", po::value<std::vector<std::string>>(&options.overrides)->composing(),
       "override a scenario value before the sharder's, e.g. --set workload.global_batch=8192 "
       "(repeatable; applied in order)")  //
      ("out,o", po::value<std::string>(&options.out_file),
       "the plan file (default: upsim-out/<scenario name>/sharding_plan.yaml, or -2, -3, ... if "
       "that folder exists); an existing file is not overwritten without --force")   //
      ("force", po::bool_switch(&options.force), "overwrite an existing plan file")  //
      ("jobs,j", po::value<int>(&options.jobs)->default_value(1), "sharders simulated in parallel");
  if (!parse_with_positional(args, desc, out, "scenario", options.scenario)) return 0;
  if (options.scenario.empty()) {
    throw po::error("missing SCENARIO (a DLRM scenario, e.g. configs/dlrm_4gpu.yaml)");
  }
  if (options.jobs < 1) throw po::error("--jobs must be at least 1");
  // An existing plan file fails before the simulations, not after.
  if (!options.out_file.empty()) refuse_to_overwrite(options.out_file, options.force);

  const auto start = std::chrono::steady_clock::now();
  const ShardRanking ranking = rank_sharders(options);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << format_shard_ranking(ranking);
  out.flush();
  err << fmt::format("simulated {} sharders in {:.3f} s\n", ranking.plans.size(), wall_s);
  const ShardedPlan& best = ranking.plans.front();
  if (!best.fits) {
    throw std::runtime_error(fmt::format(
        "no sharder places the {} tables within {} of table memory per GPU (a GPU's memory times "
        "platform.table_memory_fraction); no plan written: raise that fraction, use more or "
        "larger GPUs (platform.gpus, platform.gpu), or fewer or smaller tables",
        ranking.tables, format_bytes(ranking.table_capacity_bytes)));
  }
  if (!ranking.no_plan_reason.empty()) {
    out << fmt::format(
        "best: {}, {:.4f} ms; no plan written: {}; set workload.sharding: {} to run this "
        "placement\n",
        best.sharder, best.iteration_time.ms(), ranking.no_plan_reason, best.sharder);
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
  out << fmt::format("best: {}, {:.4f} ms; plan written to {}\n", best.sharder,
                     best.iteration_time.ms(), file.string());
  return 0;
}

}  // namespace upsim::cli

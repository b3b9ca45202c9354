#include "tools/shard_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "calibration/hardware_profile.h"
#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"
#include "sim/observer.h"
#include "sim/parallel.h"
#include "tools/scenario.h"
#include "tools/steady_state.h"
#include "topology/fabric_loader.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_workload.h"

namespace upsim::cli {

namespace {

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
  ConfigDocument doc = load_scenario(options.scenario, options.overrides);
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
  /// Ranks one plan spans: a sharding group's under embeddings.two_d (TorchRec's planner plans
  /// one group, which every group then holds), else every GPU.
  uint32_t shard_ranks = 0;
  std::vector<int64_t> capacity;  ///< per rank of a plan
  uint32_t ranks_per_node = 0;
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
  out.shard_ranks = out.config.sharding_ranks(out.platform.gpus);
  // build_scenario drew the same task already (draws are pure); this cannot fail.
  draw_dlrm_random_task(out.config, out.shard_ranks, out.platform.device.hbm_bytes);
  out.capacity.assign(out.shard_ranks, dlrm_table_capacity_bytes(out.platform));
  choose_sharding_types(out.config, out.shard_ranks, out.capacity.front());
  // The platform's nodes, as table-row-wise tables would span them (also when the scenario has
  // none: the type search may choose them); nodes of unequal size take none (one node), and so
  // does two_d, which refuses them.
  if (out.config.two_d.sharding_group_size != 0) return out;
  DlrmConfig probe = out.config;
  probe.tables.front().sharding_type = EmbeddingShardingType::kTableRowWise;
  try {
    out.ranks_per_node = dlrm_ranks_per_node(probe, out.platform);
  } catch (const ShardingError&) {
    out.ranks_per_node = 0;
  }
  return out;
}

/// Fills `plan`'s outcome (fits = true) from a run's summary and embedding work, its tables
/// placed as `placed`.
void fill_outcome(const RunSummary& summary, const EmbeddingWorkObserver& work,
                  const DlrmConfig& config, const TablePlacement& placed, ShardedPlan& plan) {
  plan.fits = true;
  plan.iteration_time = summary.predicted_iteration_time;
  plan.types = type_choices_of(config.tables);
  plan.placement = planned_tables(placed, config.tables);
  const auto [least, most] =
      std::minmax_element(placed.memory_bytes.begin(), placed.memory_bytes.end());
  plan.table_bytes_min = *least;
  plan.table_bytes_max = *most;
  for (size_t r = 0; r < summary.ranks.size(); ++r) {
    if (summary.ranks[r].iteration_time > summary.ranks[plan.slowest_rank].iteration_time) {
      plan.slowest_rank = static_cast<uint32_t>(r);
    }
  }
  plan.slowest_exposed_communication = summary.ranks[plan.slowest_rank].exposed_communication;
  Duration total = Duration::zero();
  Duration max = Duration::zero();
  for (const Duration d : work.busy()) {
    total += d;
    max = std::max(max, d);
  }
  if (total > Duration::zero()) {
    const double mean = total.seconds() / static_cast<double>(work.busy().size());
    plan.imbalance = max.seconds() / mean;
  }
}

/// Runs `doc` to steady state and fills `plan` (fill_outcome).
void simulate_into(ConfigDocument& doc, const DlrmConfig& config, const TablePlacement& placed,
                   ShardedPlan& plan) {
  EmbeddingWorkObserver work;
  const SteadyRun run = run_to_steady_state(
      doc, [&](const Scenario&, GraphExecutor& executor) { executor.add_observer(&work); });
  fill_outcome(run.summary, work, config, placed, plan);
}

struct Outcome {
  ShardedPlan plan;
  PlatformTables tables;
};

/// A sharder on the scenario's own types, run as the scenario runs it.
Outcome simulate_sharder(const ShardOptions& options, std::string_view sharder, bool unset_plan) {
  ConfigDocument doc = load_for(options, sharder, unset_plan);
  Outcome out;
  out.plan.sharder = std::string(sharder);
  out.plan.label = out.plan.sharder;
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
      (void)place_dlrm_tables(out.tables.config, out.tables.capacity, out.tables.ranks_per_node);
    } catch (const ShardingError& e) {
      reason = e.what();
    } catch (const ConfigError&) {
    }
    if (!reason) throw;
    out.plan.does_not_fit = *reason;
    out.plan.types = type_choices_of(out.tables.config.tables);
    return out;
  }
  out.tables = platform_tables(doc);
  const TablePlacement placed =
      place_dlrm_tables(out.tables.config, out.tables.capacity, out.tables.ranks_per_node);
  fill_outcome(run->summary, work, out.tables.config, placed, out.plan);
  return out;
}

/// The plan of `placement` on `ranks` ranks as one line of YAML (a --set value).
std::string flow_plan(const std::vector<PlannedTable>& placement, uint32_t ranks) {
  std::string out = fmt::format("{{tables: {}, ranks: {}, placement: [", placement.size(), ranks);
  for (size_t t = 0; t < placement.size(); ++t)
    out += (t > 0 ? ", " : "") + sharding_plan_entry(placement[t]);
  return out + "]}";
}

/// Evaluates type assignments placed by sharders, each distinct placement simulated once.
class PlanEvaluator {
 public:
  PlanEvaluator(const ShardOptions& options, const PlatformTables& base)
      : options_(options), base_(base) {}

  struct Candidate {
    std::vector<TypeChoice> types;
    std::string sharder;
  };

  /// The outcome of each candidate, in order; simulates at most `budget` new placements (the
  /// candidates past it are dropped: the result is shorter).
  std::vector<ShardedPlan> evaluate(const std::vector<Candidate>& candidates, size_t budget) {
    std::vector<ShardedPlan> out;
    std::vector<std::string> keys;
    std::vector<size_t> fresh;  // indices into `out` to simulate
    std::map<std::string, size_t> pending;
    std::vector<DlrmConfig> configs;
    std::vector<TablePlacement> placements;
    for (const Candidate& c : candidates) {
      ShardedPlan plan;
      plan.sharder = c.sharder;
      plan.searched = true;
      plan.types = c.types;
      plan.label = fmt::format("{}: {}", c.sharder, type_mix(c.types));
      DlrmConfig config = base_.config;
      try {
        apply_type_choices(config.tables, c.types, config.global_batch, base_.shard_ranks);
      } catch (const ShardingError& e) {
        plan.does_not_fit = e.what();
        out.push_back(std::move(plan));
        keys.emplace_back();
        continue;
      }
      config.sharding = sharding_strategy_named(c.sharder).value();
      config.sharding_plan.clear();
      TablePlacement placed;
      try {
        placed = place_dlrm_tables(config, base_.capacity, base_.ranks_per_node);
      } catch (const ShardingError& e) {
        plan.does_not_fit = e.what();
        out.push_back(std::move(plan));
        keys.emplace_back();
        continue;
      }
      const std::string key = flow_plan(planned_tables(placed, config.tables), base_.shard_ranks);
      if (done_.count(key) == 0 && pending.count(key) == 0) {
        if (fresh.size() >= budget) break;
        pending.emplace(key, out.size());
        fresh.push_back(out.size());
      }
      out.push_back(std::move(plan));
      keys.push_back(key);
      configs.push_back(std::move(config));
      placements.push_back(std::move(placed));
      config_of_.emplace(out.size() - 1, configs.size() - 1);
    }
    parallel_for(fresh.size(), static_cast<size_t>(options_.jobs), [&](size_t i) {
      const size_t at = fresh[i];
      const size_t c = config_of_.at(at);
      ConfigDocument doc = load_for(options_, "plan", false);
      doc.apply_override("workload.sharding_plan=" + keys[at]);
      try {
        simulate_into(doc, configs[c], placements[c], out[at]);
      } catch (const ConfigError& e) {
        // The scenario itself ran (as the sharders' step); this placement does not fit its
        // memory check.
        out[at].does_not_fit = e.message();
      }
    });
    simulated_ += fresh.size();
    for (const size_t at : fresh)
      done_.emplace(keys[at], out[at]);
    for (size_t i = 0; i < out.size(); ++i) {
      if (keys[i].empty()) continue;
      const auto it = done_.find(keys[i]);
      const std::string label = out[i].label;
      const std::string sharder = out[i].sharder;
      out[i] = it->second;
      out[i].label = label;
      out[i].sharder = sharder;
    }
    config_of_.clear();
    return out;
  }

  size_t simulated() const { return simulated_; }

 private:
  const ShardOptions& options_;
  const PlatformTables& base_;
  std::map<std::string, ShardedPlan> done_;
  std::map<size_t, size_t> config_of_;
  size_t simulated_ = 0;
};

bool faster(const ShardedPlan& a, const ShardedPlan& b) {
  if (a.fits != b.fits) return a.fits;
  return a.fits && a.iteration_time < b.iteration_time;
}

void sort_plans(std::vector<ShardedPlan>& plans) {
  std::stable_sort(plans.begin(), plans.end(), [](const ShardedPlan& a, const ShardedPlan& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits && a.iteration_time != b.iteration_time) return a.iteration_time < b.iteration_time;
    return a.label < b.label;
  });
}

/// The sharding-type search (see the contract) into `ranking`.
void search_types(const ShardOptions& options, const PlatformTables& base, ShardRanking& ranking) {
  const uint32_t ranks = base.shard_ranks;
  if (!options.search_types) {
    ranking.search_skipped = "--no-type-search";
    return;
  }
  if (base.config.random_task) {
    ranking.search_skipped =
        "embeddings.random_task draws the tables for the platform, and a plan holds a fixed "
        "table list";
    return;
  }
  if (ranks <= 1) {
    ranking.search_skipped = "one GPU holds every table whole";
    return;
  }
  ranking.classes = open_table_classes(base.config.tables);
  if (ranking.classes.empty()) {
    ranking.search_skipped =
        "every table group states its sharding_type, which the search keeps "
        "(leave it out, or set auto, to search it)";
    return;
  }
  const uint32_t nodes = base.ranks_per_node == 0 ? 1 : ranks / base.ranks_per_node;
  ranking.search_choices = sharding_type_choices(base.config.embedding_dim, ranks, nodes);
  if (base.config.two_d.sharding_group_size != 0) {
    // dlrm_config.h refuses hybrid tables under two_d (TorchRec's DMPCollection has none).
    std::erase_if(ranking.search_choices,
                  [](const TypeChoice& c) { return c.type == EmbeddingShardingType::kHybrid; });
  }

  // The fastest fitting sharder places the table-wise pieces.
  ranking.search_sharder.clear();
  for (const ShardedPlan& p : ranking.plans) {
    if (p.fits && p.sharder != sharding_strategy_name(ShardingStrategy::kPlan)) {
      ranking.search_sharder = p.sharder;
      break;
    }
  }
  if (ranking.search_sharder.empty()) {
    ranking.search_sharder =
        ranking.own_sharder == sharding_strategy_name(ShardingStrategy::kPlan)
            ? std::string(sharding_strategy_name(ShardingStrategy::kSizeLookupGreedy))
            : ranking.own_sharder;
  }

  PlanEvaluator evaluator(options, base);
  const auto budget_left = [&] {
    return static_cast<size_t>(options.max_plans) -
           std::min<size_t>(evaluator.simulated(), options.max_plans);
  };
  std::map<std::string, ShardedPlan> seen;  // every distinct candidate, by label + placement
  const auto remember = [&](const std::vector<ShardedPlan>& plans) {
    for (const ShardedPlan& p : plans) {
      std::string key = p.label + "\n" + (p.fits ? flow_plan(p.placement, ranks) : p.does_not_fit);
      seen.emplace(std::move(key), p);
    }
  };
  const auto run_batch = [&](const std::vector<PlanEvaluator::Candidate>& batch) {
    std::vector<ShardedPlan> out = evaluator.evaluate(batch, budget_left());
    if (out.size() < batch.size()) ranking.search_cut_short = true;
    remember(out);
    return out;
  };

  // The scenario's types and each type for every open table at once.
  const std::vector<TypeChoice> own = type_choices_of(base.config.tables);
  std::vector<PlanEvaluator::Candidate> batch = {{own, ranking.search_sharder}};
  for (const TypeChoice& choice : ranking.search_choices) {
    std::vector<TypeChoice> uniform = own;
    for (const std::vector<uint32_t>& cls : ranking.classes) {
      for (const uint32_t t : cls)
        uniform[t] = choice;
    }
    if (uniform != own) batch.push_back({std::move(uniform), ranking.search_sharder});
  }
  std::vector<ShardedPlan> results = run_batch(batch);
  size_t best = 0;
  for (size_t i = 1; i < results.size(); ++i) {
    if (faster(results[i], results[best])) best = i;
  }
  std::vector<TypeChoice> current = results.empty() ? own : batch[best].types;
  ShardedPlan current_plan = results.empty() ? ShardedPlan{} : results[best];

  // Coordinate descent over the classes.
  while (!ranking.search_cut_short) {
    batch.clear();
    for (const std::vector<uint32_t>& cls : ranking.classes) {
      for (const TypeChoice& choice : ranking.search_choices) {
        if (current[cls.front()] == choice) continue;
        std::vector<TypeChoice> moved = current;
        for (const uint32_t t : cls)
          moved[t] = choice;
        batch.push_back({std::move(moved), ranking.search_sharder});
      }
    }
    if (batch.empty()) break;
    ++ranking.search_rounds;
    results = run_batch(batch);
    std::optional<size_t> better;
    for (size_t i = 0; i < results.size(); ++i) {
      if (faster(results[i], better ? results[*better] : current_plan)) better = i;
    }
    if (!better) break;
    current = batch[*better].types;
    current_plan = results[*better];
  }

  // The fastest types, placed by every sharder (the sharders' step did that for the scenario's
  // own types).
  batch.clear();
  for (const ShardingStrategy s : sharding_strategies()) {
    if (s == ShardingStrategy::kPlan || current == own) continue;
    batch.push_back({current, std::string(sharding_strategy_name(s))});
  }
  if (!batch.empty()) (void)run_batch(batch);
  ranking.search_simulated = evaluator.simulated();
  // The scenario's own types are the sharders' rows already.
  for (auto& [key, plan] : seen) {
    if (plan.types != own) ranking.searched.push_back(std::move(plan));
  }
  sort_plans(ranking.searched);
}

/// Why a plan file cannot hold a placement of `config`'s tables, or "" when it can.
std::string no_plan_reason(const DlrmConfig& config) {
  if (config.random_task) {
    return "a sharding plan places a fixed table list, and embeddings.random_task draws the "
           "tables for the platform";
  }
  return "";
}

}  // namespace

const ShardedPlan* ShardRanking::own() const {
  for (const ShardedPlan& p : plans) {
    if (p.sharder == own_sharder && !p.searched && p.fits) return &p;
  }
  return nullptr;
}

const ShardedPlan& ShardRanking::best() const {
  const ShardedPlan* out = &plans.front();
  for (const ShardedPlan& p : searched) {
    if (faster(p, *out)) out = &p;
  }
  return *out;
}

ShardRanking rank_sharders(const ShardOptions& options) {
  if (options.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (options.max_plans < 1) throw std::invalid_argument("--max-plans must be at least 1");
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
    outcomes[i].emplace(simulate_sharder(options, sharders[i], unset_plan));
  });

  // The type search starts from the scenario's types as a sharder other than a plan sees them.
  std::optional<PlatformTables> base;
  for (size_t i = 0; i < sharders.size() && !base; ++i) {
    if (sharders[i] != sharding_strategy_name(ShardingStrategy::kPlan)) base = outcomes[i]->tables;
  }
  for (std::optional<Outcome>& o : outcomes) {
    if (ranking.ranks == 0) {
      ranking.tables = o->tables.config.tables.size();
      ranking.gpus = o->tables.platform.gpus;
      ranking.ranks = o->tables.shard_ranks;
      ranking.gpu = o->tables.platform.device.name;
      ranking.table_capacity_bytes = dlrm_table_capacity_bytes(o->tables.platform);
      ranking.table_memory_fraction = o->tables.platform.table_memory_fraction;
      ranking.no_plan_reason = no_plan_reason(o->tables.config);
    }
    ranking.plans.push_back(std::move(o->plan));
  }
  sort_plans(ranking.plans);

  search_types(options, *base, ranking);
  return ranking;
}

}  // namespace upsim::cli

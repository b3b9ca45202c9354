#include "tools/plan_command.h"

#include <fmt/format.h>

#include <algorithm>

#include <boost/program_options.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/run_tables.h"
#include "tools/scenario.h"
#include "tools/shard_command.h"

#ifdef UPSIM_HAVE_MPI
#include "tools/memory_shared_jobs.h"
#include "tools/mpi_jobs.h"
#endif

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

constexpr const char* kPlanCsv = "plan.csv";
constexpr const char* kBestScenario = "best.yaml";
constexpr const char* kLayoutRecords = "layouts";  // tools/layout_records.h

std::string outcome_name(PlannedLayout::Outcome o) {
  switch (o) {
    case PlannedLayout::Outcome::kSimulated:
      return "simulated";
    case PlannedLayout::Outcome::kPruned:
      return "pruned";
    case PlannedLayout::Outcome::kNoMemory:
      return "no_memory";
    case PlannedLayout::Outcome::kInvalid:
      return "invalid";
    case PlannedLayout::Outcome::kMachineLimit:
      return "machine_limit";
    case PlannedLayout::Outcome::kNotReached:
      return "not_simulated";
  }
  return "unknown";
}

std::string percent(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}%", 100.0 * *v) : std::string("-");
}

/// Whether `options.scenario` (with its --set overrides) is a DLRM scenario.
bool is_dlrm_scenario(const PlanOptions& options) {
  ConfigDocument doc = load_scenario(options.scenario, options.overrides);
  const ConfigNode root = doc.root();
  if (!root.has("workload") || !root.child("workload").has("model")) return false;
  const ConfigNode model = root.child("workload").child("model");
  return model.is_scalar() && model.as_string() == "dlrm";
}

}  // namespace

std::string format_layout_plan(const LayoutPlan& plan, size_t top) {
  std::string out = fmt::format(
      "plan: {} — layouts on {} x {} ({} of memory; tensor parallel within {} GPUs of a node, {} "
      "sequence parallel{})\n",
      plan.scenario_name, plan.gpus, plan.gpu, format_bytes(plan.gpu_memory_bytes), plan.node_gpus,
      plan.sequence_parallel ? "with" : "without",
      plan.sequence_parallel_stated ? " as the scenario states"
                                    : "; set workload.parallelism.sequence to choose");
  out +=
      "iter: predicted iteration time; change: vs the scenario's layout; exposed tp / pp / dp: "
      "the slowest rank's exposed\ncommunication per dimension, ms per iteration; mem: the "
      "memory estimate per GPU\n";
  // The layout column fits the longest listed label (memory savers lengthen some).
  size_t label_width = 24;
  {
    size_t listed = 0;
    for (const PlannedLayout& l : plan.layouts) {
      if (l.outcome != PlannedLayout::Outcome::kSimulated || listed++ >= top) continue;
      label_width = std::max(label_width, l.label.size() + (l.own ? 2 : 0));
    }
  }
  out += fmt::format(
      "{:>4}  {:<{}} {:>11} {:>8} {:>11} {:>10} {:>6} {:>10} {:>9} {:>9} {:>9} "
      "{:>9}\n",
      "#", "layout", label_width, "iter (ms)", "change", "tokens/s", "TFLOP/s", "MFU", "mem", "tp",
      "pp", "dp", "bubble");
  const PlannedLayout* own = plan.own();
  size_t rank = 0;
  size_t simulated = 0;
  for (const PlannedLayout& l : plan.layouts) {
    if (l.outcome != PlannedLayout::Outcome::kSimulated) continue;
    ++simulated;
    if (rank >= top) continue;
    ++rank;
    const std::string change =
        own ? fmt::format(
                  "{:+.2f}%",
                  100.0 * (l.iteration_time.seconds() / own->iteration_time.seconds() - 1.0))
            : std::string("-");
    out += fmt::format(
        "{:>4}  {:<{}} {:>11.2f} {:>8} {:>11.0f} {:>10} {:>6} {:>10} {:>9.2f} {:>9.2f} {:>9.2f} "
        "{:>9.2f}\n",
        rank, l.label + (l.own ? " *" : ""), label_width, l.iteration_time.ms(), change,
        l.tokens_per_s,
        l.model_tflops_per_gpu ? fmt::format("{:.1f}", *l.model_tflops_per_gpu) : "-",
        percent(l.mfu), format_bytes(l.memory_bytes), l.exposed_tp.ms(), l.exposed_pp.ms(),
        l.exposed_dp.ms(), l.bubble.ms());
  }
  if (simulated > rank)
    out += fmt::format("   ({} more simulated; --top to list them)\n", simulated - rank);
  out += "   * the scenario's own layout\n";
  std::map<PlannedLayout::Outcome, std::vector<const PlannedLayout*>> left;
  for (const PlannedLayout& l : plan.layouts) {
    if (l.outcome != PlannedLayout::Outcome::kSimulated) left[l.outcome].push_back(&l);
  }
  const auto say = [&](PlannedLayout::Outcome o, std::string_view what) {
    const auto it = left.find(o);
    if (it == left.end()) return;
    out += fmt::format("{} {}: {}", it->second.size(), what, it->second.front()->label);
    out += fmt::format(" ({})", it->second.front()->reason);
    if (it->second.size() > 1) out += fmt::format(" and {} more", it->second.size() - 1);
    out += "\n";
  };
  say(PlannedLayout::Outcome::kPruned,
      "pruned by the lower bound (model FLOPs at the dense peak "
      "and the ideal bubble)");
  say(PlannedLayout::Outcome::kNoMemory, "refused for memory");
  say(PlannedLayout::Outcome::kInvalid, "refused by the workload");
  say(PlannedLayout::Outcome::kMachineLimit, "too large to simulate in this machine's memory");
  say(PlannedLayout::Outcome::kNotReached, "not simulated");
  return out;
}

std::string layout_plan_csv(const LayoutPlan& plan) {
  std::string out =
      "layout,own,outcome,tensor,pipeline,virtual_stages,context,expert,data,micro_batch,"
      "framework_options,iteration_ms,"
      "tokens_per_s,model_tflops_per_gpu,mfu,memory_bytes_per_gpu,exposed_tp_ms,exposed_pp_ms,"
      "exposed_dp_ms,bubble_ms,lower_bound_ms,reason\n";
  for (const PlannedLayout& l : plan.layouts) {
    const bool sim = l.outcome == PlannedLayout::Outcome::kSimulated;
    const auto num = [&](double v) { return sim ? fmt::format("{:.6g}", v) : std::string(); };
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{}\n",
        csv_field(l.label), l.own, outcome_name(l.outcome), l.tensor, l.pipeline, l.virtual_stages,
        l.context, l.expert, l.data, l.micro_batch, csv_field(l.framework_options),
        num(l.iteration_time.ms()), num(l.tokens_per_s),
        sim && l.model_tflops_per_gpu ? fmt::format("{:.6g}", *l.model_tflops_per_gpu) : "",
        sim && l.mfu ? fmt::format("{:.6g}", *l.mfu) : "", l.memory_bytes, num(l.exposed_tp.ms()),
        num(l.exposed_pp.ms()), num(l.exposed_dp.ms()), num(l.bubble.ms()), l.lower_bound.ms(),
        csv_field(l.reason));
  }
  return out;
}

int plan_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  PlanOptions options;
  std::string out_dir;
  bool force = false;
  bool no_memory_savers = false;
  int top = 20;
  int gpus = 0;
  int batch = 0;
  int refine = 3;
  po::options_description desc(
      "usage: upsim plan SCENARIO [options]\n\n"
      "Searches the parallel layout of a transformer SCENARIO by simulation: tensor parallel\n"
      "(with sequence parallel) within a node, pipeline stages and virtual stages, context\n"
      "parallel (sequences of 8K tokens and more), expert parallel (MoE models), data\n"
      "parallel and the micro-batch size, for the scenario's model, global batch and fabric;\n"
      "then tries the fastest with the framework options left open (distributed optimizer,\n"
      "FSDP, FSDP's float8 all-gather under torchao tensorwise, Transformer Engine's TP\n"
      "communication overlap, or torchtitan's async TP; for MoE layers DeepEP and the EP\n"
      "all-to-all overlap).\n"
      "Layouts the workload refuses or whose memory estimate exceeds the GPU are left out\n"
      "with the reason; a lower bound (model FLOPs at the dense peak, stretched by the ideal\n"
      "pipeline bubble) prunes layouts that cannot beat the best found; the rest run to steady\n"
      "state as `upsim run` does, best bound first. Prints the ranking with tokens/s, model\n"
      "TFLOP/s per GPU, MFU, memory and exposed communication per dimension; writes plan.csv\n"
      "and best.yaml (the best layout as a scenario) to the output folder. Under mpirun\n"
      "(`mpirun -np N upsim plan ...`) each batch's layouts are shared out over the ranks.\n\n"
      "options");
  desc.add_options()           //
      ("help,h", "this help")  //
      ("set,s", po::value<std::vector<std::string>>(&options.overrides)->composing(),
       "override a scenario value for every layout (repeatable)")  //
      ("gpus", po::value<int>(&gpus)->default_value(0),
       "the GPUs to lay out (default: the scenario's)")                                         //
      ("top", po::value<int>(&top)->default_value(20), "layouts listed")                        //
      ("jobs,j", po::value<int>(&options.jobs)->default_value(1), "layouts simulated at once")  //
      ("max-simulations", po::value<int>(&options.max_simulations)->default_value(64),
       "the most layouts simulated")  //
      ("refine", po::value<int>(&refine)->default_value(3),
       "the fastest layouts tried again with the framework options left open (0: none)")  //
      ("batch", po::value<int>(&batch)->default_value(0),
       "layouts simulated between two pruning decisions (default 4, under mpirun at least the "
       "ranks); the layouts simulated depend on it, not on --jobs or the ranks")  //
      ("out,o", po::value<std::string>(&out_dir),
       "the output folder (default: upsim-out/<scenario name>-plan)")            //
      ("force", po::bool_switch(&force), "overwrite the output folder's files")  //
      ("no-memory-savers", po::bool_switch(&no_memory_savers),
       "keep the scenario's ZeRO and recompute settings on every layout: a layout that does not "
       "fit is refused, as under a framework without the distributed optimizer; --refine then "
       "tries no data-parallel sharding either")  //
      ("resume", po::bool_switch(&options.resume),
       "go on with an earlier plan in the output folder: layouts it simulated from the same "
       "inputs (upsim version, scenario content) are taken from their records in layouts/, the "
       "rest simulated; implies replacing plan.csv and best.yaml");
  if (!parse_with_positional(args, desc, out, "scenario", options.scenario)) return 0;
    // Under mpirun (and built with MPI), rank 0 searches and hands each batch's layouts out; the
    // other ranks only simulate the layouts they are given.
#ifdef UPSIM_HAVE_MPI
  std::optional<mpi::Session> mpi_session;
  if (mpi::launched_by_mpi()) mpi_session.emplace();
  const bool under_mpi = mpi_session.has_value();
#else
  const bool under_mpi = false;
#endif
  // A DLRM scenario's layout is its table placement: the sharding search answers it.
  if (!options.scenario.empty() && is_dlrm_scenario(options)) {
    err << "plan: a DLRM scenario, whose layout is its embedding tables' sharding types and "
           "placement: handing over to `upsim shard`\n";
    if (gpus > 0) throw po::error("--gpus applies to transformer scenarios; set platform.gpus");
    if (under_mpi) {
      throw po::error("upsim shard does not run under mpirun; run it on one machine with -j");
    }
    if (options.resume || no_memory_savers) {
      throw po::error(fmt::format(
          "{} applies to transformer layouts; `upsim shard` searches a DLRM scenario's placement",
          options.resume ? "--resume" : "--no-memory-savers"));
    }
    std::vector<std::string> shard_args = {options.scenario};
    for (const std::string& o : options.overrides) {
      shard_args.push_back("--set");
      shard_args.push_back(o);
    }
    shard_args.push_back(fmt::format("--jobs={}", options.jobs));
    if (!out_dir.empty()) {
      shard_args.push_back("--out");
      shard_args.push_back((fs::path(out_dir) / "sharding_plan.yaml").string());
      fs::create_directories(out_dir);
    }
    if (force) shard_args.push_back("--force");
    return shard_main(shard_args, out, err);
  }
  if (options.scenario.empty()) {
    throw po::error(
        "missing SCENARIO (a transformer scenario, e.g. configs/llama3_70b_64gpu.yaml)");
  }
  if (options.jobs < 1) throw po::error("--jobs must be at least 1");
  if (top < 1) throw po::error("--top must be at least 1");
  if (gpus < 0) throw po::error("--gpus must not be negative");
  if (options.max_simulations < 1) throw po::error("--max-simulations must be at least 1");
  if (batch < 0) throw po::error("--batch must be at least 1");
  if (refine < 0) throw po::error("--refine must not be negative");
  options.refine = static_cast<size_t>(refine);
  options.gpus = static_cast<uint32_t>(gpus);
  options.memory_savers = !no_memory_savers;
  if (batch > 0) options.batch = static_cast<size_t>(batch);
#ifdef UPSIM_HAVE_MPI
  // The processes on a node share its memory; a layout past its share runs again on rank 0
  // alone after the round (tools/memory_shared_jobs.h).
  const size_t node_shares = mpi_session ? static_cast<size_t>(mpi_session->local_size()) : 1;
  const auto simulate = [&options, node_shares](const std::string& job) {
    return result_or_run_alone(
        node_shares, [&](size_t shares) { return simulate_layout_job(options, job, shares); });
  };
  if (mpi_session && mpi_session->rank() != 0) {
    mpi::serve_jobs(simulate);
    return 0;
  }
  // Its destruction tells the other ranks to stop, also when an error leaves first.
  std::optional<mpi::JobServer> job_server;
  if (mpi_session) {
    job_server.emplace(*mpi_session);
    if (batch == 0) options.batch = std::max(kPlanBatch, static_cast<size_t>(mpi_session->size()));
    options.run_jobs = [&](const std::vector<std::string>& jobs,
                           const std::function<void(size_t, const std::string&)>& done) {
      run_round_then_alone(
          [&](const JobDone& round_done) { job_server->run_round(jobs, simulate, round_done); },
          [&](size_t k) { return simulate_layout_job(options, jobs[k], 1); }, done);
    };
  }
#endif
  // A progress line per batch, with the time the rest may take at this batch's pace.
  options.progress = [&err](size_t simulated, size_t remaining, double elapsed_s) {
    const double per_layout = elapsed_s / static_cast<double>(simulated);
    err << fmt::format("plan: {} layouts simulated in {:.1f} s; at most {} more, ETA {:.0f} s\n",
                       simulated, elapsed_s, remaining,
                       per_layout * static_cast<double>(remaining));
  };

  // The folder is claimed before the simulations, so an existing one fails first.
  const fs::path requested =
      out_dir.empty()
          ? fs::path("upsim-out") / (fs::path(options.scenario).stem().string() + "-plan")
          : fs::path(out_dir);
  OutputFolder folder = prepare_output_folder(options.scenario, requested,
                                              {kPlanCsv, kBestScenario}, force || options.resume);
  options.records_dir = folder.path / kLayoutRecords;
  // Made now, so that a file in its way fails before any simulation.
  std::error_code ec;
  fs::create_directories(options.records_dir, ec);
  if (ec || !fs::is_directory(options.records_dir)) {
    throw std::runtime_error(fmt::format("cannot keep the layout records in '{}': {}",
                                         options.records_dir.string(),
                                         ec ? ec.message() : "not a directory"));
  }
  const LayoutPlan plan = plan_layouts(options);
  out << format_layout_plan(plan, static_cast<size_t>(top));
  out.flush();
  if (options.resume) {
    err << fmt::format(
        "resumed {} layouts from {}{}\n", plan.resumed, options.records_dir.string(),
        plan.stale_records > 0
            ? fmt::format("; {} records were from another version or other inputs, or damaged, "
                          "and those layouts ran again",
                          plan.stale_records)
            : std::string());
  }
  err << fmt::format("simulated {} layouts in {:.1f} s\n", plan.simulated - plan.resumed,
                     plan.wall_s);
  OutputFiles files(folder);
  files.stage(folder.path / kPlanCsv, layout_plan_csv(plan));
  const PlannedLayout* best = plan.best();
  if (best == nullptr) {
    files.commit();
    throw std::runtime_error("no layout was simulated to the end; see plan.csv for why");
  }
  std::string scenario = fmt::format(
      "# The fastest layout `upsim plan` found for scenario `{}` ({}): {}, predicted {:.4f} ms per "
      "iteration.\n# `upsim run` on this file reproduces it.\n",
      plan.scenario_name, options.scenario, best->label, best->iteration_time.ms());
  scenario += best->resolved_yaml;
  files.stage(folder.path / kBestScenario, scenario);
  files.commit();
  out << fmt::format("best: {}, {:.2f} ms{}; written to {}\n", best->label,
                     best->iteration_time.ms(),
                     plan.own() ? fmt::format(" ({:+.2f}% vs the scenario's {})",
                                              100.0 * (best->iteration_time.seconds() /
                                                           plan.own()->iteration_time.seconds() -
                                                       1.0),
                                              plan.own()->label)
                                : std::string(),
                     (folder.path / kBestScenario).string());
  return 0;
}

}  // namespace upsim::cli

#include "tools/run_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "sim/executor.h"
#include "sim/export/chrome_trace_writer.h"
#include "sim/export/run_summary.h"
#include "tools/output_folder.h"
#include "tools/scenario.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTraceFile = "trace.json";
constexpr const char* kSummaryFile = "summary.txt";
constexpr const char* kResolvedFile = "scenario.yaml";

/// Trace workloads: the measured iteration time of each rank next to the prediction.
std::string format_measured_comparison(const Scenario& scenario, const RunSummary& summary) {
  size_t name_width = 10;
  for (const RankBreakdown& r : summary.ranks)
    name_width = std::max(name_width, r.name.size());
  std::string out = fmt::format("{:<{}} {:>14} {:>14} {:>9}\n", "rank", name_width, "measured (ms)",
                                "predicted (ms)", "error");
  double log_sum = 0.0;
  size_t n = 0;
  for (size_t r = 0; r < summary.ranks.size() && r < scenario.measured_iteration.size(); ++r) {
    const Duration measured = scenario.measured_iteration[r];
    const Duration predicted = summary.ranks[r].iteration_time;
    if (measured <= Duration::zero()) continue;
    const double e = predicted.seconds() / measured.seconds() - 1.0;
    // seed-method.md 1.4: geomean of |e| with EPSILON = 4e-4.
    log_sum += std::log(std::abs(e) + 4e-4);
    ++n;
    out += fmt::format("{:<{}} {:>14.4f} {:>14.4f} {:>8.2f}%\n", summary.ranks[r].name, name_width,
                       measured.ms(), predicted.ms(), 100.0 * e);
  }
  if (n > 0) {
    out += fmt::format("geomean |error| {:.2f}% over {} ranks (exp mean ln(|e| + 4e-4))\n",
                       100.0 * std::exp(log_sum / static_cast<double>(n)), n);
  }
  return out;
}

}  // namespace

void run_scenario(const RunOptions& options, std::ostream& out) {
  ConfigDocument doc = ConfigDocument::load_file(options.scenario);
  for (const std::string& assignment : options.overrides)
    doc.apply_override(assignment);
  const Scenario scenario = build_scenario(doc);

  std::vector<std::string> planned{kSummaryFile, kResolvedFile};
  const bool trace_in_folder = !options.no_trace && options.trace_file.empty();
  if (trace_in_folder) planned.push_back(kTraceFile);
  if (!options.trace_file.empty() && !options.force && fs::exists(options.trace_file)) {
    throw std::runtime_error(fmt::format(
        "{} already exists; upsim does not overwrite files unasked: choose another --trace "
        "file, or pass --force to overwrite",
        options.trace_file));
  }
  const fs::path out_dir =
      prepare_output_folder(options.scenario, options.out_dir, planned, options.force);
  const fs::path trace_path = options.no_trace             ? fs::path()
                              : options.trace_file.empty() ? out_dir / kTraceFile
                                                           : fs::path(options.trace_file);

  Engine engine;
  GraphExecutor executor(engine, scenario.graph, scenario.models.set);
  RunSummaryObserver summary_observer(scenario.warmup_iterations, scenario.measured_iterations);
  executor.add_observer(&summary_observer);
  std::unique_ptr<ChromeTraceWriter> trace;
  if (!trace_path.empty()) {
    trace = std::make_unique<ChromeTraceWriter>(trace_path);
    trace->add_metadata("scenario", scenario.name);
    executor.add_observer(trace.get());
  }

  const auto wall_start = std::chrono::steady_clock::now();
  const RunStats stats = executor.run();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  const RunSummary summary = summary_observer.summary();
  std::string text = scenario.description;
  text += format_run_summary(summary);
  if (!scenario.measured_iteration.empty()) text += format_measured_comparison(scenario, summary);
  write_file_atomically(out_dir / kSummaryFile, text);
  write_file_atomically(out_dir / kResolvedFile, doc.resolved_yaml());

  if (options.quiet) {
    out << fmt::format("{:.4f}\n", summary.predicted_iteration_time.ms());
    return;
  }
  out << text;
  out << fmt::format("simulated {} tasks, {} events in {:.3f} s ({:.2f} M events/s)\n",
                     stats.tasks_done, stats.events, wall_s,
                     wall_s > 0 ? static_cast<double>(stats.events) / wall_s * 1e-6 : 0.0);
  out << fmt::format("outputs: {}/ ({}{}, {})\n", out_dir.string(),
                     trace_in_folder ? "trace.json, " : "", kSummaryFile, kResolvedFile);
  if (!trace_path.empty()) {
    out << fmt::format("open {} in https://ui.perfetto.dev or chrome://tracing\n",
                       trace_path.string());
  }
}

}  // namespace upsim::cli

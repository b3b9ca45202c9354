#include "tools/run_documents.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/export/run_summary.h"
#include "tools/run_metrics.h"

namespace upsim::cli {
namespace {

/// Trace workloads measuring several steps: per step the measured and predicted time (means
/// over the ranks that have the step), their error (or what-if change), and the rank whose
/// error is largest; then the geomean and the worst step. A mean over steps can hide steps
/// that are far off; this shows them.
std::string format_measured_steps(const Scenario& scenario, const RunSummary& summary) {
  const std::vector<std::string>& labels = scenario.measured_step_labels;
  if (labels.size() < 2 || summary.ranks.empty()) return "";
  const bool what_if = scenario.comparison.kind == MeasuredComparison::Kind::kWhatIf;
  const uint32_t first = scenario.warmup_iterations;
  size_t label_width = 4;
  for (const std::string& l : labels)
    label_width = std::max(label_width, l.size());
  std::string out = fmt::format("per step ({} steps; means over the ranks):\n", labels.size());
  out += fmt::format("{:<{}} {:>14} {:>14} {:>9} {:>16}\n", "step", label_width, "measured (ms)",
                     "predicted (ms)", what_if ? "change" : "error", "worst rank");
  double log_sum = 0.0;
  size_t n = 0;
  double worst = 0.0;
  std::string worst_step;
  for (size_t k = 0; k < labels.size(); ++k) {
    double measured = 0.0;
    double predicted = 0.0;
    size_t ranks = 0;
    double rank_worst = 0.0;
    size_t rank_worst_at = 0;
    for (size_t r = 0; r < summary.ranks.size() && r < scenario.measured_step_times.size(); ++r) {
      const std::vector<Duration>& times = summary.ranks[r].iteration_times;
      const Duration m = scenario.measured_step_times[r][k];
      if (m <= Duration::zero() || first + k >= times.size()) continue;
      const double p = times[first + k].seconds();
      measured += m.seconds();
      predicted += p;
      ++ranks;
      const double e = p / m.seconds() - 1.0;
      if (std::abs(e) >= std::abs(rank_worst)) {
        rank_worst = e;
        rank_worst_at = r;
      }
    }
    if (ranks == 0) {
      out += fmt::format("{:<{}} {:>14} {:>14}   no measured time\n", labels[k], label_width, "-",
                         "-");
      continue;
    }
    const double e = predicted / measured - 1.0;
    log_sum += std::log(std::abs(e) + 4e-4);
    ++n;
    if (std::abs(e) >= std::abs(worst)) {
      worst = e;
      worst_step = labels[k];
    }
    out += fmt::format("{:<{}} {:>14.4f} {:>14.4f} {:>8.2f}% {:>7.2f}% rank {:<3}\n", labels[k],
                       label_width, 1e3 * measured / static_cast<double>(ranks),
                       1e3 * predicted / static_cast<double>(ranks), 100.0 * e, 100.0 * rank_worst,
                       rank_worst_at);
  }
  if (n > 0) {
    out += fmt::format("per-step |{}|: geomean {:.2f}% over {} steps, worst {:+.2f}% ({})\n",
                       what_if ? "change" : "error",
                       100.0 * std::exp(log_sum / static_cast<double>(n)), n, 100.0 * worst,
                       worst_step);
  }
  return out;
}

}  // namespace

std::string format_measured_comparison(const Scenario& scenario, const RunSummary& summary) {
  using Kind = MeasuredComparison::Kind;
  const Kind kind = scenario.comparison.kind;
  size_t name_width = 10;
  for (const RankBreakdown& r : summary.ranks)
    name_width = std::max(name_width, r.name.size());
  std::string out;
  if (kind == Kind::kWhatIf) {
    out += fmt::format(
        "what-if: {}; measured is the traced run, so the last column is the predicted change, "
        "not an error\n",
        scenario.comparison.reason);
  }
  out += fmt::format("{:<{}} {:>14} {:>14}", "rank", name_width, "measured (ms)", "predicted (ms)");
  out += kind == Kind::kError    ? fmt::format(" {:>9}\n", "error")
         : kind == Kind::kWhatIf ? fmt::format(" {:>9}\n", "change")
                                 : "\n";
  double log_sum = 0.0;
  size_t n = 0;
  for (size_t r = 0; r < summary.ranks.size() && r < scenario.measured_iteration.size(); ++r) {
    const Duration measured = scenario.measured_iteration[r];
    const Duration predicted = summary.ranks[r].iteration_time;
    if (kind == Kind::kNone) {
      const std::string measured_text =
          measured > Duration::zero() ? fmt::format("{:.4f}", measured.ms()) : "-";
      out += fmt::format("{:<{}} {:>14} {:>14.4f}\n", summary.ranks[r].name, name_width,
                         measured_text, predicted.ms());
      continue;
    }
    // build_scenario only compares positive measured times (an iteration of no measured time is
    // an error where the workload reads it); a rank without one is said, not skipped.
    if (measured <= Duration::zero()) {
      out += fmt::format("{:<{}} {:>14} {:>14.4f}   no measured iteration\n", summary.ranks[r].name,
                         name_width, "-", predicted.ms());
      continue;
    }
    const double e = predicted.seconds() / measured.seconds() - 1.0;
    // Lin et al., TPDS 2024: geomean of |e| with EPSILON = 4e-4.
    log_sum += std::log(std::abs(e) + 4e-4);
    ++n;
    out += fmt::format("{:<{}} {:>14.4f} {:>14.4f} {:>8.2f}%\n", summary.ranks[r].name, name_width,
                       measured.ms(), predicted.ms(), 100.0 * e);
  }
  if (kind == Kind::kNone) {
    out += fmt::format("no error: {}\n", scenario.comparison.reason);
  } else if (n > 0 && kind == Kind::kError) {
    out += fmt::format("geomean |error| {:.2f}% over {} ranks (exp mean ln(|e| + 4e-4))\n",
                       100.0 * std::exp(log_sum / static_cast<double>(n)), n);
  }
  if (kind != Kind::kNone) out += format_measured_steps(scenario, summary);
  return out;
}

std::string summary_with_metrics(const Scenario& scenario, const RunSummary& summary,
                                 std::string text) {
  const std::optional<RunMetrics> metrics = run_metrics(scenario, summary);
  if (!metrics) return text;
  const size_t end = text.find('\n');
  text.insert(end == std::string::npos ? text.size() : end + 1, format_run_metrics(*metrics));
  return text;
}

RunDocuments run_documents(const RunIdentity& identity, const ConfigDocument& doc,
                           const SteadyRun& run, const std::vector<OpProfileRow>& ops) {
  const Scenario& scenario = run.scenario;
  const RunSummary& summary = run.summary;
  RunDocuments out;
  out.summary_text = scenario.description;
  out.summary_text += summary_with_metrics(scenario, summary, format_run_summary(summary));
  if (!scenario.measured_iteration.empty()) {
    out.summary_text += format_measured_comparison(scenario, summary);
  }
  out.resolved_yaml = doc.resolved_yaml();
  out.summary_json = summary_json(identity, scenario, summary, run.stats);
  out.ranks_csv = ranks_csv(summary);
  out.links_csv = links_csv(summary);
  const uint32_t measured = summary.ranks.empty() ? 1 : summary.ranks.front().measured_iterations;
  out.ops_csv = ops_csv(ops, measured, summary.ranks.size());
  out.warnings = run_warnings(scenario.warnings, run.stats);
  return out;
}

RunDocuments run_in_memory(ConfigDocument& doc, const RunIdentity& identity) {
  std::unique_ptr<OpProfileObserver> ops;
  const auto attach = [&ops](const Scenario& scenario, GraphExecutor& executor) {
    ops = std::make_unique<OpProfileObserver>(scenario.warmup_iterations,
                                              scenario.measured_iterations);
    executor.add_observer(ops.get());
  };
  const SteadyRun run = run_to_steady_state(doc, attach);
  if (!ops) throw std::logic_error("run_in_memory: no attempt ran");
  return run_documents(identity, doc, run, ops->rows());
}

}  // namespace upsim::cli

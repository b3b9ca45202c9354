#include "topology/collective_cross_validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace upsim {
namespace {

constexpr int64_t kSweepSmallBytes = 64 * 1024;
constexpr int64_t kSweepLargeBytes = 256LL * 1024 * 1024;
constexpr size_t kSweepMinPoints = 8;
// A parameter is undetermined when scaling it by this factor changes the training objective by
// no more than kFlatRelative of its value (plus kFlatAbsolute).
constexpr double kProbeFactor = 1.25;
constexpr double kFlatRelative = 1e-9;
constexpr double kFlatAbsolute = 1e-15;
// Probe-and-fit rounds per fold (see leave_one_system_out).
constexpr int kProbeRounds = 4;

std::string percent(double v) {
  return fmt::format("{:.2f}%", 100.0 * v);
}

std::string value_text(TuningParameterUnit unit, double v) {
  switch (unit) {
    case TuningParameterUnit::kMicroseconds:
      return fmt::format("{:.4g} us", v);
    case TuningParameterUnit::kGigabytesPerSecond:
      return fmt::format("{:.4g} GB/s", v);
    case TuningParameterUnit::kFraction:
      return fmt::format("{:.4g}", v);
  }
  return {};
}

}  // namespace

bool is_full_sweep(std::span<const MeasuredCollective> points) {
  if (points.size() < kSweepMinPoints) return false;
  int64_t smallest = points.front().bytes;
  int64_t largest = points.front().bytes;
  for (const MeasuredCollective& p : points) {
    smallest = std::min(smallest, p.bytes);
    largest = std::max(largest, p.bytes);
  }
  return smallest <= kSweepSmallBytes && largest >= kSweepLargeBytes;
}

double band_geomean_abs_error(const CollectiveValidation& v, int64_t low, int64_t high,
                              size_t* count) {
  double log_sum = 0.0;
  size_t n = 0;
  for (const CollectivePoint& p : v.points) {
    if (p.bytes < low || p.bytes > high) continue;
    log_sum += std::log(std::max(std::abs(p.error), 1e-9));
    ++n;
  }
  if (count != nullptr) *count = n;
  return n == 0 ? 0.0 : std::exp(log_sum / static_cast<double>(n));
}

std::vector<HeldOutFold> leave_one_system_out(std::span<const CollectiveFitSystem> systems,
                                              const CollectiveTuning& prior,
                                              const CrossValidationOptions& options) {
  if (systems.size() < 2) {
    throw std::invalid_argument("leave-one-system-out: needs at least two measured systems");
  }
  std::vector<HeldOutFold> folds;
  for (size_t h = 0; h < systems.size(); ++h) {
    if (!is_full_sweep(systems[h].points)) continue;
    std::vector<const CollectiveFitSystem*> training;
    HeldOutFold fold;
    fold.held_out = systems[h].name;
    for (size_t i = 0; i < systems.size(); ++i) {
      if (i == h) continue;
      training.push_back(&systems[i]);
      fold.trained_on.push_back(systems[i].name);
    }
    const std::span<const CollectiveFitSystem* const> train(training);
    auto objective_at = [&](const CollectiveTuning& t) {
      return collective_fit_objective(validate_system_subset(train, t));
    };
    // Whether the training objective moves when `name` is scaled around its value in `at`.
    auto depends_on = [&](const CollectiveTuning& at, double at_objective,
                          const std::string& name) {
      const TuningParameter p = tuning_parameter(at, name);
      const double v = tuning_parameter_value(at, p);
      double moved = v * kProbeFactor;
      if (p.unit == TuningParameterUnit::kFraction && moved > 1.0) moved = v / kProbeFactor;
      if (p.unit == TuningParameterUnit::kMicroseconds && v == 0.0) moved = 1.0;
      CollectiveTuning probe = at;
      set_tuning_parameter(probe, p, moved);
      return std::abs(objective_at(probe) - at_objective) >
             kFlatRelative * std::abs(at_objective) + kFlatAbsolute;
    };
    // Rounds: probe the parameters not yet fitted at the current tuning, fit every parameter
    // found so far from the current tuning, repeat while a round finds new ones (a protocol's
    // cap may matter only once another value has moved).
    const double prior_objective = objective_at(prior);
    CollectiveTuning current = prior;
    double current_objective = prior_objective;
    std::vector<std::string> pending = options.parameters;
    std::vector<bool> found(options.parameters.size(), false);
    int evaluations = 0;
    bool any_fit = false;
    for (int round = 0; round < kProbeRounds; ++round) {
      std::vector<std::string> still;
      bool new_found = false;
      for (const std::string& name : pending) {
        if (depends_on(current, current_objective, name)) {
          const auto at = std::find(options.parameters.begin(), options.parameters.end(), name);
          found[static_cast<size_t>(at - options.parameters.begin())] = true;
          new_found = true;
        } else {
          still.push_back(name);
        }
      }
      if (!new_found || evaluations >= options.max_evaluations) break;
      CollectiveFitOptions fit_options;
      for (size_t i = 0; i < options.parameters.size(); ++i) {
        if (found[i]) fit_options.parameters.push_back(options.parameters[i]);
      }
      fit_options.max_evaluations = options.max_evaluations - evaluations;
      fold.fit = fit_collective_tuning_subset(train, current, fit_options);
      evaluations += fold.fit.evaluations;
      current = fold.fit.tuning;
      current_objective = fold.fit.objective_after;
      pending = std::move(still);
      any_fit = true;
    }
    fold.undetermined = pending;
    fold.fit.before = validate_system_subset(train, prior);
    fold.fit.objective_before = prior_objective;
    fold.fit.evaluations = evaluations;
    if (any_fit) {
      for (FittedParameter& p : fold.fit.parameters)
        p.start = tuning_parameter_value(prior, p.parameter);
    } else {
      fold.fit.tuning = prior;
      fold.fit.after = fold.fit.before;
      fold.fit.objective_after = prior_objective;
      fold.fit.converged = true;
    }
    fold.validation =
        validate_collective(systems[h].fabric, fold.fit.tuning, systems[h].kind, systems[h].points,
                            systems[h].name, systems[h].harness_overhead);
    fold.band_geomean =
        band_geomean_abs_error(fold.validation, kBandLowBytes, kBandHighBytes, &fold.band_points);
    folds.push_back(std::move(fold));
  }
  if (folds.empty()) {
    throw std::invalid_argument(
        "leave-one-system-out: no system has a full sweep (<= 64 KiB to >= 256 MiB, 8 points)");
  }
  return folds;
}

std::string format_cross_validation(std::span<const HeldOutFold> folds, std::string_view prior_name,
                                    bool points) {
  std::string out;
  for (const HeldOutFold& f : folds) {
    out += fmt::format("HELD OUT: {}\n", f.held_out);
    out += fmt::format("  tuning: fitted on {} other system(s), none of its points: ",
                       f.trained_on.size());
    for (size_t i = 0; i < f.trained_on.size(); ++i)
      out += (i > 0 ? "; " : "") + f.trained_on[i];
    out += fmt::format("\n  start (prior): {}\n", prior_name);
    size_t width = 9;
    for (const FittedParameter& p : f.fit.parameters)
      width = std::max(width, p.parameter.name.size());
    for (const std::string& name : f.undetermined)
      width = std::max(width, name.size());
    out += fmt::format("  {:<{}}  {:>12}  {:>12}\n", "parameter", width, "prior", "fitted");
    for (const FittedParameter& p : f.fit.parameters) {
      out += fmt::format("  {:<{}}  {:>12}  {:>12}\n", p.parameter.name, width,
                         value_text(p.parameter.unit, p.start),
                         value_text(p.parameter.unit, p.fitted));
    }
    for (const std::string& name : f.undetermined) {
      out += fmt::format("  {:<{}}  (no training point depends on it: kept at the prior)\n", name,
                         width);
    }
    out += fmt::format("  fit: objective {:.6g} -> {:.6g}, {} evaluations, {}\n",
                       f.fit.objective_before, f.fit.objective_after, f.fit.evaluations,
                       f.fit.converged ? "converged" : "stopped at the evaluation limit");
    if (points) out += format_validation(f.validation);
    out += fmt::format(
        "  held-out geomean |error| {} over {} points; 128 KiB - 32 MiB: {} over {} points; "
        "plateau busbw error {:+.2f}%\n\n",
        percent(f.validation.geomean_abs_error), f.validation.points.size(),
        percent(f.band_geomean), f.band_points, 100.0 * f.validation.plateau_error);
  }
  return out;
}

}  // namespace upsim

#include "topology/fitting/collective_cross_validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "sim/parallel.h"

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
// The second start's raise of latencies without a prior (us).
constexpr double kStartOffsetUs = 100.0;

std::string percent(double v) {
  return fmt::format("{:.2f}%", 100.0 * v);
}

}  // namespace

double held_out_prior_width(std::string_view name) {
  auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (name == "launch_overhead") return 0.5;
  if (has("extra_hop_latency")) return 0.0;
  if (has("base_latency") || has("hop_latency") || has("injection_cap")) return 1.0;
  if (has("efficiency")) return 0.3;
  return 0.0;
}

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

namespace {

/// A fold's training systems, with the prior and the options it is fitted under.
struct FoldTraining {
  std::span<const CollectiveFitSystem* const> train;
  const CollectiveTuning& prior;
  const CrossValidationOptions& options;
  double prior_objective;
};

double objective_at(std::span<const CollectiveFitSystem* const> train, const CollectiveTuning& t) {
  return collective_fit_objective(validate_system_subset(train, t));
}

/// Whether the training objective moves when `name` is scaled around its value in `at`.
bool depends_on(std::span<const CollectiveFitSystem* const> train, const CollectiveTuning& at,
                double at_objective, const std::string& name) {
  const TuningParameter p = tuning_parameter(at, name);
  const double v = tuning_parameter_value(at, p);
  double moved = v * kProbeFactor;
  if (p.unit == TuningParameterUnit::kFraction && moved > 1.0) moved = v / kProbeFactor;
  if (p.unit == TuningParameterUnit::kMicroseconds && v == 0.0) moved = 1.0;
  CollectiveTuning probe = at;
  set_tuning_parameter(probe, p, moved);
  return std::abs(objective_at(train, probe) - at_objective) >
         kFlatRelative * std::abs(at_objective) + kFlatAbsolute;
}

/// With options.use_prior, the prior term of each of `fit_options.parameters`.
void add_prior_terms(CollectiveFitOptions& fit_options, const CollectiveTuning& prior,
                     const CrossValidationOptions& options) {
  if (options.use_prior) {
    for (const std::string& name : fit_options.parameters) {
      fit_options.prior_widths.push_back(held_out_prior_width(name));
      fit_options.prior_centres.push_back(
          tuning_parameter_value(prior, tuning_parameter(prior, name)));
    }
  }
}

/// The fit of one start.
struct FoldRun {
  CollectiveFitResult fit;
  std::vector<std::string> undetermined;
  int evaluations = 0;
  bool any_fit = false;
  double total = 0.0;  // the minimised objective: data + prior term
};

/// Rounds: probe the parameters not yet fitted at the current tuning, fit every parameter
/// found so far from the current tuning, repeat while a round finds new ones (a protocol's
/// cap may matter only once another value has moved).
FoldRun fit_in_rounds(const FoldTraining& f, const CollectiveTuning& start) {
  const CrossValidationOptions& options = f.options;
  FoldRun run;
  CollectiveTuning current = start;
  double current_objective = objective_at(f.train, start);
  std::vector<std::string> pending = options.parameters;
  std::vector<bool> found(options.parameters.size(), false);
  for (int round = 0; round < kProbeRounds; ++round) {
    std::vector<std::string> still;
    bool new_found = false;
    for (const std::string& name : pending) {
      if (depends_on(f.train, current, current_objective, name)) {
        const auto at = std::find(options.parameters.begin(), options.parameters.end(), name);
        found[static_cast<size_t>(at - options.parameters.begin())] = true;
        new_found = true;
      } else {
        still.push_back(name);
      }
    }
    if (!new_found || run.evaluations >= options.max_evaluations) break;
    CollectiveFitOptions fit_options;
    for (size_t i = 0; i < options.parameters.size(); ++i) {
      if (found[i]) fit_options.parameters.push_back(options.parameters[i]);
    }
    fit_options.max_evaluations = options.max_evaluations - run.evaluations;
    add_prior_terms(fit_options, f.prior, options);
    run.fit = fit_collective_tuning_subset(f.train, current, fit_options);
    run.evaluations += run.fit.evaluations;
    current = run.fit.tuning;
    current_objective = run.fit.objective_after;
    pending = std::move(still);
    run.any_fit = true;
  }
  run.undetermined = pending;
  if (!run.any_fit) {
    run.fit.tuning = f.prior;
    run.fit.after = validate_system_subset(f.train, f.prior);
    run.fit.objective_after = f.prior_objective;
    run.fit.converged = true;
  }
  return run;
}

/// What no training point depends on keeps its prior value, whatever the start was. A
/// parameter flat near its start value but not between it and the prior (a latency raised
/// by the second start that keeps a protocol from being chosen) is determined after all:
/// the training points prefer its start value, which it keeps, listed as fitted.
void keep_prior_where_flat(const FoldTraining& f, FoldRun& run) {
  std::vector<std::string> flat;
  for (const std::string& name : run.undetermined) {
    const TuningParameter p = tuning_parameter(f.prior, name);
    const double at_prior = tuning_parameter_value(f.prior, p);
    const double kept = tuning_parameter_value(run.fit.tuning, p);
    CollectiveTuning reset = run.fit.tuning;
    set_tuning_parameter(reset, p, at_prior);
    const double before = objective_at(f.train, run.fit.tuning);
    if (kept == at_prior || std::abs(objective_at(f.train, reset) - before) <=
                                kFlatRelative * std::abs(before) + kFlatAbsolute) {
      run.fit.tuning = std::move(reset);
      flat.push_back(name);
    } else {
      run.fit.parameters.push_back(FittedParameter{p, at_prior, kept});
    }
  }
  run.undetermined = std::move(flat);
}

/// The fit from one start: the rounds, then the prior kept where the training points are flat.
FoldRun run_from(const FoldTraining& f, const CollectiveTuning& start) {
  FoldRun run = fit_in_rounds(f, start);
  keep_prior_where_flat(f, run);
  run.fit.after = validate_system_subset(f.train, run.fit.tuning);
  run.fit.objective_after = collective_fit_objective(run.fit.after);
  run.total = run.fit.objective_after + run.fit.prior_penalty_after;
  return run;
}

/// Two starts: the prior, and the prior with every latency that has no prior width raised by
/// kStartOffsetUs (a network's per-hop latency may be hundreds of microseconds, far from a
/// start of 0 for the simplex's first steps). The run with the lower minimised objective
/// wins; the first on a tie.
FoldRun best_of_two_starts(const FoldTraining& f) {
  FoldRun best = run_from(f, f.prior);
  CollectiveTuning raised = f.prior;
  bool any_raised = false;
  for (const std::string& name : f.options.parameters) {
    const TuningParameter p = tuning_parameter(f.prior, name);
    if (p.unit != TuningParameterUnit::kMicroseconds || held_out_prior_width(name) > 0.0) continue;
    set_tuning_parameter(raised, p, tuning_parameter_value(f.prior, p) + kStartOffsetUs);
    any_raised = true;
  }
  if (any_raised) {
    FoldRun other = run_from(f, raised);
    if (other.total < best.total) best = std::move(other);
  }
  return best;
}

/// The parameters of families with a link in the held-out fabric and in no training fabric.
std::vector<std::string> own_network_parameters(
    const CollectiveFitSystem& held_out, const std::vector<const CollectiveFitSystem*>& training,
    const CollectiveTuning& tuning, const CrossValidationOptions& options) {
  std::vector<std::string> parameters;
  auto families_of = [&](const Fabric& fabric) {
    std::vector<std::string> names;
    for (const FabricLink& link : fabric.links()) {
      const std::string& name = tuning.family_of(link.kind).name;
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    return names;
  };
  std::vector<std::string> own = families_of(held_out.fabric);
  for (const CollectiveFitSystem* t : training) {
    for (const std::string& name : families_of(t->fabric))
      own.erase(std::remove(own.begin(), own.end(), name), own.end());
  }
  for (const std::string& name : options.parameters) {
    for (const std::string& family : own) {
      if (name.rfind("link_families." + family + ".", 0) == 0) parameters.push_back(name);
    }
  }
  return parameters;
}

/// The fold's own-network parameters fitted on the held-out system itself, from the fold's
/// tuning, with the same two starts as best_of_two_starts.
void fit_own_network(const CollectiveFitSystem& held_out, const CollectiveTuning& prior,
                     const CrossValidationOptions& options, HeldOutFold& fold) {
  const CollectiveFitSystem* self[] = {&held_out};
  CollectiveFitOptions own_options;
  own_options.parameters = fold.own_parameters;
  own_options.max_evaluations = options.max_evaluations;
  add_prior_terms(own_options, prior, options);
  CollectiveFitResult a = fit_collective_tuning_subset(self, fold.fit.tuning, own_options);
  CollectiveTuning own_raised = fold.fit.tuning;
  for (const std::string& name : own_options.parameters) {
    const TuningParameter p = tuning_parameter(own_raised, name);
    if (p.unit == TuningParameterUnit::kMicroseconds && held_out_prior_width(name) == 0.0) {
      set_tuning_parameter(own_raised, p, tuning_parameter_value(own_raised, p) + kStartOffsetUs);
    }
  }
  CollectiveFitResult b = fit_collective_tuning_subset(self, own_raised, own_options);
  fold.own_fit =
      b.objective_after + b.prior_penalty_after < a.objective_after + a.prior_penalty_after
          ? std::move(b)
          : std::move(a);
  for (FittedParameter& p : fold.own_fit.parameters)
    p.start = tuning_parameter_value(prior, p.parameter);
  fold.own_validation = fold.own_fit.after.front();
  fold.own_band_geomean =
      band_geomean_abs_error(fold.own_validation, kBandLowBytes, kBandHighBytes, nullptr);
}

/// The fold that holds out systems[h], fitted on the others (see leave_one_system_out).
HeldOutFold held_out_fold(std::span<const CollectiveFitSystem> systems, size_t h,
                          const CollectiveTuning& prior, const CrossValidationOptions& options) {
  std::vector<const CollectiveFitSystem*> training;
  HeldOutFold fold;
  fold.held_out = systems[h].name;
  for (size_t i = 0; i < systems.size(); ++i) {
    if (i == h) continue;
    training.push_back(&systems[i]);
    fold.trained_on.push_back(systems[i].name);
  }
  const std::span<const CollectiveFitSystem* const> train(training);
  const FoldTraining f{train, prior, options, objective_at(train, prior)};
  FoldRun best = best_of_two_starts(f);
  fold.fit = std::move(best.fit);
  fold.undetermined = std::move(best.undetermined);
  fold.fit.before = validate_system_subset(train, prior);
  fold.fit.objective_before = f.prior_objective;
  fold.fit.evaluations = best.evaluations;
  for (FittedParameter& p : fold.fit.parameters) {
    p.start = tuning_parameter_value(prior, p.parameter);
    p.fitted = tuning_parameter_value(fold.fit.tuning, p.parameter);
  }
  fold.validation =
      validate_collective(systems[h].fabric, fold.fit.tuning, systems[h].kind, systems[h].points,
                          systems[h].name, systems[h].harness_overhead);
  fold.band_geomean =
      band_geomean_abs_error(fold.validation, kBandLowBytes, kBandHighBytes, &fold.band_points);
  if (options.fit_own_network) {
    fold.own_parameters = own_network_parameters(systems[h], training, fold.fit.tuning, options);
  }
  if (!fold.own_parameters.empty()) fit_own_network(systems[h], prior, options, fold);
  return fold;
}

}  // namespace

std::vector<HeldOutFold> leave_one_system_out(std::span<const CollectiveFitSystem> systems,
                                              const CollectiveTuning& prior,
                                              const CrossValidationOptions& options) {
  if (systems.size() < 2) {
    throw std::invalid_argument("leave-one-system-out: needs at least two measured systems");
  }
  if (options.parameters.empty()) {
    throw std::invalid_argument("leave-one-system-out: no parameters to fit");
  }
  std::vector<size_t> held_out;
  for (size_t h = 0; h < systems.size(); ++h) {
    if (is_full_sweep(systems[h].points)) held_out.push_back(h);
  }
  if (held_out.empty()) {
    throw std::invalid_argument(
        "leave-one-system-out: no system has a full sweep (<= 64 KiB to >= 256 MiB, 8 points)");
  }
  // Each fold on its own copy of the systems (Fabric::route fills a cache), into its own slot.
  std::vector<std::optional<HeldOutFold>> results(held_out.size());
  parallel_for(held_out.size(), options.threads, [&](size_t i) {
    std::vector<CollectiveFitSystem> own;
    own.reserve(systems.size());
    for (const CollectiveFitSystem& s : systems)
      own.push_back({s.name, s.fabric.clone(), s.kind, s.points, s.harness_overhead});
    results[i] = held_out_fold(own, held_out[i], prior, options);
  });
  std::vector<HeldOutFold> folds;
  for (std::optional<HeldOutFold>& fold : results)
    folds.push_back(std::move(*fold));
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
                         format_tuning_value(p.parameter.unit, p.start),
                         format_tuning_value(p.parameter.unit, p.fitted));
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
        "plateau busbw error {:+.2f}%\n",
        percent(f.validation.geomean_abs_error), f.validation.points.size(),
        percent(f.band_geomean), f.band_points, 100.0 * f.validation.plateau_error);
    if (!f.own_parameters.empty()) {
      out += fmt::format(
          "  PARTLY IN-SAMPLE variant (a new network measured once): the parameters of the link "
          "families only this system has, fitted on its own {} points, every other value as "
          "above:\n",
          f.own_validation.points.size());
      for (const FittedParameter& p : f.own_fit.parameters) {
        out += fmt::format("    {:<{}}  {:>12}  {:>12}\n", p.parameter.name, width - 2,
                           format_tuning_value(p.parameter.unit, p.start),
                           format_tuning_value(p.parameter.unit, p.fitted));
      }
      out += fmt::format("  geomean |error| {} over {} points; 128 KiB - 32 MiB: {}\n",
                         percent(f.own_validation.geomean_abs_error),
                         f.own_validation.points.size(), percent(f.own_band_geomean));
    }
    out += "\n";
  }
  return out;
}

}  // namespace upsim

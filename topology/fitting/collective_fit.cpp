#include "topology/fitting/collective_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <type_traits>

#include "sim/parallel.h"
#include "topology/collectives/collective_planner.h"
#include "topology/flow_network.h"

namespace upsim {
namespace {

// Key names of load_collective_tuning (topology/nccl_tuning.cpp), indexed like LatencyColumn.
constexpr std::array<std::string_view, kLatencyColumnCount> kColumnKeys{"tree", "ring", "nvls"};

/// Points at the number a parameter names, const or not with the tuning.
template <typename Tuning>
struct FieldRef {
  template <typename T>
  using Ptr = std::conditional_t<std::is_const_v<Tuning>, const T*, T*>;
  Ptr<Duration> duration = nullptr;
  Ptr<Bandwidth> bandwidth = nullptr;
  Ptr<double> fraction = nullptr;
};

std::vector<std::string_view> split_dots(std::string_view name) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

template <typename Tuning>
[[noreturn]] void unknown_parameter(Tuning& t, std::string_view name, std::string_view why) {
  std::string families;
  for (const LinkFamily& f : t.families)
    families += (families.empty() ? "" : "|") + f.name;
  throw std::invalid_argument(fmt::format(
      "tuning parameter `{}`: {}; valid: launch_overhead, net_overhead, tree_efficiency, "
      "nvls_efficiency, nvls_tree_efficiency, latency_generation_factors.<link kind>, "
      "protocols.<LL|LL128|Simple>.injection_cap, "
      "protocols.<P>.single_node_injection_caps.<link kind>, "
      "protocols.<P>.base_latency.<tree|ring|nvls>, "
      "protocols.<P>.hop_latency.<nvlink|pci|net>.<tree|ring|nvls>, "
      "link_families.<{}>.efficiency, link_families.<F>.extra_hop_latency.<P>",
      name, why, families));
}

template <typename Tuning>
size_t column_index(Tuning& t, std::string_view name, std::string_view key) {
  for (size_t c = 0; c < kLatencyColumnCount; ++c) {
    if (kColumnKeys[c] == key) return c;
  }
  unknown_parameter(t, name, fmt::format("no latency column `{}`", key));
}

template <typename Tuning>
size_t protocol_index(Tuning& t, std::string_view name, std::string_view key) {
  const auto p = parse_collective_protocol(key);
  if (!p) unknown_parameter(t, name, fmt::format("no protocol `{}`", key));
  return static_cast<size_t>(*p);
}

template <typename Tuning>
FieldRef<Tuning> resolve(Tuning& t, std::string_view name) {
  FieldRef<Tuning> f;
  const std::vector<std::string_view> parts = split_dots(name);
  const size_t n = parts.size();
  if (n == 1) {
    if (name == "launch_overhead") f.duration = &t.launch_overhead;
    if (name == "net_overhead") f.duration = &t.net_overhead;
    if (name == "tree_efficiency") f.fraction = &t.tree_efficiency;
    if (name == "nvls_efficiency") f.fraction = &t.nvls_efficiency;
    if (name == "nvls_tree_efficiency") f.fraction = &t.nvls_tree_efficiency;
  } else if (parts[0] == "protocols" && n >= 3) {
    auto& pt = t.protocols[protocol_index(t, name, parts[1])];
    if (parts[2] == "injection_cap" && n == 3) {
      f.bandwidth = &pt.injection_cap;
    } else if (parts[2] == "single_node_injection_caps" && n == 4) {
      for (auto& [kind, cap] : pt.single_node_injection_caps) {
        if (kind == parts[3]) f.bandwidth = &cap;
      }
      if (!f.bandwidth) {
        unknown_parameter(
            t, name, fmt::format("the tuning has no single-node injection cap `{}`", parts[3]));
      }
    } else if (parts[2] == "base_latency" && n == 4) {
      f.duration = &pt.base_latency[column_index(t, name, parts[3])];
    } else if (parts[2] == "hop_latency" && n == 5) {
      for (size_t k = 0; k < kLinkClassCount; ++k) {
        if (link_class_name(static_cast<LinkClass>(k)) == parts[3]) {
          f.duration = &pt.hop_latency[k][column_index(t, name, parts[4])];
        }
      }
      if (!f.duration) unknown_parameter(t, name, fmt::format("no link class `{}`", parts[3]));
    }
  } else if (parts[0] == "latency_generation_factors" && n == 2) {
    for (auto& [kind, factor] : t.latency_generation_factors) {
      if (kind == parts[1]) f.fraction = &factor;
    }
    if (!f.fraction) {
      unknown_parameter(t, name,
                        fmt::format("the tuning has no latency generation factor `{}`", parts[1]));
    }
  } else if (parts[0] == "link_families" && n >= 3) {
    auto family = std::find_if(t.families.begin(), t.families.end(),
                               [&](const LinkFamily& lf) { return lf.name == parts[1]; });
    if (family == t.families.end()) {
      unknown_parameter(t, name, fmt::format("the tuning has no link family `{}`", parts[1]));
    }
    if (parts[2] == "efficiency" && n == 3) {
      f.fraction = &family->efficiency;
    } else if (parts[2] == "extra_hop_latency" && n == 4) {
      f.duration = &family->extra_hop_latency[protocol_index(t, name, parts[3])];
    }
  }
  if (!f.duration && !f.bandwidth && !f.fraction) unknown_parameter(t, name, "unknown name");
  return f;
}

// Nelder-Mead works on x = ln(v + 1) (us), ln(v) (GB/s, fractions); |x| is kept below kMaxX so
// that every value stays finite and within Duration's range.
constexpr double kMaxX = 25.0;

double to_coordinate(TuningParameterUnit unit, double v) {
  return unit == TuningParameterUnit::kMicroseconds ? std::log(v + 1.0) : std::log(v);
}

double from_coordinate(TuningParameterUnit unit, double x) {
  x = std::clamp(x, -kMaxX, kMaxX);
  switch (unit) {
    case TuningParameterUnit::kMicroseconds:
      return std::max(0.0, std::exp(x) - 1.0);
    case TuningParameterUnit::kGigabytesPerSecond:
      return std::exp(x);
    case TuningParameterUnit::kFraction:
      return std::min(1.0, std::exp(x));
  }
  return 0.0;
}

double round_significant(double v, int digits) {
  if (v == 0.0) return 0.0;
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(std::abs(v))));
  return std::round(v * scale) / scale;
}

struct Vertex {
  std::vector<double> x;
  double f = 0.0;
};

/// Nelder-Mead with a shared evaluation budget (see collective_fit.h for the coefficients and the
/// stopping rule).
class NelderMead {
 public:
  NelderMead(std::function<double(const std::vector<double>&)> objective, int budget)
      : objective_(std::move(objective)), budget_(budget) {}

  /// Minimises from `start` (whose value is `start_f`); the first simplex moves coordinate i by
  /// steps[i]. Returns the best vertex. `converged` tells whether the simplex collapsed before
  /// the budget ran out.
  Vertex minimise(const Vertex& start, const std::vector<double>& steps, bool* converged) {
    const size_t n = start.x.size();
    // Adaptive coefficients (Gao & Han, Comput. Optim. Appl. 51, 2012): the standard ones
    // (2, 1/2, 1/2) for n = 2, gentler as n grows, which keeps the simplex from collapsing
    // early in 10+ dimensions.
    const double dims = static_cast<double>(n);
    const double expansion = 1.0 + 2.0 / dims;
    const double contraction = 0.75 - 0.5 / dims;
    const double shrink = 1.0 - 1.0 / dims;
    std::vector<Vertex> simplex{start};
    for (size_t i = 0; i < n && left(); ++i) {
      Vertex v{start.x, 0.0};
      v.x[i] += steps[i];
      v.f = evaluate(v.x);
      simplex.push_back(std::move(v));
    }
    *converged = false;
    while (simplex.size() == n + 1) {
      std::stable_sort(simplex.begin(), simplex.end(),
                       [](const Vertex& a, const Vertex& b) { return a.f < b.f; });
      if (collapsed(simplex)) {
        *converged = true;
        break;
      }
      if (!left()) break;
      std::vector<double> centroid(n, 0.0);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j)
          centroid[j] += simplex[i].x[j] / static_cast<double>(n);
      }
      Vertex& worst = simplex[n];
      auto along = [&](double t) {
        std::vector<double> x(n);
        for (size_t j = 0; j < n; ++j)
          x[j] = centroid[j] + t * (worst.x[j] - centroid[j]);
        return x;
      };
      Vertex reflected{along(-1.0), 0.0};
      reflected.f = evaluate(reflected.x);
      if (reflected.f < simplex[0].f) {
        if (!left()) {
          worst = std::move(reflected);
          continue;
        }
        Vertex expanded{along(-expansion), 0.0};
        expanded.f = evaluate(expanded.x);
        worst = expanded.f < reflected.f ? std::move(expanded) : std::move(reflected);
      } else if (reflected.f < simplex[n - 1].f) {
        worst = std::move(reflected);
      } else {
        if (!left()) break;
        const bool outside = reflected.f < worst.f;
        Vertex contracted{along(outside ? -contraction : contraction), 0.0};
        contracted.f = evaluate(contracted.x);
        if (outside ? contracted.f <= reflected.f : contracted.f < worst.f) {
          worst = std::move(contracted);
        } else {
          for (size_t i = 1; i <= n && left(); ++i) {
            for (size_t j = 0; j < n; ++j)
              simplex[i].x[j] = simplex[0].x[j] + shrink * (simplex[i].x[j] - simplex[0].x[j]);
            simplex[i].f = evaluate(simplex[i].x);
          }
        }
      }
    }
    return *std::min_element(simplex.begin(), simplex.end(),
                             [](const Vertex& a, const Vertex& b) { return a.f < b.f; });
  }

  double evaluate(const std::vector<double>& x) {
    ++used_;
    return objective_(x);
  }
  bool left() const { return used_ < budget_; }
  int used() const { return used_; }

 private:
  static bool collapsed(const std::vector<Vertex>& sorted) {
    const double best = sorted.front().f;
    if (sorted.back().f - best > 1e-9 * std::abs(best) + 1e-15) return false;
    for (const Vertex& v : sorted) {
      for (size_t j = 0; j < v.x.size(); ++j) {
        if (std::abs(v.x[j] - sorted.front().x[j]) > 1e-5) return false;
      }
    }
    return true;
  }

  std::function<double(const std::vector<double>&)> objective_;
  int budget_;
  int used_ = 0;
};

std::string percent(double v) {
  return fmt::format("{:.2f}%", 100.0 * v);
}

}  // namespace

std::string_view tuning_parameter_unit_name(TuningParameterUnit unit) {
  switch (unit) {
    case TuningParameterUnit::kMicroseconds:
      return "us";
    case TuningParameterUnit::kGigabytesPerSecond:
      return "GB/s";
    case TuningParameterUnit::kFraction:
      return "fraction";
  }
  return "?";
}

std::string format_tuning_value(TuningParameterUnit unit, double v) {
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

TuningParameter tuning_parameter(const CollectiveTuning& tuning, std::string_view name) {
  const FieldRef<const CollectiveTuning> f = resolve(tuning, name);
  TuningParameter p;
  p.name = std::string(name);
  p.unit = f.duration    ? TuningParameterUnit::kMicroseconds
           : f.bandwidth ? TuningParameterUnit::kGigabytesPerSecond
                         : TuningParameterUnit::kFraction;
  return p;
}

double tuning_parameter_value(const CollectiveTuning& tuning, const TuningParameter& parameter) {
  const FieldRef<const CollectiveTuning> f = resolve(tuning, parameter.name);
  if (f.duration) return f.duration->us();
  if (f.bandwidth) return f.bandwidth->gigabytes_per_second();
  return *f.fraction;
}

void set_tuning_parameter(CollectiveTuning& tuning, const TuningParameter& parameter,
                          double value) {
  const FieldRef<CollectiveTuning> f = resolve(tuning, parameter.name);
  if (f.duration) *f.duration = Duration::from_us_f(value);
  if (f.bandwidth) *f.bandwidth = Bandwidth::gigabytes_per_second(value);
  if (f.fraction) *f.fraction = value;
}

double collective_point_loss(double predicted_us, double measured_us) {
  const double r = std::abs(std::log(predicted_us / measured_us));
  return r <= kCollectiveLossKnee
             ? r * r
             : 2.0 * kCollectiveLossKnee * r - kCollectiveLossKnee * kCollectiveLossKnee;
}

double collective_fit_objective(std::span<const CollectiveValidation> validations) {
  double sum = 0.0;
  for (const CollectiveValidation& v : validations) {
    if (v.points.empty()) continue;
    double losses = 0.0;
    for (const CollectivePoint& p : v.points)
      losses += collective_point_loss(p.predicted_us, p.measured_us);
    sum += losses / static_cast<double>(v.points.size());
  }
  return sum;
}

namespace {
std::vector<const CollectiveFitSystem*> pointers(std::span<const CollectiveFitSystem> systems) {
  std::vector<const CollectiveFitSystem*> out;
  out.reserve(systems.size());
  for (const CollectiveFitSystem& s : systems)
    out.push_back(&s);
  return out;
}
}  // namespace

std::vector<CollectiveValidation> validate_systems(std::span<const CollectiveFitSystem> systems,
                                                   const CollectiveTuning& tuning,
                                                   unsigned threads) {
  return validate_system_subset(pointers(systems), tuning, threads);
}

std::vector<CollectiveValidation> validate_system_subset(
    std::span<const CollectiveFitSystem* const> systems, const CollectiveTuning& tuning,
    unsigned threads) {
  std::vector<CollectiveValidation> out(systems.size());
  parallel_for(systems.size(), threads, [&](size_t i) {
    const CollectiveFitSystem& s = *systems[i];
    out[i] = validate_collective(s.fabric, tuning, s.kind, s.points, s.name, s.harness_overhead);
  });
  return out;
}

std::vector<std::string> default_fit_parameters(std::span<const CollectiveFitSystem> systems,
                                                const CollectiveTuning& tuning) {
  constexpr int64_t kSmall = 64 * 1024;
  // Links within 10% of the busiest one's transfer time count as bottlenecks.
  constexpr double kBottleneck = 0.9;
  std::vector<bool> bottleneck(tuning.families.size(), false);
  bool small = false;
  for (const CollectiveFitSystem& s : systems) {
    if (s.points.empty()) continue;
    int64_t largest = 0;
    for (const MeasuredCollective& m : s.points) {
      largest = std::max(largest, m.bytes);
      small = small || m.bytes <= kSmall;
    }
    FlowNetwork network(s.fabric, tuning, Bandwidth::gigabytes_per_second(1000.0));
    const auto ranks = static_cast<uint32_t>(s.fabric.gpus().size());
    const CollectivePlan plan =
        network.planner().plan(nccl_tests_collective_desc(s.kind, ranks, largest));
    // Seconds each fabric link needs for the bytes of the planned flows; virtual links
    // (injection caps, device memory) have ids from fabric.links().size() on and are skipped.
    const FlowBatch& flows = plan.flows;
    std::vector<double> seconds(s.fabric.links().size(), 0.0);
    for (size_t f = 0; f < flows.size(); ++f) {
      for (uint32_t i = flows.offsets[f]; i < flows.offsets[f + 1]; ++i) {
        const uint32_t link = flows.links[i];
        if (link < seconds.size()) {
          seconds[link] += flows.bytes[f] / network.link_capacity(link).bytes_per_second();
        }
      }
    }
    if (seconds.empty()) continue;
    const double slowest = *std::max_element(seconds.begin(), seconds.end());
    for (LinkId link = 0; link < seconds.size(); ++link) {
      if (slowest <= 0.0 || seconds[link] < kBottleneck * slowest) continue;
      const LinkFamily& family = tuning.family_of(s.fabric.link(link).kind);
      bottleneck[static_cast<size_t>(&family - tuning.families.data())] = true;
    }
  }
  std::vector<std::string> out;
  if (small) out.emplace_back("launch_overhead");
  for (size_t i = 0; i < tuning.families.size(); ++i) {
    if (bottleneck[i])
      out.push_back(fmt::format("link_families.{}.efficiency", tuning.families[i].name));
  }
  return out;
}

CollectiveFitResult fit_collective_tuning(std::span<const CollectiveFitSystem> systems,
                                          const CollectiveTuning& start,
                                          const CollectiveFitOptions& options) {
  return fit_collective_tuning_subset(pointers(systems), start, options);
}

CollectiveFitResult fit_collective_tuning_subset(
    std::span<const CollectiveFitSystem* const> systems, const CollectiveTuning& start,
    const CollectiveFitOptions& options) {
  if (systems.empty()) throw std::invalid_argument("collective fit: no measured systems");
  for (const CollectiveFitSystem* s : systems) {
    if (s == nullptr) throw std::invalid_argument("collective fit: null system");
    if (s->points.empty()) {
      throw std::invalid_argument(
          fmt::format("collective fit: system `{}` has no points", s->name));
    }
  }
  if (options.parameters.empty()) throw std::invalid_argument("collective fit: no parameters");
  if (options.max_evaluations < 1) {
    throw std::invalid_argument("collective fit: max_evaluations must be at least 1");
  }
  CollectiveFitResult r;
  Vertex origin;
  for (const std::string& name : options.parameters) {
    for (const FittedParameter& seen : r.parameters) {
      if (seen.parameter.name == name) {
        throw std::invalid_argument(
            fmt::format("collective fit: parameter `{}` given twice", name));
      }
    }
    FittedParameter p;
    p.parameter = tuning_parameter(start, name);
    p.start = tuning_parameter_value(start, p.parameter);
    if (p.parameter.unit != TuningParameterUnit::kMicroseconds && !(p.start > 0.0)) {
      throw std::invalid_argument(fmt::format(
          "collective fit: `{}` starts at 0 (no cap); give it a positive start value in the "
          "start tuning",
          name));
    }
    origin.x.push_back(to_coordinate(p.parameter.unit, p.start));
    r.parameters.push_back(std::move(p));
  }
  auto tuning_at = [&](const std::vector<double>& x) {
    CollectiveTuning t = start;
    for (size_t i = 0; i < x.size(); ++i) {
      const TuningParameter& p = r.parameters[i].parameter;
      set_tuning_parameter(t, p, from_coordinate(p.unit, x[i]));
    }
    return t;
  };
  if (!options.prior_widths.empty() && options.prior_widths.size() != r.parameters.size()) {
    throw std::invalid_argument(fmt::format("collective fit: {} prior widths for {} parameters",
                                            options.prior_widths.size(), r.parameters.size()));
  }
  if (!options.prior_centres.empty() && options.prior_centres.size() != r.parameters.size()) {
    throw std::invalid_argument(fmt::format("collective fit: {} prior centres for {} parameters",
                                            options.prior_centres.size(), r.parameters.size()));
  }
  std::vector<double> centre = origin.x;
  for (size_t i = 0; i < options.prior_centres.size(); ++i)
    centre[i] = to_coordinate(r.parameters[i].parameter.unit, options.prior_centres[i]);
  auto penalty = [&](const std::vector<double>& x) {
    double sum = 0.0;
    for (size_t i = 0; i < options.prior_widths.size(); ++i) {
      const double w = options.prior_widths[i];
      if (!(w > 0.0)) continue;
      const double z = (std::clamp(x[i], -kMaxX, kMaxX) - centre[i]) / w;
      sum += z * z;
    }
    return options.prior_noise * options.prior_noise * sum;
  };
  NelderMead nm(
      [&](const std::vector<double>& x) {
        return collective_fit_objective(
                   validate_system_subset(systems, tuning_at(x), options.threads)) +
               penalty(x);
      },
      options.max_evaluations);

  r.before = validate_system_subset(systems, start, options.threads);
  r.objective_before = collective_fit_objective(r.before);
  origin.f = r.objective_before + penalty(origin.x);
  constexpr double kStep = 0.3;
  constexpr int kRestarts = 10;
  Vertex best = origin;
  for (int round = 0; round <= kRestarts && nm.left(); ++round) {
    // Every x >= 0 of a fraction is its cap of 1: start such a coordinate at 0 and step it
    // downwards, where the objective can change (a step up, or from further up, changes nothing).
    std::vector<double> steps(best.x.size(), kStep);
    for (size_t i = 0; i < steps.size(); ++i) {
      if (r.parameters[i].parameter.unit == TuningParameterUnit::kFraction && best.x[i] >= 0.0) {
        best.x[i] = 0.0;
        steps[i] = -kStep;
      }
    }
    bool converged = false;
    const Vertex found = nm.minimise(best, steps, &converged);
    const bool improved = best.f - found.f > 1e-9 * std::abs(best.f);
    if (found.f < best.f) best = found;
    r.converged = converged;
    if (!converged || !improved) break;
  }
  r.evaluations = nm.used();

  CollectiveTuning fitted = start;
  std::vector<double> rounded(r.parameters.size());
  for (size_t i = 0; i < r.parameters.size(); ++i) {
    FittedParameter& p = r.parameters[i];
    double v = round_significant(from_coordinate(p.parameter.unit, best.x[i]), 4);
    if (p.parameter.unit == TuningParameterUnit::kFraction) v = std::min(v, 1.0);
    p.fitted = v;
    rounded[i] = to_coordinate(p.parameter.unit, v);
    set_tuning_parameter(fitted, p.parameter, v);
  }
  r.after = validate_system_subset(systems, fitted, options.threads);
  r.objective_after = collective_fit_objective(r.after);
  r.prior_penalty_after = penalty(rounded);
  if (r.objective_after + r.prior_penalty_after > r.objective_before + penalty(origin.x)) {
    r.prior_penalty_after = penalty(origin.x);
    for (FittedParameter& p : r.parameters)
      p.fitted = p.start;
    fitted = start;
    r.after = r.before;
    r.objective_after = r.objective_before;
  }
  r.tuning = std::move(fitted);
  return r;
}

std::string format_fit_report(const CollectiveFitResult& r) {
  size_t width = 6;
  for (const CollectiveValidation& v : r.before)
    width = std::max(width, v.system.size());
  std::string out =
      "fit error per system (e = predicted / measured - 1; plateau: busbw error at the largest "
      "size)\n";
  out += fmt::format("{:<{}}  {:<14} {:>5} {:>6}  {:>17}  {:>17}  {:>17}\n", "", width, "", "", "",
                     "geomean |e|", "plateau busbw e", "max |e|");
  out += fmt::format("{:<{}}  {:<14} {:>5} {:>6}  {:>8} {:>8}  {:>8} {:>8}  {:>8} {:>8}\n",
                     "system", width, "collective", "ranks", "points", "before", "after", "before",
                     "after", "before", "after");
  for (size_t i = 0; i < r.before.size(); ++i) {
    const CollectiveValidation& b = r.before[i];
    const CollectiveValidation& a = r.after[i];
    out += fmt::format(
        "{:<{}}  {:<14} {:>5} {:>6}  {:>8} {:>8}  {:>+7.2f}% {:>+7.2f}%  {:>8} {:>8}\n", b.system,
        width, collective_kind_name(b.kind), b.ranks, b.points.size(), percent(b.geomean_abs_error),
        percent(a.geomean_abs_error), 100.0 * b.plateau_error, 100.0 * a.plateau_error,
        percent(b.max_abs_error), percent(a.max_abs_error));
  }
  for (const CollectiveValidation& v : r.before) {
    if (v.harness_overhead > Duration::zero()) {
      out += fmt::format("{}: predicted times include a harness overhead of {:.4g} us per call\n",
                         v.system, v.harness_overhead.us());
    }
  }
  size_t name_width = 9;
  for (const FittedParameter& p : r.parameters)
    name_width = std::max(name_width, p.parameter.name.size());
  out += fmt::format("{:<{}}  {:>14}  {:>14}\n", "parameter", name_width, "start", "fitted");
  for (const FittedParameter& p : r.parameters) {
    out += fmt::format("{:<{}}  {:>14}  {:>14}\n", p.parameter.name, name_width,
                       format_tuning_value(p.parameter.unit, p.start),
                       format_tuning_value(p.parameter.unit, p.fitted));
  }
  out += fmt::format(
      "objective (sum over systems of mean Huber loss of ln(predicted / measured)): {:.6g} -> "
      "{:.6g} ({} "
      "evaluations, {})\n",
      r.objective_before, r.objective_after, r.evaluations,
      r.converged ? "converged" : "stopped at the evaluation limit");
  return out;
}

std::string fit_file_header(const CollectiveFitResult& r, std::string_view start_name) {
  std::string out =
      "NCCL-like collective tuning written by `upsim calibrate collectives`\n"
      "(schema: topology/nccl_tuning.h; method: topology/fitting/collective_fit.h).\n";
  out += fmt::format("Start: {}.\nEvery value not listed below is the start's.\n", start_name);
  out += fmt::format("Fitted by Nelder-Mead ({} evaluations, {}):\n", r.evaluations,
                     r.converged ? "converged" : "stopped at the evaluation limit");
  for (const FittedParameter& p : r.parameters) {
    out += fmt::format("  {}: {} -> {}\n", p.parameter.name,
                       format_tuning_value(p.parameter.unit, p.start),
                       format_tuning_value(p.parameter.unit, p.fitted));
  }
  out += "on the measured systems (collective, ranks, points; geomean |e| before -> after):\n";
  for (size_t i = 0; i < r.before.size(); ++i) {
    const CollectiveValidation& b = r.before[i];
    out += fmt::format("  {}: {}, {} ranks, {} points; {} -> {}\n", b.system,
                       collective_kind_name(b.kind), b.ranks, b.points.size(),
                       percent(b.geomean_abs_error), percent(r.after[i].geomean_abs_error));
    if (b.harness_overhead > Duration::zero()) {
      out += fmt::format("    (measured through a harness adding {:.4g} us per call)\n",
                         b.harness_overhead.us());
    }
  }
  out += fmt::format(
      "Objective (sum over systems of mean Huber loss of ln(predicted / measured)):\n  {:.6g} -> "
      "{:.6g}\n",
      r.objective_before, r.objective_after);
  return out;
}

}  // namespace upsim

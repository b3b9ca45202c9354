#include "tools/steady_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <utility>

#include "sim/engine.h"

namespace upsim::cli {

namespace {

RankId find_root(std::vector<RankId>& parent, RankId r) {
  while (parent[r] != r) {
    parent[r] = parent[parent[r]];
    r = parent[r];
  }
  return r;
}

std::string percent(double fraction) {
  // Two significant digits, without an exponent up to 100%.
  return fraction >= 0.1 ? fmt::format("{:.0f}%", 100.0 * fraction)
                         : fmt::format("{:.2g}%", 100.0 * fraction);
}

/// (max - min) / max, 0 when max is 0.
double relative_spread(Duration lo, Duration hi) {
  if (hi <= Duration::zero()) return 0.0;
  return static_cast<double>((hi - lo).ps()) / static_cast<double>(hi.ps());
}

/// Why iterations differ by design: "alternate by design (period 2)", "repeat by design every 16
/// iterations (period 16)".
std::string period_words(uint32_t period) {
  return period == 2
             ? std::string("alternate by design (period 2)")
             : fmt::format("repeat by design every {} iterations (period {})", period, period);
}

/// The same, short: "iterations alternate: period 2", "iterations repeat: period 16".
std::string short_period_words(uint32_t period) {
  return fmt::format("iterations {}: period {}", period == 2 ? "alternate" : "repeat", period);
}

/// The most iterations the search simulates for a workload of iteration period `period`:
/// kMaxChosenIterations, or two periods when that is more, up to kMaxPeriodicIterations.
uint32_t chosen_iteration_limit(uint32_t period) {
  return std::max(kMaxChosenIterations, std::min(2 * period, kMaxPeriodicIterations));
}

/// "two", "three", ... for small counts, else the number.
std::string count_words(uint32_t n) {
  static constexpr const char* kWords[] = {"zero", "one", "two",   "three", "four",
                                           "five", "six", "seven", "eight", "nine"};
  return n < 10 ? std::string(kWords[n]) : fmt::format("{}", n);
}

/// "iterations 3..4" or "iteration 3" (1-based).
std::string iteration_range(uint32_t first, uint32_t last) {
  return first == last ? fmt::format("iteration {}", first)
                       : fmt::format("iterations {}..{}", first, last);
}

/// The steady-state line of the summary and, when the run is not in steady state, its warning.
std::pair<std::string, std::string> describe(const Scenario& s, const SteadyStateCheck& check,
                                             uint32_t measured) {
  const std::string tolerance = percent(kSteadyStateTolerance);
  const uint32_t first = s.warmup_iterations + 1;
  const uint32_t last = s.warmup_iterations + measured;
  const std::string measured_text = iteration_range(first, last);
  const std::string largest =
      check.where.empty()
          ? "no difference"
          : fmt::format("largest difference {}: {}", percent(check.difference), check.where);
  if (check.steady && s.iteration_period >= 2 && measured == s.iteration_period) {
    return {fmt::format("steady state{}: {} take what the {} before took, within {} on every "
                        "rank, and the ranks agree ({}; iterations {})",
                        s.iterations_chosen ? fmt::format(" after {} iterations (warm-up {})",
                                                          s.iterations, s.warmup_iterations)
                                            : std::string(),
                        measured_text, count_words(s.iteration_period), tolerance, largest,
                        period_words(s.iteration_period)),
            ""};
  }
  if (check.steady) {
    if (s.iterations_chosen) {
      return {fmt::format("steady state after {} iterations (warm-up {}): {} agree within {} on "
                          "every rank and across ranks ({})",
                          s.iterations, s.warmup_iterations, measured_text, tolerance, largest),
              ""};
    }
    if (measured == 1) {
      return {fmt::format("steady state: not checked over iterations, 1 measured (simulation."
                          "iterations: {}); the ranks agree within {} ({})",
                          s.iterations, tolerance, largest),
              ""};
    }
    return {fmt::format("steady state: {} (simulation.iterations: {}) agree within {} on every "
                        "rank and across ranks ({})",
                        measured_text, s.iterations, tolerance, largest),
            ""};
  }
  const std::string apart =
      fmt::format("{} ({} apart, more than {})", check.where, percent(check.difference), tolerance);
  if (s.iterations_chosen) {
    return {fmt::format("steady state: not reached in {} iterations (warm-up {})", s.iterations,
                        s.warmup_iterations),
            fmt::format("no steady state after {} iterations, the most upsim simulates without "
                        "simulation.iterations: {}; the prediction is the mean of {}; set "
                        "simulation.iterations to simulate longer",
                        s.iterations, apart, measured_text)};
  }
  return {fmt::format("steady state: not reached (measured {} of {}, simulation.iterations: {})",
                      measured_text, s.iterations, s.iterations),
          fmt::format("{} are not in steady state: {}; simulation.iterations: {} asks for exactly "
                      "these, a transient; without it upsim simulates until the iteration time "
                      "converges",
                      measured_text, apart, s.iterations)};
}

}  // namespace

std::vector<RankId> coupled_rank_groups(const TaskGraph& graph) {
  std::vector<RankId> parent(graph.rank_count());
  std::iota(parent.begin(), parent.end(), RankId{0});
  // The first member rank seen of each collective group, to join the others to.
  constexpr RankId kUnseen = std::numeric_limits<RankId>::max();
  std::vector<RankId> first(graph.collective_count(), kUnseen);
  for (TaskId t = 0; t < graph.task_count(); ++t) {
    const Task& task = graph.task(t);
    if (task.kind != TaskKind::kCollective) continue;
    const CollectiveId c = graph.collective_of(t);
    if (first[c] == kUnseen) {
      first[c] = task.rank;
      continue;
    }
    const RankId a = find_root(parent, first[c]);
    const RankId b = find_root(parent, task.rank);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  std::vector<RankId> group(parent.size());
  for (RankId r = 0; r < parent.size(); ++r)
    group[r] = find_root(parent, r);
  return group;
}

SteadyStateCheck check_steady_state(const RunSummary& summary,
                                    const std::vector<RankId>& group_of_rank, double tolerance,
                                    uint32_t period) {
  SteadyStateCheck out;
  const auto note = [&](double difference, std::string where) {
    if (difference > out.difference) {
      out.difference = difference;
      out.where = std::move(where);
    }
  };
  // Per rank: its measured iterations, or with a period P its last P against the P before.
  for (const RankBreakdown& r : summary.ranks) {
    const size_t first = summary.warmup_iterations;
    const size_t last = std::min<size_t>(first + r.measured_iterations, r.iteration_times.size());
    if (period >= 2) {
      const std::string why = period_words(period);
      if (last < 2 * size_t{period}) {
        note(1.0, fmt::format("{}: its iterations {}, and fewer than {} cannot show a period "
                              "repeating",
                              r.name, why, 2 * period));
        continue;
      }
      const std::vector<Duration>& t = r.iteration_times;
      Duration before;
      Duration latest;
      for (size_t i = 0; i < period; ++i) {
        before += t[last - 2 * period + i];
        latest += t[last - period + i];
      }
      note(relative_spread(std::min(before, latest), std::max(before, latest)),
           fmt::format("{}: iterations {}..{} take {:.4f} ms, iterations {}..{} {:.4f} ms "
                       "({})",
                       r.name, last - 2 * period + 1, last - period, before.ms(), last - period + 1,
                       last, latest.ms(), short_period_words(period)));
      continue;
    }
    if (last <= first + 1) continue;
    const auto [lo, hi] =
        std::minmax_element(r.iteration_times.begin() + static_cast<std::ptrdiff_t>(first),
                            r.iteration_times.begin() + static_cast<std::ptrdiff_t>(last));
    note(relative_spread(*lo, *hi),
         fmt::format(
             "{}: {:.4f} to {:.4f} ms over {}", r.name, lo->ms(), hi->ms(),
             iteration_range(static_cast<uint32_t>(first + 1), static_cast<uint32_t>(last))));
  }
  // Per coupled group: the ranks' mean iteration times.
  struct Extremes {
    size_t fastest;
    size_t slowest;
  };
  std::vector<std::pair<RankId, Extremes>> groups;  // few groups: a linear search is enough
  for (size_t i = 0; i < summary.ranks.size() && i < group_of_rank.size(); ++i) {
    const RankId g = group_of_rank[i];
    auto it =
        std::find_if(groups.begin(), groups.end(), [g](const auto& e) { return e.first == g; });
    if (it == groups.end()) {
      groups.push_back({g, {i, i}});
      continue;
    }
    const Duration t = summary.ranks[i].iteration_time;
    if (t < summary.ranks[it->second.fastest].iteration_time) it->second.fastest = i;
    if (t > summary.ranks[it->second.slowest].iteration_time) it->second.slowest = i;
  }
  for (const auto& [g, e] : groups) {
    const RankBreakdown& fast = summary.ranks[e.fastest];
    const RankBreakdown& slow = summary.ranks[e.slowest];
    note(relative_spread(fast.iteration_time, slow.iteration_time),
         fmt::format("{} takes {:.4f} ms per iteration, {} {:.4f} ms", fast.name,
                     fast.iteration_time.ms(), slow.name, slow.iteration_time.ms()));
  }
  out.steady = out.difference <= tolerance;
  return out;
}

SteadyRun run_to_steady_state(ConfigDocument& doc, const AttachObservers& attach,
                              const ScenarioLimits& limits) {
  return run_to_steady_state(doc, attach, default_workload_registry(), limits);
}

SteadyRun run_to_steady_state(ConfigDocument& doc, const AttachObservers& attach,
                              const WorkloadRegistry& workloads, const ScenarioLimits& limits) {
  SteadyRun out;
  const auto start = std::chrono::steady_clock::now();
  uint32_t iterations = kFirstChosenIterations;
  // The workload's iteration period, learnt from the first attempt: later attempts measure one
  // whole period and run at least two.
  uint32_t period = 1;
  for (;;) {
    out.scenario = Scenario{};  // the previous attempt's graph goes before the next is built
    out.scenario =
        build_scenario(doc, workloads, ChosenIterations{iterations, std::max(2U, period)}, limits);
    const Scenario& s = out.scenario;
    out.attempts.push_back(s.iterations);
    Engine engine;
    GraphExecutor executor(engine, s.graph, s.models.set);
    RunSummaryObserver summary_observer(s.warmup_iterations, s.measured_iterations);
    executor.add_observer(&summary_observer);
    if (attach) attach(s, executor);
    out.stats = executor.run();
    out.summary = summary_observer.summary();
    if (!s.simulates_iterations) break;  // measured iterations: nothing to converge
    out.check = check_steady_state(out.summary, coupled_rank_groups(s.graph), kSteadyStateTolerance,
                                   s.iteration_period);
    if (!s.iterations_chosen) break;
    const uint32_t limit = chosen_iteration_limit(s.iteration_period);
    if (s.iteration_period > period && s.iteration_period > 2) {
      // A longer period than this attempt measured: measure a whole one, over two at least.
      period = s.iteration_period;
      iterations = std::min(std::max(2 * iterations, 2 * period), limit);
      continue;
    }
    period = std::max(period, s.iteration_period);
    if (out.check.steady || iterations >= limit) break;
    iterations = std::min(2 * iterations, limit);
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Scenario& s = out.scenario;
  if (s.simulates_iterations) {
    const uint32_t measured =
        out.summary.ranks.empty() ? 0 : out.summary.ranks.front().measured_iterations;
    auto [line, warning] = describe(s, out.check, measured);
    s.header += line + "\n";
    if (!warning.empty()) s.warnings.push_back(std::move(warning));
    if (!s.iterations_chosen && s.iteration_period > 1 && measured % s.iteration_period != 0) {
      s.warnings.push_back(fmt::format(
          "this workload's iterations {}, but the {} measured iteration{} are no whole number of "
          "periods, so their mean is not the training's; set simulation.iterations and "
          "simulation.warmup_iterations so that a multiple of {} is measured (or leave "
          "simulation.iterations out: the steady-state search measures a whole period)",
          period_words(s.iteration_period), measured, measured == 1 ? "" : "s",
          s.iteration_period));
    }
  }
  s.description = s.header;
  for (const std::string& w : s.warnings)
    s.description += "warning: " + w + "\n";
  return out;
}

std::vector<std::string> run_warnings(const std::vector<std::string>& scenario_warnings,
                                      const RunStats& stats) {
  std::vector<std::string> warnings = scenario_warnings;
  if (const uint64_t early = stats.stream_waits_before_record; early > 0) {
    const bool one = early == 1;
    warnings.push_back(fmt::format(
        "{} stream wait{} (cudaStreamWaitEvent) reached the GPU before the event {} waited for "
        "was recorded, so {} for nothing, as CUDA does; the re-priced host time reordered "
        "launches that the measured run made in the other order",
        early, one ? "" : "s", one ? "it" : "they", one ? "it waited" : "they waited"));
  }
  return warnings;
}

}  // namespace upsim::cli

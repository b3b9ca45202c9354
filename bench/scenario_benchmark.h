// One simulated scenario as a benchmark body: what `upsim run` does minus writing outputs (load
// the scenario with its overrides, build models and task graph, run with the run summary
// observer, format the summary), with the counters every scenario benchmark reports: tasks,
// events, events per task (hardware-independent, comparable with engine_bench's), events per second
// of the simulation proper, build_s (load + graph + models), run_s, predicted_ms and peak_rss_mb
// (getrusage ru_maxrss of the process so far: a high-water mark, so run one size per process to
// read it per size); over a fabric also the flow network's flows, max-min recomputations and
// flows repriced by them (of the last iteration).
#pragma once

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "tools/scenario.h"
#include "topology/flow_network.h"

namespace upsim::bench {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

inline void run_scenario(benchmark::State& state, const std::filesystem::path& scenario_file,
                         const std::vector<std::string>& overrides) {
  uint64_t tasks = 0;
  uint64_t events = 0;
  double build_s = 0.0;
  double run_s = 0.0;
  double predicted_ms = 0.0;
  FlowNetworkStats network;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    ConfigDocument doc = ConfigDocument::load_file(scenario_file);
    for (const std::string& assignment : overrides)
      doc.apply_override(assignment);
    const cli::Scenario scenario = cli::build_scenario(doc);
    build_s += seconds_since(start);

    const auto run_start = std::chrono::steady_clock::now();
    Engine engine;
    GraphExecutor executor(engine, scenario.graph, scenario.models.set);
    RunSummaryObserver summary_observer(scenario.warmup_iterations, scenario.measured_iterations);
    executor.add_observer(&summary_observer);
    const RunStats stats = executor.run();
    run_s += seconds_since(run_start);
    const RunSummary summary = summary_observer.summary();
    const std::string text = scenario.description + format_run_summary(summary);
    benchmark::DoNotOptimize(text.data());
    tasks = stats.tasks_done;
    if (const auto* flows = dynamic_cast<const FlowNetwork*>(scenario.models.set.network)) {
      network = flows->stats();
    }
    events += stats.events;
    predicted_ms = summary.predicted_iteration_time.ms();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["events"] = static_cast<double>(events) / n;
  state.counters["events_per_task"] =
      tasks > 0 ? static_cast<double>(events) / n / static_cast<double>(tasks) : 0.0;
  state.counters["events_per_s"] = run_s > 0 ? static_cast<double>(events) / run_s : 0.0;
  state.counters["build_s"] = build_s / n;
  state.counters["run_s"] = run_s / n;
  state.counters["predicted_ms"] = predicted_ms;
  state.counters["peak_rss_mb"] = peak_rss_mb();
  if (network.flows_started > 0) {
    state.counters["flows"] = static_cast<double>(network.flows_started);
    state.counters["rate_recomputations"] = static_cast<double>(network.recomputations);
    state.counters["flows_repriced"] = static_cast<double>(network.flows_repriced);
    state.counters["links_checked"] = static_cast<double>(network.links_checked);
    state.counters["component_fallbacks"] = static_cast<double>(network.component_fallbacks);
  }
}

/// Registers `fn` as a one-iteration, real-time scenario benchmark named `name` when the
/// environment variable `env` is set (opt-in sizes too slow or large for a default run).
inline void register_opt_in(const char* env, const char* name, void (*fn)(benchmark::State&)) {
  if (std::getenv(env) == nullptr) return;
  benchmark::RegisterBenchmark(name, fn)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
}

/// The body of a scenario benchmark program's main(), after its opt-in registrations.
inline int run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace upsim::bench

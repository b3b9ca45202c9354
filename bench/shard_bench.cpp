// `upsim shard` on configs/dlrm_4gpu.yaml (48 tables, 4x A100 40GB over NVLink3): the whole
// ranking as the command does it, minus printing and writing the plan file: for each of the 8
// sharders, load the scenario, build it and run it to steady state (2, 4, 8 iterations), then
// place its tables once more for the memory columns, and sort. Acceptance: under 2 s.
//
// Counters: sharders (ranked), fitting (plans that fit), best_ms (the best predicted iteration
// time, 3.3502 ms: norm_lookup_greedy), jobs.
//
// Run: build/bench/shard_bench
// Measured (Release, GCC 12, one core of a shared 2-core VM, --jobs 1): 35 ms wall and CPU for
// the whole ranking (8 sharders, all fit, best 3.3502 ms): about 4 ms per sharder's
// steady-state search, 57x inside the 2 s acceptance bound.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "tools/shard_command.h"

namespace upsim {
namespace {

void BM_Shard_Dlrm4Gpu(benchmark::State& state) {
  cli::ShardOptions options;
  options.scenario = (std::filesystem::path(UPSIM_CONFIGS_DIR) / "dlrm_4gpu.yaml").string();
  options.jobs = static_cast<int>(state.range(0));
  size_t sharders = 0;
  size_t fitting = 0;
  double best_ms = 0.0;
  for (auto _ : state) {
    const cli::ShardRanking ranking = cli::rank_sharders(options);
    sharders = ranking.plans.size();
    fitting = 0;
    for (const cli::ShardedPlan& p : ranking.plans)
      fitting += p.fits ? 1 : 0;
    best_ms = ranking.plans.front().iteration_time.ms();
    benchmark::DoNotOptimize(ranking.plans.data());
  }
  state.counters["sharders"] = static_cast<double>(sharders);
  state.counters["fitting"] = static_cast<double>(fitting);
  state.counters["best_ms"] = best_ms;
  state.counters["jobs"] = static_cast<double>(options.jobs);
}

BENCHMARK(BM_Shard_Dlrm4Gpu)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();

// `upsim shard` as the command does it, minus printing and writing the plan file:
//  - BM_Shard_Dlrm4Gpu: configs/dlrm_4gpu.yaml (48 tables, 4x A100 40GB over NVLink3), the 8
//    sharders only (--no-type-search): for each, load the scenario, build it and run it to steady
//    state (2, 4, 8 iterations), then place its tables once more for the memory columns, and
//    sort. Acceptance: under 2 s.
//  - BM_Shard_Dlrm8GpuTypes: configs/dlrm_8gpu.yaml (96 tables, DGX A100) with the sharding-type
//    search (issue acceptance: ranks sharding types and placements in under 10 s).
//
// Counters: plans (simulated: the sharders plus the type search's), fitting (sharders that fit),
// best_ms (the best predicted iteration time), jobs.
//
// Run: build/bench/shard_bench
// Measured (Release, GCC 12, one core of a shared 2-core VM, --jobs 1): dlrm_4gpu's 8 sharders
// 83 ms (about 10 ms per sharder's steady-state search, 24x inside 2 s); dlrm_8gpu with the type
// search 163 ms for 23 simulated plans, 8 sharders and 15 of the type search (best 7.7508 ms:
// every table table-wise), 61x inside 10 s.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "tools/shard_command.h"

namespace upsim {
namespace {

void run_shard(benchmark::State& state, const char* scenario, bool search_types) {
  cli::ShardOptions options;
  options.scenario = (std::filesystem::path(UPSIM_CONFIGS_DIR) / scenario).string();
  options.jobs = static_cast<int>(state.range(0));
  options.search_types = search_types;
  size_t plans = 0;
  size_t fitting = 0;
  double best_ms = 0.0;
  for (auto _ : state) {
    const cli::ShardRanking ranking = cli::rank_sharders(options);
    plans = ranking.plans.size() + ranking.search_simulated;
    fitting = 0;
    for (const cli::ShardedPlan& p : ranking.plans)
      fitting += p.fits ? 1 : 0;
    best_ms = ranking.best().iteration_time.ms();
    benchmark::DoNotOptimize(ranking.plans.data());
  }
  state.counters["plans"] = static_cast<double>(plans);
  state.counters["fitting"] = static_cast<double>(fitting);
  state.counters["best_ms"] = best_ms;
  state.counters["jobs"] = static_cast<double>(options.jobs);
}

void BM_Shard_Dlrm4Gpu(benchmark::State& state) {
  run_shard(state, "dlrm_4gpu.yaml", false);
}
void BM_Shard_Dlrm8GpuTypes(benchmark::State& state) {
  run_shard(state, "dlrm_8gpu.yaml", true);
}

BENCHMARK(BM_Shard_Dlrm4Gpu)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Shard_Dlrm8GpuTypes)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();

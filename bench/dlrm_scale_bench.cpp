// DLRM weak scaling: what `upsim run` does for configs/dlrm_8gpu.yaml on
// DGX H100 nodes (h100_sxm5_80gb, dgx_h100_cluster_128 with `nodes` = GPUs / 8), minus writing
// the Chrome trace: load the scenario, build the models and the task graph, run it with the run
// summary observer, format the summary. Weak scaling: global batch 1024 x GPUs (the scenario's
// 8192 on 8 GPUs), the same 96 tables sharded over more ranks. One simulated iteration
// (simulation.iterations=1, no warm-up), so wall time is wall time per simulated iteration.
// Targets: exponent of wall time per iteration <= 1.2 from 128 to 8192 GPUs,
// 1024 GPUs under 0.5 s, 8192 GPUs under 5 s.
//
// Counters: those of bench/scenario_benchmark.h, and gpus.
//
// BM_Dlrm_8192Gpus and BM_Dlrm_32768Gpus (the latter about 10 s and 1.1 GB) are registered only
// when UPSIM_BENCH_LARGE is set in the environment.
//
// Run: build/bench/dlrm_scale_bench --benchmark_filter=Dlrm_128Gpus/ (one size per process, so
// that peak_rss_mb is that size's).
// Measured (Release, GCC 12, one core of a shared 2-core VM), wall / build_s / run_s / events/s
// / peak RSS: 8 GPUs 0.004 s / 2.7 k events / 6.4 MB; 128 GPUs 0.017 s / 0.006 / 0.010 /
// 4.4 M/s / 10 MB; 1024 GPUs 0.14 s / 0.036 / 0.095 / 3.4 M/s / 41 MB; 8192 GPUs 1.8 s / 0.27
// / 1.4 / 1.8 M/s / 284 MB (2.6 M events); 32768 GPUs 8.6 s / 1.1 / 7.1 / 1.5 M/s / 1.1 GB
// (10.4 M events). Events per task 0.97 at every size. Exponent of wall time per iteration:
// 1.02 (128 -> 1024), 1.22 (1024 -> 8192), 1.13 (8192 -> 32768), 1.12 (128 -> 8192); what is
// left above 1 is the events' cost (0.29 us each at 1024 GPUs, 0.68 us at 32768: per-rank state
// that no longer fits in cache), not more events. Before the bounded routing, the all-to-all
// from non-zero pairs only, shared kernel descriptions and the sorted collective membership:
// 1024 GPUs 0.59 s, 8192 GPUs 50 s / 6.7 GB.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/scenario_benchmark.h"

namespace upsim {
namespace {

std::vector<std::string> dlrm_overrides(int gpus) {
  const std::filesystem::path configs(UPSIM_CONFIGS_DIR);
  const int nodes = gpus < 8 ? 1 : gpus / 8;
  return {
      "platform.gpu=" + (configs / "hardware" / "h100_sxm5_80gb.yaml").string(),
      "platform.topology=" + (configs / "topologies" / "dgx_h100_cluster_128.yaml").string(),
      "platform.topology.nodes=" + std::to_string(nodes),
      "platform.gpus=" + std::to_string(gpus),
      "workload.global_batch=" + std::to_string(1024 * static_cast<int64_t>(gpus)),
      "simulation.iterations=1",
      "simulation.warmup_iterations=0",
  };
}

void run_dlrm(benchmark::State& state, int gpus) {
  bench::run_scenario(state, std::filesystem::path(UPSIM_CONFIGS_DIR) / "dlrm_8gpu.yaml",
                      dlrm_overrides(gpus));
  state.counters["gpus"] = gpus;
}

void BM_Dlrm_8Gpus(benchmark::State& state) {
  run_dlrm(state, 8);
}
void BM_Dlrm_128Gpus(benchmark::State& state) {
  run_dlrm(state, 128);
}
void BM_Dlrm_1024Gpus(benchmark::State& state) {
  run_dlrm(state, 1024);
}
void BM_Dlrm_8192Gpus(benchmark::State& state) {
  run_dlrm(state, 8192);
}
void BM_Dlrm_32768Gpus(benchmark::State& state) {
  run_dlrm(state, 32768);
}

BENCHMARK(BM_Dlrm_8Gpus)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_Dlrm_128Gpus)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_Dlrm_1024Gpus)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace upsim

int main(int argc, char** argv) {
  upsim::bench::register_opt_in("UPSIM_BENCH_LARGE", "BM_Dlrm_8192Gpus", upsim::BM_Dlrm_8192Gpus);
  upsim::bench::register_opt_in("UPSIM_BENCH_LARGE", "BM_Dlrm_32768Gpus", upsim::BM_Dlrm_32768Gpus);
  return upsim::bench::run_benchmarks(argc, argv);
}

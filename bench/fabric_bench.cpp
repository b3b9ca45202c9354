// Fabric construction and routing at scale: load + seal of the shipped SuperPOD fabrics (1k,
// 8k, 32k and 100k GPUs: configs/topologies/superpod_h100_*.yaml, rail-optimised two-level
// Clos), and routes computed on first use: a GPU's host copy (inside its node) and a route
// between scalable units (through leaf and spine switches).
// Targets on one core: the 100,000-GPU fabric loads and seals in under a second; a first route
// inside a node costs microseconds whatever the fabric's size.
// Counters: gpus, devices, directed links.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <string>

#include "sim/config/config_node.h"
#include "topology/fabric_loader.h"

namespace upsim {
namespace {

Fabric load(const std::string& file) {
  ConfigDocument doc =
      ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) / "topologies" / file);
  return load_fabric(doc.root());
}

void counters(benchmark::State& state, const Fabric& f) {
  state.counters["gpus"] = static_cast<double>(f.gpus().size());
  state.counters["devices"] = static_cast<double>(f.devices().size());
  state.counters["links"] = static_cast<double>(f.links().size());
}

void BM_LoadAndSeal(benchmark::State& state, const std::string& file) {
  for (auto _ : state) {
    Fabric f = load(file);
    benchmark::DoNotOptimize(f.gpus().data());
    state.PauseTiming();
    counters(state, f);
    state.ResumeTiming();
  }
}

/// First routes on a sealed fabric: each iteration loads a fresh one (untimed, as is its
/// destruction) so that no route is cached, then times `routes(fabric)`.
template <typename Routes>
void time_first_routes(benchmark::State& state, const std::string& file, Routes&& routes) {
  std::optional<Fabric> f;
  for (auto _ : state) {
    state.PauseTiming();
    f.reset();
    f.emplace(load(file));
    state.ResumeTiming();
    routes(*f);
  }
  counters(state, *f);
}

/// Every GPU of node 0 to and from its host CPU (16 routes inside one node).
void BM_FirstHostRoutes(benchmark::State& state, const std::string& file) {
  time_first_routes(state, file, [](const Fabric& f) {
    for (size_t g = 0; g < 8 && g < f.gpus().size(); ++g) {
      const DeviceIndex gpu = f.gpus()[g];
      benchmark::DoNotOptimize(f.route(f.host_of(gpu), gpu).size());
      benchmark::DoNotOptimize(f.route(gpu, f.host_of(gpu)).size());
    }
  });
}

/// A route from GPU 0 to the last GPU (another scalable unit: leaf, spine, leaf).
void BM_FirstCrossUnitRoute(benchmark::State& state, const std::string& file) {
  time_first_routes(state, file, [](const Fabric& f) {
    benchmark::DoNotOptimize(f.route(f.gpus().front(), f.gpus().back()).size());
  });
}

BENCHMARK_CAPTURE(BM_LoadAndSeal, superpod_1k, std::string("superpod_h100_1k.yaml"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LoadAndSeal, superpod_8k, std::string("superpod_h100_8k.yaml"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LoadAndSeal, superpod_32k, std::string("superpod_h100_32k.yaml"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LoadAndSeal, superpod_100k, std::string("superpod_h100_100k.yaml"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FirstHostRoutes, superpod_100k, std::string("superpod_h100_100k.yaml"))
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_FirstCrossUnitRoute, superpod_100k, std::string("superpod_h100_100k.yaml"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();

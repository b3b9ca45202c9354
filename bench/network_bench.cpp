// Flow-network speed at scale: collectives over all 1024 GPUs of the 128-node DGX H100
// cluster (configs/topologies/dgx_h100_cluster_128.yaml: 8 H100 per node on one NVSwitch, 8 NDR
// NICs per node, rail-optimised leaves in 4 units of 32 nodes, 16 spines).
// Targets on one core: ring all-reduce under 1 s, all-to-all under 10 s.
//
//  - RingAllReduce1024: 1 GiB per rank, ring algorithm with the Simple protocol forced (8 channels
//    -> 16384 ring steps, merged into 2048 flows: intra-node arcs and rail-matched NIC hops).
//  - TunedAllReduce1024: 1 GiB per rank, algorithm and protocol chosen by the tuner (NVLS).
//  - AllToAll1024: 1 MiB from every rank to every other (1023 MiB sent per rank, 1,047,552
//    pairs), direct with PXN: 137,216 flows (NVLink segments to rail proxies and rail-matched
//    proxy -> receiver flows).
//  - EmbeddingAllToAll1024: DLRM's forward embedding all-to-all under weak scaling (96 tables on
//    1024 ranks): every tenth rank below 960 sends 512 KiB (1024 samples x 128 fp32 values of its
//    one table) to every rank, the others nothing; sizes an outer product, so only those 96 rows
//    are planned.
// "Cold" variants build a new FlowNetwork per iteration, so each one pays for planning (ring
// search, NIC affinity, routes); "Warm" ones reuse it, as repeated calls of one job do.
// Counters: flows simulated, flows per wall second, simulated collective time.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/engine.h"
#include "topology/collectives/collective_planner.h"
#include "topology/fabric_loader.h"
#include "topology/flow_network.h"

namespace upsim {
namespace {

Fabric load_cluster() {
  ConfigDocument doc = ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) /
                                                 "topologies" / "dgx_h100_cluster_128.yaml");
  return load_fabric(doc.root());
}

CollectiveDesc over_all(const Fabric& fabric, CollectiveKind kind, int64_t bytes,
                        AllToAllSizes sizes) {
  CollectiveDesc c;
  c.kind = kind;
  c.bytes = bytes;
  c.send_bytes = std::move(sizes);
  for (RankId r = 0; r < fabric.gpus().size(); ++r)
    c.members.push_back(r);
  return c;
}

/// DLRM forward embedding all-to-all sizes on n ranks (see EmbeddingAllToAll1024 above).
AllToAllSizes embedding_sizes(size_t n) {
  std::vector<int64_t> per_sender(n, 0);
  for (size_t r = 0; r < 960 && r < n; r += 10)
    per_sender[r] = 1024 * 128 * 4;
  return AllToAllSizes::outer(std::move(per_sender), std::vector<int64_t>(n, 1));
}

/// Runs `c` once on `net` (forced algorithm / protocol when given); returns the simulated time.
Duration run_once(FlowNetwork& net, const CollectiveDesc& c,
                  std::optional<CollectiveAlgorithm> algorithm) {
  Engine engine;
  Time done;
  if (algorithm) {
    CollectivePlan plan = net.planner().plan(c, *algorithm, CollectiveProtocol::kSimple);
    net.start_flows(engine, plan.choice.latency, std::move(plan.flows),
                    [&] { done = engine.now(); });
  } else {
    net.start_collective(engine, c, [&] { done = engine.now(); });
  }
  engine.run();
  return done.since_start();
}

void run_benchmark(benchmark::State& state, CollectiveKind kind, int64_t bytes,
                   std::optional<CollectiveAlgorithm> algorithm, bool cold,
                   bool embedding_sizes_of_dlrm = false) {
  const Fabric fabric = load_cluster();
  const CollectiveDesc c =
      over_all(fabric, kind, bytes,
               embedding_sizes_of_dlrm ? embedding_sizes(fabric.gpus().size()) : AllToAllSizes{});
  const Bandwidth hbm = Bandwidth::gigabytes_per_second(3350.0);  // H100 SXM5 datasheet
  std::optional<FlowNetwork> warm;
  if (!cold) {
    warm.emplace(fabric, nccl_like_tuning(), hbm);
    run_once(*warm, c, algorithm);  // plan once outside the timed loop
  }
  uint64_t flows = 0;
  Duration simulated;
  for (auto _ : state) {
    if (cold) {
      FlowNetwork net(fabric, nccl_like_tuning(), hbm);
      simulated = run_once(net, c, algorithm);
      flows += net.stats().flows_started;
    } else {
      const uint64_t before = warm->stats().flows_started;
      simulated = run_once(*warm, c, algorithm);
      flows += warm->stats().flows_started - before;
    }
  }
  state.counters["flows"] =
      benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kAvgIterations);
  state.counters["flows_per_s"] =
      benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsRate);
  state.counters["simulated_ms"] = simulated.ms();
}

void BM_RingAllReduce1024Cold(benchmark::State& state) {
  run_benchmark(state, CollectiveKind::kAllReduce, int64_t{1} << 30, CollectiveAlgorithm::kRing,
                true);
}
void BM_RingAllReduce1024Warm(benchmark::State& state) {
  run_benchmark(state, CollectiveKind::kAllReduce, int64_t{1} << 30, CollectiveAlgorithm::kRing,
                false);
}
void BM_TunedAllReduce1024Cold(benchmark::State& state) {
  run_benchmark(state, CollectiveKind::kAllReduce, int64_t{1} << 30, std::nullopt, true);
}
void BM_AllToAll1024Cold(benchmark::State& state) {
  // bytes = each rank's buffer; without send_bytes every pair carries bytes / n = 1 MiB.
  run_benchmark(state, CollectiveKind::kAllToAll, int64_t{1024} << 20, std::nullopt, true);
}
void BM_AllToAll1024Warm(benchmark::State& state) {
  run_benchmark(state, CollectiveKind::kAllToAll, int64_t{1024} << 20, std::nullopt, false);
}
void BM_EmbeddingAllToAll1024Cold(benchmark::State& state) {
  run_benchmark(state, CollectiveKind::kAllToAll, 0, std::nullopt, true, true);
}
void BM_EmbeddingAllToAll1024Warm(benchmark::State& state) {
  run_benchmark(state, CollectiveKind::kAllToAll, 0, std::nullopt, false, true);
}

BENCHMARK(BM_RingAllReduce1024Cold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RingAllReduce1024Warm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TunedAllReduce1024Cold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AllToAll1024Cold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AllToAll1024Warm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingAllToAll1024Cold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingAllToAll1024Warm)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();

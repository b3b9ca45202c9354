// Engine throughput on a synthetic multi-rank graph (>= 1 million tasks over 8 ranks,
// target >= 5 million events per second on one core).
//
// Each rank runs a CPU thread that launches kernels alternately on two streams, with an event
// record / stream wait between the streams every 16 kernels and an all-reduce over all ranks
// every 64 kernels: the mix of resources, cross-stream edges and rendezvous of a training step.
#include <benchmark/benchmark.h>

#include <string>

#include "sim/executor.h"

namespace upsim {
namespace {

class BenchCpuCost final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& op) const override {
    return op.phase == HostPhase::kLaunch ? Duration::from_ns(4000) : Duration::from_ns(1500);
  }
};

class BenchKernelCost final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    return Duration::from_ns(k.m);
  }
};

class BenchCollectiveCost final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc& c) const override {
    return Duration::from_ns(10'000 + c.bytes / 100);
  }
  Duration transfer_duration(const TransferDesc& t) const override {
    return Duration::from_ns(t.bytes / 25);
  }
};

/// Builds a graph of about `tasks_per_rank` tasks on each of `ranks` ranks.
TaskGraph build_graph(uint32_t ranks, uint32_t tasks_per_rank) {
  TaskGraph g;
  for (uint32_t r = 0; r < ranks; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute", "comm"}});
  // Per kernel: one CPU op, one launch, one kernel = 3 tasks (+ occasional sync/collective).
  const uint32_t kernels = tasks_per_rank / 3;
  std::vector<CollectiveId> groups;
  std::vector<RankId> members(ranks);
  for (uint32_t r = 0; r < ranks; ++r)
    members[r] = r;
  for (uint32_t i = 0; i < kernels / 64; ++i) {
    groups.push_back(g.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllReduce, members, 1 << 20, {}}, "all_reduce"));
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    for (uint32_t i = 0; i < kernels; ++i) {
      const uint16_t stream = static_cast<uint16_t>(i % 2);
      g.add_cpu_op(r, 0, "aten::op", HostPhase::kOpBegin);
      KernelDesc k;
      k.m = 2000 + (i * 7919 + r * 104729) % 5000;
      const TaskId kernel = g.add_kernel(r, stream, "kernel", "aten::op", k);
      g.add_launch(r, 0, "cudaLaunchKernel", "aten::op", 0, kernel);
      if (i % 16 == 15) {
        const TaskId rec = g.add_event_record(r, 0);
        g.add_stream_wait(r, 1, rec);
      }
      if (i % 64 == 63) g.add_collective(r, 1, groups[i / 64], "nccl:all_reduce");
    }
  }
  g.seal();
  return g;
}

void BM_EngineThroughput(benchmark::State& state) {
  const auto ranks = static_cast<uint32_t>(state.range(0));
  const auto total_tasks = static_cast<uint32_t>(state.range(1));
  const TaskGraph graph = build_graph(ranks, total_tasks / ranks);
  BenchCpuCost cpu;
  BenchKernelCost kernels;
  BenchCollectiveCost collectives;
  AnalyticalNetwork network(collectives);
  ModelSet models{&kernels, &cpu, &network, std::vector<DeviceProfile>(ranks), {}};
  uint64_t events = 0;
  for (auto _ : state) {
    Engine engine;
    GraphExecutor exec(engine, graph, models);
    const RunStats stats = exec.run();
    events += stats.events;
    benchmark::DoNotOptimize(stats.end);
  }
  // Hardware-independent: events per run of the graph and per task (the engine's own overhead
  // per unit of simulated work), next to the machine-dependent rate.
  const auto runs = static_cast<double>(state.iterations());
  state.counters["tasks"] = static_cast<double>(graph.task_count());
  state.counters["events_per_run"] = static_cast<double>(events) / runs;
  state.counters["events_per_task"] =
      static_cast<double>(events) / runs / static_cast<double>(graph.task_count());
  state.counters["events_per_second"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineThroughput)->Args({8, 1'200'000})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GraphBuild(benchmark::State& state) {
  for (auto _ : state) {
    TaskGraph g = build_graph(8, 150'000);
    benchmark::DoNotOptimize(g.task_count());
  }
}
BENCHMARK(BM_GraphBuild)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();

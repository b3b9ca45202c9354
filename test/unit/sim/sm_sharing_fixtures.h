// Models for the executor's SM-sharing tests (communication_sm_sharing_test.cpp,
// persistent_gemm_test.cpp): a kernel whose rate is its SMs', a host that costs nothing, a
// network whose collectives last a fixed time and hold a fixed number of SMs, and a run that
// returns when each task ended.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/executor.h"

namespace upsim::sm_sharing {

constexpr Time at_us(int64_t v) {
  return Time::zero() + Duration::from_us(v);
}

/// A kernel of `flops` work runs at 1 FLOP per microsecond per SM: 100 flops on 100 SMs take
/// 1 us, on 50 SMs 2 us (a compute-bound kernel whose rate is its SMs'). A GEMM has `m`
/// per-tile CTAs.
class PerSmKernelCost final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile& device) const override {
    return Duration::from_us_f(k.flops / static_cast<double>(device.sm_count));
  }
  int64_t gemm_ctas(const KernelDesc& k, const DeviceProfile&) const override {
    return k.cls == KernelClass::kGemm ? k.m : 0;
  }
};

class NoHostCost final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc&) const override { return Duration::zero(); }
};

/// Every collective moves data for `duration` once all members arrived and holds `sms` SMs on
/// each member (none for a one-member collective).
class SmHoldingNetwork final : public NetworkModel {
 public:
  SmHoldingNetwork(Duration duration, int32_t sms) : duration_(duration), sms_(sms) {}
  void start_collective(Engine& engine, const CollectiveDesc&, Completion on_done) override {
    engine.schedule_in(duration_, EventPriority::kCompletion, std::move(on_done));
  }
  void start_transfer(Engine& engine, const TransferDesc&, Completion on_done) override {
    engine.schedule_in(Duration::zero(), EventPriority::kCompletion, std::move(on_done));
  }
  int32_t communication_sms(const CollectiveDesc& c, RankId) const override {
    return c.members.size() > 1 ? sms_ : 0;
  }
  bool communication_holds_sms() const override { return sms_ > 0; }

 private:
  Duration duration_;
  int32_t sms_;
};

/// `graph` gets `ranks` ranks ("rank i", one CPU thread, streams `streams`), and `models` the
/// given models and one GPU of 100 SMs ("test GPU") per rank.
inline void set_up(TaskGraph& graph, ModelSet& models, size_t ranks,
                   const std::vector<std::string>& streams, const KernelCostModel& kernels,
                   const CpuCostModel& cpu, NetworkModel& network) {
  for (size_t r = 0; r < ranks; ++r)
    graph.add_rank(RankInfo{"rank " + std::to_string(r), 1, streams});
  models.kernels = &kernels;
  models.cpu = &cpu;
  models.network = &network;
  DeviceProfile gpu;
  gpu.name = "test GPU";
  gpu.sm_count = 100;
  models.devices.assign(ranks, gpu);
}

/// Seals `graph`, runs it with `models` and returns each task's end (Time::max() if none).
inline std::vector<Time> run_ends(TaskGraph& graph, const ModelSet& models) {
  graph.seal();
  Engine engine;
  GraphExecutor exec(engine, graph, models);
  struct Ends final : Observer {
    std::vector<Time>* ends;
    void on_task_end(TaskId t, Time at) override { (*ends)[t] = at; }
  } observer;
  std::vector<Time> ends(graph.task_count(), Time::max());
  observer.ends = &ends;
  exec.add_observer(&observer);
  exec.run();
  return ends;
}

/// A kernel description of `flops` work.
inline KernelDesc work(double flops) {
  KernelDesc k;
  k.flops = flops;
  return k;
}

}  // namespace upsim::sm_sharing

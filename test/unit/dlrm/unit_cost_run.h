// Fixed-cost models and a runner for the DLRM generator's graphs in tests (not calibrated
// predictions): every host op 2 us (markers free), every kernel the same duration, every
// collective 20 us and every transfer 3 us.
#pragma once

#include <cstdint>

#include "sim/executor.h"
#include "sim/network_model.h"

namespace upsim::dlrm_test {

class UnitCpuCost final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& op) const override {
    return op.phase == HostPhase::kMarker ? Duration::zero() : Duration::from_us(2);
  }
};

/// Every kernel `us` microseconds (5 by default).
class UnitKernelCost final : public KernelCostModel {
 public:
  explicit UnitKernelCost(int64_t us = 5) : us_(us) {}
  Duration kernel_duration(const KernelDesc&, const DeviceProfile&) const override {
    return Duration::from_us(us_);
  }

 private:
  int64_t us_;
};

class UnitCollectiveCost final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc&) const override {
    return Duration::from_us(20);
  }
  Duration transfer_duration(const TransferDesc&) const override { return Duration::from_us(3); }
};

class MarkCounter final : public Observer {
 public:
  void on_task_end(TaskId, Time) override { ++ended; }
  int ended = 0;
};

/// Runs `g` (sealed here) on `ranks` ranks with UnitCpuCost and the given models; `ended`, when
/// given, counts the tasks that ended.
inline RunStats run_graph(TaskGraph& g, uint32_t ranks, const KernelCostModel& kernels,
                          const CollectiveCostModel& collectives, int* ended = nullptr) {
  g.seal();
  UnitCpuCost cpu;
  AnalyticalNetwork network(collectives);
  ModelSet models;
  models.kernels = &kernels;
  models.cpu = &cpu;
  models.network = &network;
  models.devices.resize(ranks);
  Engine engine;
  GraphExecutor executor(engine, g, models);
  MarkCounter counter;
  executor.add_observer(&counter);
  const RunStats stats = executor.run();
  if (ended != nullptr) *ended = counter.ended;
  return stats;
}

}  // namespace upsim::dlrm_test

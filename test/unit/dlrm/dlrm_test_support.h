// What the DLRM workload's tests share: a scenario's workload parsed into a DlrmConfig, the
// placement inputs of a run, and fixed-cost models with a runner for the generated graphs (not
// calibrated predictions: every host op 2 us, markers free, every kernel the same duration,
// every collective 20 us and every transfer 3 us).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/network_model.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_generator.h"

namespace upsim::dlrm_test {

/// The `workload:` section of `yaml` read for `ranks` ranks; a key it leaves unread fails.
inline DlrmConfig config_of(std::string_view yaml, uint32_t ranks) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "test.yaml");
  DlrmConfig c = parse_dlrm_config(doc.root().child("workload"), ranks);
  doc.check_all_keys_used();
  return c;
}

/// A run of `iterations` on `ranks` ranks with `capacity` bytes of table memory each.
inline DlrmPlacementInputs inputs_of(uint32_t ranks, uint32_t iterations,
                                     int64_t capacity = 40'000'000'000) {
  return DlrmPlacementInputs{ranks, std::vector<int64_t>(ranks, capacity), iterations};
}

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

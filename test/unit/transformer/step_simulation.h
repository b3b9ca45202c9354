// Runs a generated transformer step in the engine for the transformer tests: a fixed host cost
// per op, the given kernel model, the flow network of a fabric.
#pragma once

#include <cstdint>

#include "calibration/hardware_profile.h"
#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "topology/fabric_loader.h"
#include "topology/flow_network.h"
#include "topology/nccl_tuning.h"

namespace upsim::test_configs {

/// One host op costs 2 us; markers nothing.
class FixedCpuCost final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& op) const override {
    return op.phase == HostPhase::kMarker ? Duration::zero() : Duration::from_us(2);
  }
};

/// Runs the sealed `graph` with `kernels` on `hw`'s device at every rank and `fabric`'s flow
/// network (NCCL-like tuning); the summary measures the iterations after the first when there are
/// more than one.
inline RunSummary run_step(const TaskGraph& graph, const KernelCostModel& kernels,
                           const Fabric& fabric, const HardwareProfile& hw, uint32_t iterations) {
  const FixedCpuCost cpu;
  FlowNetwork network(fabric, nccl_like_tuning(), hw.device.hbm_bandwidth * hw.achievable.memory);
  ModelSet models;
  models.kernels = &kernels;
  models.cpu = &cpu;
  models.network = &network;
  models.devices.assign(graph.rank_count(), hw.device);
  Engine engine;
  GraphExecutor executor(engine, graph, models);
  RunSummaryObserver summary(iterations > 1 ? 1 : 0);
  executor.add_observer(&summary);
  executor.run();
  return summary.summary();
}

}  // namespace upsim::test_configs

// What the DLRM workload's tests share: a scenario's workload parsed into a DlrmConfig, the
// placement inputs of a run, and fixed-cost models with a runner for the generated graphs (not
// calibrated predictions: every host op 2 us, markers free, every kernel the same duration,
// every collective 20 us and every transfer 3 us), and a check that two graphs are the same.
#pragma once

#include <gtest/gtest.h>

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

/// Collective groups in the order rank `rank` launches them.
inline std::vector<CollectiveId> collective_order(const TaskGraph& g, RankId rank) {
  std::vector<CollectiveId> order;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank == rank && t.kind == TaskKind::kLaunch &&
        g.task(g.launched_task(id)).kind == TaskKind::kCollective) {
      order.push_back(g.collective_of(g.launched_task(id)));
    }
  }
  return order;
}

/// Every task and collective group of `a` equals `b`'s: kind, phase, resource, rank, names,
/// payload and launch index of each task; a kernel's shape, bytes, FLOPs and embedding lookups;
/// a copy's bytes; each collective's name, members and sizes.
inline void expect_same_graph(const TaskGraph& a, const TaskGraph& b) {
  ASSERT_EQ(a.task_count(), b.task_count());
  ASSERT_EQ(a.collective_count(), b.collective_count());
  for (TaskId id = 0; id < a.task_count(); ++id) {
    const Task& x = a.task(id);
    const Task& y = b.task(id);
    ASSERT_EQ(x.kind, y.kind) << id;
    ASSERT_EQ(x.phase, y.phase) << id;
    ASSERT_EQ(x.resource, y.resource) << id;
    ASSERT_EQ(x.rank, y.rank) << id;
    ASSERT_EQ(a.name(x.name), b.name(y.name)) << id;
    ASSERT_EQ(a.name(x.op_name), b.name(y.op_name)) << id;
    ASSERT_EQ(x.payload, y.payload) << id;
    ASSERT_EQ(x.launch_index, y.launch_index) << id;
    if (x.kind == TaskKind::kKernel) {
      const KernelDesc& p = a.kernel(id);
      const KernelDesc& q = b.kernel(id);
      ASSERT_EQ(p.m, q.m) << id;
      ASSERT_EQ(p.n, q.n) << id;
      ASSERT_EQ(p.k, q.k) << id;
      ASSERT_EQ(p.batch, q.batch) << id;
      ASSERT_EQ(p.bytes_read, q.bytes_read) << id;
      ASSERT_EQ(p.bytes_written, q.bytes_written) << id;
      ASSERT_EQ(p.flops, q.flops) << id;
      ASSERT_EQ(p.embedding.tables, q.embedding.tables) << id;
      ASSERT_EQ(p.embedding.batch, q.embedding.batch) << id;
      ASSERT_EQ(p.embedding.per_table, q.embedding.per_table) << id;
    }
    if (x.kind == TaskKind::kMemcpy) {
      ASSERT_EQ(a.transfer(id).bytes, b.transfer(id).bytes) << id;
    }
  }
  for (CollectiveId c = 0; c < a.collective_count(); ++c) {
    EXPECT_EQ(a.collective_name(c), b.collective_name(c));
    EXPECT_EQ(a.collective(c).members, b.collective(c).members);
    EXPECT_EQ(a.collective(c).bytes, b.collective(c).bytes);
    EXPECT_EQ(a.collective(c).send_bytes, b.collective(c).send_bytes);
  }
}

}  // namespace upsim::dlrm_test

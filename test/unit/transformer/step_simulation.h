// Runs a generated transformer step in the engine for the transformer tests: a fixed host cost
// per op, the given kernel model, the flow network of a fabric.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "topology/fabric_loader.h"
#include "topology/flow_network.h"
#include "topology/nccl_tuning.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim::test_configs {

/// One host op costs `per_op` (default 2 us); markers nothing.
class FixedCpuCost final : public CpuCostModel {
 public:
  explicit FixedCpuCost(Duration per_op = Duration::from_us(2)) : per_op_(per_op) {}
  Duration host_duration(const HostOpDesc& op) const override {
    return op.phase == HostPhase::kMarker ? Duration::zero() : per_op_;
  }

 private:
  Duration per_op_;
};

/// Runs the sealed `graph` with `kernels` on `hw`'s device at every rank, `fabric`'s flow
/// network (NCCL-like tuning) and `host_per_op` per host op; the summary measures the iterations
/// after the first when there are more than one.
inline RunSummary run_step(const TaskGraph& graph, const KernelCostModel& kernels,
                           const Fabric& fabric, const HardwareProfile& hw, uint32_t iterations,
                           Duration host_per_op = Duration::from_us(2)) {
  const FixedCpuCost cpu(host_per_op);
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

/// A shipped GPU and its shipped calibration (configs/hardware/<hardware>.yaml,
/// configs/calibration/<calibration>.yaml; the test defines UPSIM_CONFIGS_DIR).
struct CalibratedGpu {
  HardwareProfile hw;
  CalibratedKernelCost model;
};
inline CalibratedGpu calibrated_gpu(const std::string& hardware, const std::string& calibration) {
  const std::filesystem::path configs = UPSIM_CONFIGS_DIR;
  ConfigDocument hw_doc = ConfigDocument::load_file(configs / "hardware" / (hardware + ".yaml"));
  HardwareProfile hw = load_hardware_profile(hw_doc.root());
  ConfigDocument section = ConfigDocument::parse_string(
      "{model: calibrated, calibration: " +
          (configs / "calibration" / (calibration + ".yaml")).string() + "}",
      "section");
  CalibratedKernelCost model = load_calibrated(section.root(), hw);
  return {std::move(hw), std::move(model)};
}

/// The first rank's window of one step of `config` on `gpu`, over the shipped fabric
/// configs/topologies/<topology>.yaml.
inline Duration step_window(const TransformerConfig& config, const CalibratedGpu& gpu,
                            const std::string& topology = "dgx_h100") {
  TaskGraph g;
  generate_transformer(config, {1}, g);
  g.seal();
  ConfigDocument fabric = ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) /
                                                    "topologies" / (topology + ".yaml"));
  return run_step(g, gpu.model, load_fabric(fabric.root()), gpu.hw, 1).ranks.front().window;
}

/// Two iterations of `config` (the second measured) on `gpu` over the shipped fabric
/// configs/topologies/<topology>.yaml, each GPU on its node there.
inline RunSummary fabric_step(const TransformerConfig& config, const CalibratedGpu& gpu,
                              const std::string& topology) {
  ConfigDocument doc = ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) /
                                                 "topologies" / (topology + ".yaml"));
  const Fabric fabric = load_fabric(doc.root());
  const auto gpus = static_cast<size_t>(ParallelLayout(config.parallelism).gpus());
  TaskGraph g;
  generate_transformer(config, TransformerGraphInputs(2, fabric.gpu_nodes(gpus)), g);
  g.seal();
  return run_step(g, gpu.model, fabric, gpu.hw, 2);
}

/// How many tasks of `kind` named `name` `rank` runs in one generated step of `config`.
inline int task_count(const TransformerConfig& config, TaskKind kind, std::string_view name,
                      RankId rank = 0) {
  TaskGraph g;
  generate_transformer(config, {1}, g);
  int n = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind == kind && task.rank == rank && g.name(task.name) == name) ++n;
  }
  return n;
}

/// How many collectives of host op `op` (Task::op_name) `rank` calls in one generated step of
/// `config`.
inline int collective_count(const TransformerConfig& config, std::string_view op, RankId rank = 0) {
  TaskGraph g;
  generate_transformer(config, {1}, g);
  int n = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    n += task.rank == rank && task.kind == TaskKind::kCollective && g.name(task.op_name) == op;
  }
  return n;
}

/// How many kernels of each name `rank` runs in one generated step of `config`.
inline std::map<std::string, int> kernel_counts(const TransformerConfig& config, RankId rank = 0) {
  TaskGraph g;
  generate_transformer(config, {1}, g);
  std::map<std::string, int> counts;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind == TaskKind::kKernel && task.rank == rank) {
      ++counts[std::string(g.name(task.name))];
    }
  }
  return counts;
}

/// The kernels `rank` runs in one generated step of `config`, in emission order.
inline std::vector<KernelDesc> step_kernels(const TransformerConfig& config, RankId rank = 0) {
  TaskGraph g;
  generate_transformer(config, {1}, g);
  std::vector<KernelDesc> kernels;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind == TaskKind::kKernel && g.task(t).rank == rank) {
      kernels.push_back(g.kernel(t));
    }
  }
  return kernels;
}

}  // namespace upsim::test_configs

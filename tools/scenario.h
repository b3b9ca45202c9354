// A scenario file -> everything one run needs: the sealed task graph and the models, built from
// the scenario's sections. This is the composition root's wiring; it owns what it builds.
//
// Scenario schema (configs/dlrm_4gpu.yaml is the reference example):
//   name: dlrm_4gpu                 # optional; default: the file's stem
//   description: "..."              # optional, printed in the summary
//   platform:
//     gpus: 4                       # ranks, one per GPU
//     gpu: hardware/a100_sxm4_40gb.yaml   # hardware profile (path relative to this file)
//     table_memory_fraction: 0.8    # share of HBM embedding tables may use (seed-method.md 5.2)
//     kernels: {model: roofline}                    # calibration/model_registry.h
//     host: {model: host_overheads, overheads: host/v100_pytorch_kineto.yaml}
//     interconnect: {model: alpha_beta, link: nvlink3}
//   workload: {model: dlrm, ...}    # workloads/dlrm/dlrm_config.h
//   simulation:
//     iterations: 3                 # training steps simulated
//     warmup_iterations: 1          # leading steps left out of the reported mean
#pragma once

#include <memory>
#include <string>

#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/network_model.h"
#include "sim/task_graph.h"

namespace upsim::cli {

struct ScenarioModels {
  std::unique_ptr<KernelCostModel> kernels;
  std::unique_ptr<CpuCostModel> cpu;
  std::unique_ptr<CollectiveCostModel> collectives;
  std::unique_ptr<NetworkModel> network;
  /// Points into the members above (heap objects, so moving ScenarioModels keeps it valid).
  ModelSet set;
};

struct Scenario {
  std::string name;
  /// What is simulated, in a few lines for the summary (platform, workload, placement).
  std::string description;
  TaskGraph graph;  ///< sealed
  ScenarioModels models;
  uint32_t iterations = 0;
  uint32_t warmup_iterations = 0;
};

/// Reads the whole document (overrides must already be applied), checks that every key was
/// understood, and builds the graph and models. Throws ConfigError for any bad value.
Scenario build_scenario(ConfigDocument& doc);

}  // namespace upsim::cli

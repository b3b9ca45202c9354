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
//     # or, over a fabric: the flow-level network with NCCL-like collective algorithms
//     topology: topologies/a100x4_nvlink.yaml     # topology/fabric_loader.h; rank r -> GPU r
//     interconnect: {model: flow, tuning: collectives/nccl_like.yaml}   # tuning optional
//   With a topology, `gpus` defaults to the fabric's GPU count and may not exceed it.
//   workload: {model: dlrm, ...}    # workloads/dlrm/dlrm_config.h
//   # or replay / re-cost measured PyTorch traces (workloads/trace/trace_replay.h):
//   workload:
//     model: trace
//     traces: ../test/data/param-et-replay/dlrm   # folder of per-rank Kineto (+ ET) traces,
//                                   #   or of per-rank Chakra ETs (*.et, *.et.gz)
//     format: kineto                # optional: kineto or chakra; default: chakra when the
//                                   #   folder holds *.et / *.et.gz and no *.json / *.json.gz
//     mode: replay                  # replay: measured durations; model: kernels, copies and
//                                   #   collectives re-priced by the platform's models
//                                   #   (Chakra: ChakraGraphOptions::mode in chakra_trace.h)
//     host: measured                # host time: measured (the traced timeline), modelled (the
//                                   #   seed's T1-T5 extracted from these traces) or platform
//                                   #   (platform.host's model, e.g. another host's T1-T5 file)
//     iteration: 10                 # optional: measure this step only (else every complete one)
//     iteration_marker: "ProfilerStep#"
//     lenient_et: false             # a mismatched execution trace: error (false) or warning
//   A trace workload has as many GPUs as traces and no `simulation` section. Chakra traces are
//   one iteration per rank with host: measured (no iteration, iteration_marker, lenient_et).
//   simulation:
//     iterations: 3                 # training steps simulated
//     warmup_iterations: 1          # leading steps left out of the reported mean
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/network_model.h"
#include "sim/task_graph.h"
#include "topology/fabric.h"

namespace upsim::cli {

struct ScenarioModels {
  /// The platform's fabric when the scenario names a topology (the flow network refers to it).
  std::unique_ptr<Fabric> fabric;
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
  /// Iterations the summary measures after the warm-up (nullopt: all that follow).
  std::optional<uint32_t> measured_iterations;
  /// Trace workloads: each rank's measured time of the measured iterations (mean); empty
  /// for generated workloads.
  std::vector<Duration> measured_iteration;
};

/// Reads the whole document (overrides must already be applied), checks that every key was
/// understood, and builds the graph and models. Throws ConfigError for any bad value.
Scenario build_scenario(ConfigDocument& doc);

}  // namespace upsim::cli

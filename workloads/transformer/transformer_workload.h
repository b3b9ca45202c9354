// `workload: {model: transformer, ...}` as a Workload (workloads/workload.h): the schema is
// parse_transformer_config's (workloads/transformer/transformer_config.h), the graph
// generate_transformer's (transformer_generator.h), the memory footprint transformer_memory's.
//
// Contract:
//  - The GPU count is the platform's; when `parallelism.data` is given the workload implies
//    tensor x pipeline x context x data GPUs (so a scenario on a larger fabric need not repeat
//    it in platform.gpus).
//  - The description names the model (parameters, shape, dtype), the parallel layout, the
//    schedule, micro-batches and what was simulated (mirrored data-parallel replicas).
//  - The memory footprint is that of the most loaded pipeline stage.
#pragma once

#include <memory>
#include <optional>

#include "sim/config/config_node.h"
#include "workloads/transformer/transformer_config.h"
#include "workloads/workload.h"

namespace upsim {

class TransformerWorkload final : public Workload {
 public:
  explicit TransformerWorkload(const ConfigNode& workload);

  std::optional<uint32_t> implied_gpus() const override;
  std::string implied_gpus_reason() const override;
  /// 80 B: peak RSS over tasks measured (`upsim run --no-trace`, /usr/bin/time) 58 B on the
  /// Megatron SC'21 1T row (268.7 M tasks, 15.5 GB) and 529.6B row (120.6 M, 7.0 GB), 55 B on
  /// GPT-3 175B at 1024 GPUs without mirroring (255 M, 14 GB), 65 B at 16 M tasks; the rest is
  /// room for a vector that doubles as the graph grows.
  size_t peak_bytes_per_task() const override { return 80; }
  void prepare(const WorkloadPlatform& platform) override;
  WorkloadBuild build(const WorkloadPlatform& platform, TaskGraph& graph) override;

  /// The parsed configuration (after prepare()).
  const TransformerConfig& config() const { return *config_; }

 private:
  ConfigNode node_;
  std::optional<TransformerConfig> config_;
};

std::unique_ptr<Workload> make_transformer_workload(const ConfigNode& workload);

}  // namespace upsim

// `workload: {model: dlrm, ...}` as a Workload (workloads/workload.h): the schema is
// parse_dlrm_config's (workloads/dlrm/dlrm_config.h), the graph generate_dlrm's
// (workloads/dlrm/dlrm_generator.h).
//
// Contract:
//  - the factory keeps the `workload:` node; prepare() parses it for the platform's GPU count
//    (every bad value a ConfigError at its key); build() generates `platform.iterations`
//    training steps on `platform.gpus` ranks, each rank planning tables into
//    table_memory_fraction x the GPU's memory. A table that does not fit is a ConfigError at
//    its group (in `workload.embeddings.tables` or in the tables_file) naming its bytes, a
//    rank's table memory and platform.table_memory_fraction; with `sharding: plan`, at the
//    plan's `rank_of_table`.
//  - The description: "workload: dlrm, global batch ...", "embedding tables: rank 0 N (bytes),
//    ...", and the sharding types when any table is not table-wise. Table-row-wise tables
//    without a fabric get a warning: all GPUs count as one node.
//  - The memory footprint is that of the rank holding the most table bytes: its embedding
//    tables, and the dense MLP weights and their gradients (every rank holds all of them, DDP).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "sim/config/config_node.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/workload.h"

namespace upsim {

class DlrmWorkload final : public Workload {
 public:
  explicit DlrmWorkload(const ConfigNode& workload);

  void prepare(const WorkloadPlatform& platform) override;
  WorkloadBuild build(const WorkloadPlatform& platform, TaskGraph& graph) override;

 private:
  ConfigNode node_;
  std::optional<DlrmConfig> config_;
};

std::unique_ptr<Workload> make_dlrm_workload(const ConfigNode& workload);

/// Bytes of embedding-table memory each rank may use on `platform`: table_memory_fraction x
/// the GPU's memory (what build() gives the sharder).
int64_t dlrm_table_capacity_bytes(const WorkloadPlatform& platform);

/// Ranks per node that table-row-wise tables of `config` span on `platform`
/// (DlrmPlacementInputs::ranks_per_node): the fabric's nodes when they are equal blocks of
/// consecutive GPUs, 0 (one node) without a fabric or when `config` has no table-row-wise
/// table. Throws ShardingError when such tables meet nodes of unequal GPU counts (TorchRec's
/// table-row-wise needs one local size).
uint32_t dlrm_ranks_per_node(const DlrmConfig& config, const WorkloadPlatform& platform);

}  // namespace upsim

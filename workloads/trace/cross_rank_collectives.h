// The NCCL kernels of a Kineto trace set matched across ranks into collective groups (the
// "NCCL kernels are Collective tasks" rule of trace_graph.h), and, for one trace of a larger
// job, the GPUs of a collective's process group.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_graph.h"

namespace upsim {

/// The GPUs (global ranks) of a collective's process group, for a trace of rank `rank` of a job
/// of `world` ranks: the ranks the trace names (Kineto "Process Group Ranks", or c10d's global
/// rank start and stride with the group size), else the whole world when the group size is the
/// world's or unrecorded (`assumed_world` is then set when unrecorded). Empty when the group is
/// smaller than the world and its ranks are not recorded, or when `rank` is not among them.
std::vector<uint32_t> job_collective_members(const std::vector<int64_t>& recorded_ranks,
                                             int64_t group_size, uint32_t rank, uint32_t world,
                                             bool& assumed_world);

}  // namespace upsim

namespace upsim::trace_build {

/// The collective groups of one run: the NCCL kernels of every rank matched by key (process group
/// and sequence number, or their order when a trace records no keys), added to `graph` in the
/// order of their first appearance; one group found in some ranks' traces but not all is an
/// error naming the trace. For one trace of a larger job (`partial_job`), a group spans the job's
/// GPUs with the traced rank simulated and the others mirrored.
struct RankCollectives {
  std::vector<std::vector<CollectiveId>> of;  ///< per rank, per NCCL kernel: its group
  std::vector<std::vector<int64_t>> ps;       ///< its measured duration (the group's shortest)
  std::vector<std::vector<uint8_t>> alone;    ///< whether its group has no other member
  std::vector<uint64_t> over_job;             ///< per rank: groups spanning the larger job
  std::vector<uint64_t> world_assumed;        ///< of those, groups whose members were assumed
  uint32_t groups = 0;
};

/// Matches the NCCL kernels of `timelines` (one per trace of `traces`) across ranks and adds
/// their groups to `graph` (RankCollectives); rank r runs on GPU `device[r]`. When some kernel
/// has no key, every kernel's NcclKernel::key becomes its position on its rank ("#k").
RankCollectives add_cross_rank_collectives(const std::vector<RankTrace>& traces,
                                           std::vector<RankTimeline>& timelines,
                                           const std::vector<RankId>& device, bool partial_job,
                                           const TraceGraphOptions& options, TaskGraph& graph);

}  // namespace upsim::trace_build

// What a Kineto trace says about a collective, as PyTorch and NCCL write it: the NCCL kernel's
// name, the process groups and sequence numbers, and the metadata of record_param_comms that
// Kineto copies onto the kernel (libkineto CollectiveMetadataFields; PyTorch's
// torch/csrc/distributed/c10d ParamCommsUtils). The Kineto trace writer
// (sim/export/kineto_trace_writer.h) states the layout these functions fill.
//
// Contract:
//  - Process groups: the distinct member sets of the graph's collectives (sorted GPU indices),
//    numbered "0", "1", ... in the order of their first collective (CollectiveId order), as
//    c10d numbers the groups a program creates. A collective's sequence number is its ordinal
//    among the collectives of its process group, in CollectiveId order, so every member states
//    the same one.
//  - Element type: a CollectiveDesc states bytes only, so the metadata states dtype "Byte" with
//    one element per byte (u8 in the kernel name): element counts times element size are the
//    bytes exactly.
//  - Deterministic: a function of the graph alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/export/json_members.h"
#include "sim/task_graph.h"

namespace upsim {

struct KinetoProcessGroups {
  /// Per CollectiveId: its process group and its sequence number in that group.
  std::vector<uint32_t> group_of;
  std::vector<uint32_t> seq_of;
  /// Per process group: its GPUs, sorted, and its description (c10d's "default_pg" for the
  /// group of every GPU, else the parallel dimension of its first collective, else
  /// "undefined").
  std::vector<std::vector<RankId>> ranks;
  std::vector<std::string> description;
};

/// The process groups of `graph`'s collectives; `world_size` GPUs in all.
KinetoProcessGroups kineto_process_groups(const TaskGraph& graph, uint32_t world_size);

/// NCCL's kernel name for `collective` (NCCL >= 2.19, src/device/generate.py):
/// "ncclDevKernel_AllReduce_Sum_u8_RING_LL", "ncclDevKernel_ReduceScatter_Sum_u8_RING_LL",
/// "ncclDevKernel_AllGather_RING_LL", "ncclDevKernel_Broadcast_RING_LL", and
/// "ncclDevKernel_SendRecv" for all-to-all and send / receive (ncclSend / ncclRecv in a group).
std::string nccl_kernel_name(const CollectiveDesc& collective);

/// Appends the record_param_comms metadata of collective `id` as GPU `device` (a member) sees
/// it: "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", the split
/// sizes of an uneven all-to-all, "Process Group Name", "Process Group Description", "Process
/// Group Ranks", "Seq", and for a send / receive "Src Rank" and "Dst Rank".
void append_collective_metadata(JsonMembers& args, const TaskGraph& graph, CollectiveId id,
                                RankId device, const KinetoProcessGroups& groups);

}  // namespace upsim

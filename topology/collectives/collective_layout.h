// CollectiveLayout: what the collective planner knows of one member set -- its nodes, the ring
// cycles inside each node, the NICs each member sends through, its latency classes and caps,
// whether NVLS applies -- and the flow structures built for it. Part of the collective planner
// (collective_planner.h); its algorithms read the layout, the planner caches one per member set.
//
// Contract of build_layout:
//  - Nodes are in node-id order; members keep their order inside a node.
//  - Rings follow locality as NCCL's do: each node's members stay contiguous; inside a node with
//    direct GPU-GPU links the rings follow Hamiltonian cycles over them (choose_ring_cycles),
//    otherwise member order.
//  - Each member uses its share of the NICs nearest to it (GPUs under one PCIe switch split that
//    switch's NICs in order); across nodes NCCL runs a channel per (GPU, NIC), so channels =
//    p x NICs per GPU (p: the most members of a node), and at least the ring cycles' count.
//  - NVLS applies when every node holds the same number (>= kNvlsMinGpusPerNode) of members,
//    all attached directly to one NVSwitch over links of a kind listed in
//    CollectiveTuning::nvls_link_prefixes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cost_models.h"
#include "topology/collectives/fabric_paths.h"
#include "topology/collectives/flow_structure.h"
#include "topology/nccl_tuning.h"

namespace upsim::collectives {

/// NCCL leaves NVLS off when the communicator has two or fewer GPUs in the node
/// (NVIDIA/nccl src/transport/nvls.cc, ncclNvlsInit: no NVLS support for gpuCount <= 2, NCCL
/// 2.18.1 to 2.28.6, the versions of the measured sweeps; NCCL 2.28.7 lowered it to
/// gpuCount < 2).
inline constexpr uint32_t kNvlsMinGpusPerNode = 3;

/// What an all-to-all structure is built for: its sizes, or without them the collective's size
/// (bytes / n to every pair).
struct AllToAllKey {
  AllToAllSizes sizes;
  int64_t uniform_bytes = 0;  // CollectiveDesc::bytes when `sizes` is empty, else 0
  bool operator==(const AllToAllKey&) const = default;
};
struct AllToAllKeyHash {
  size_t operator()(const AllToAllKey& k) const {
    return k.sizes.hash() ^ (static_cast<size_t>(k.uniform_bytes) * 0x9e3779b97f4a7c15ULL);
  }
};
// All-to-all structures kept per member set; past this many distinct sizes (a trace replay's
// one-off all-to-allv calls) the cache starts over. Training steps repeat a few: DLRM's forward
// and backward, an MoE layer's dispatch and combine.
constexpr size_t kMaxCachedAllToAlls = 16;

/// Node grouping and topology facts of one member set.
struct CollectiveLayout {
  std::vector<RankId> members;
  std::vector<DeviceIndex> gpu;              // per member index
  std::vector<std::vector<uint32_t>> nodes;  // member indices of each node, nodes by id
  std::vector<uint32_t> node_of;             // node position of each member
  std::vector<uint32_t> local_of;            // position of each member inside its node
  uint32_t max_per_node = 0;
  bool uniform = true;  // every node has max_per_node members
  // Ring cycles of each node (permutations of that node's member indices).
  std::vector<std::vector<std::vector<uint32_t>>> cycles;
  uint32_t channels = 1;
  LinkClass intra_class = LinkClass::kNvlink;  // worst class on intra-node ring arcs
  // Factor on the base and intra-node hop latencies for the GPU generation of the intra-node
  // ring arcs' links (the largest over them; 1 without such links).
  double latency_factor = 1.0;
  // Per protocol, the most payload bytes per second a member injects (0: no cap): within one
  // node CollectiveTuning::single_node_injection_cap_for its ring arcs' link kinds, over
  // several nodes ProtocolTuning::injection_cap.
  std::array<Bandwidth, kCollectiveProtocolCount> injection_cap{};
  LinkClass inter_class = LinkClass::kNet;  // worst class on inter-node routes
  std::array<Duration, kCollectiveProtocolCount> inter_extra{};
  // NICs each member sends and receives through across nodes (its share of the NICs nearest to
  // it; empty on one node or without NICs), and the most any member has.
  std::vector<std::vector<DeviceIndex>> nics_of;
  uint32_t max_nics = 0;
  // NVLS: per member, the NVSwitches it reaches directly and the share of its NVLink bandwidth
  // to each; empty when NVLS does not apply.
  std::vector<std::vector<std::pair<DeviceIndex, double>>> nvls_planes;
  // NVLS efficiency of the NVLS links used (the lowest over their kinds).
  double nvls_efficiency = 1.0;
  // NVLS pipeline fill in bytes (the largest over the NVLS link kinds used).
  double nvls_fill_bytes = 0.0;
  // Cached flow structures per (kind, algorithm); see FlowStructure.
  std::map<std::pair<CollectiveKind, CollectiveAlgorithm>, std::unique_ptr<FlowStructure>>
      structures;
  // Cached all-to-all structures per sizes (at most kMaxCachedAllToAlls).
  std::unordered_map<AllToAllKey, std::unique_ptr<FlowStructure>, AllToAllKeyHash> all_to_alls;

  uint32_t node_count() const { return static_cast<uint32_t>(nodes.size()); }
  size_t size() const { return gpu.size(); }
};

/// The layout of `members` (ranks; member value r runs on fabric.gpus()[r]), see the contract.
/// `members` must have passed CollectivePlanner::check.
std::unique_ptr<CollectiveLayout> build_layout(const std::vector<RankId>& members,
                                               FabricPaths& paths, const CollectiveTuning& tuning);

}  // namespace upsim::collectives

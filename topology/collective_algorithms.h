// Collective algorithms: a CollectiveDesc becomes a batch of concurrent flows on the fabric plus a
// start latency, for each NCCL-like (algorithm, protocol) candidate; the planner predicts every
// candidate's time and keeps the fastest, as NCCL's tuner does, and the flow network then
// simulates that one so that contention with other traffic is real.
//
// Decompositions (n members, S = CollectiveDesc::bytes, N nodes with p members each; every
// algorithm is pipelined, so all its flows run at once and one phase carries the whole volume):
//  - ring all-reduce: reduce-scatter + all-gather around rings; each member sends 2(n-1)/n x S
//    to its ring successor. all-gather: (n-1) x S, reduce-scatter: (n-1)/n x S, broadcast: a
//    chain from members[0] carrying S. Latency 2(n-1) (resp. n-1) NCCL hop latencies.
//  - Rings follow locality as NCCL's do: each node's members stay contiguous; inside a node with
//    direct GPU-GPU links the ring follows a Hamiltonian cycle over them (several cycles, bytes
//    split evenly, when that spreads load better, e.g. all six on a 4-GPU full mesh); nodes
//    reached through a switch keep member order. Across nodes, channel c rotates every node's
//    order by c so that each channel leaves a node through a different GPU and its NIC.
//  - tree all-reduce (NCCL Tree): per channel a chain inside each node and NCCL's double binary
//    tree across node heads; each tree carries S/2 up (reduce) and down (broadcast).
//  - nvls all-reduce (NVLink SHARP, H100 and later): every GPU sends S (1 + 1/p) to its
//    NVSwitch and receives as much (reduce-scatter in the switch, multicast all-gather); across
//    nodes, each GPU all-reduces its S/p shard with the same-local-rank GPUs over double binary
//    trees. Needs one NVSwitch adjacent to all members of each node over links of a kind listed in
//    CollectiveTuning::nvls_link_prefixes.
//  - hierarchical all-reduce: ring reduce-scatter and all-gather inside each node (each member
//    sends 2(p-1)/p x S to its successor), trees across nodes among same-local-rank GPUs for the
//    S/p shards. Not among NCCL's default candidates (NCCL has no such algorithm without SHARP);
//    enable it with CollectiveTuning::all_reduce_algorithms or force it with plan(..., kind).
//  - direct all-to-all: member i sends send_bytes.at(i, j) to member j (S/n to each when
//    send_bytes is empty); send/recv: members[0] sends S to members[1]. Across nodes NCCL's PXN
//    is modelled: i's bytes cross NVLink to the GPU of i's node with j's local rank (the proxy)
//    and leave through the proxy's NIC, so the proxy's flow to j carries every sender of its node.
//    Only pairs with bytes make flows (O(non-zero pairs), e.g. DLRM's outer-product sizes), and
//    the flows of one member set and one set of sizes are built once and reused.
// Member value r runs on fabric.gpus()[r].
//
// Paths (NCCL's channels pin NICs; the fabric's route picks one path per device pair):
//  - Inside a node, paths are the cheapest by the fabric's own link cost (fabric.h), computed
//    here over the node's devices (never through another GPU), so a plan needs no fabric-wide
//    route tables.
//  - Each member uses its share of the NICs nearest to it (GPUs under one PCIe switch split that
//    switch's NICs in order), and channel c of a member uses NIC (c / p) mod its count: across
//    nodes NCCL runs a channel per (GPU, NIC), so channels = p x NICs per GPU.
//  - A flow between nodes leaves through the sender's NIC, enters through the receiver's NIC of
//    the same channel (the same rail), and between two leaves takes their common spines in turn,
//    so the flows of one collective spread evenly over spines (as InfiniBand adaptive routing and
//    NCCL's many channels do); other inter-node flows take Fabric::route.
//
// Pricing of a candidate: launch overhead + NCCL latency formula (tuning.cc ncclTopoTuneModel,
// see latency() in the .cpp) + the bottleneck time max(max over links of wire bytes crossing /
// capacity, max over GPUs of bytes sent / injection cap). Flows carry wire bytes = payload x
// protocol wire factor / algorithm efficiency; a protocol with an injection cap adds one
// virtual link per sending GPU. Tree all-reduce also divides its bytes by NCCL's medium-size
// correction for its size and protocol (treeCorrectionFactor, 0.4 - 1 between 64 B and 256 MiB,
// see the .cpp), and NVLS adds its pipeline fill (CollectiveTuning::nvls_pipeline_fill_mib) to
// its latency.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "sim/cost_models.h"
#include "topology/fabric.h"
#include "topology/flow_network.h"
#include "topology/nccl_tuning.h"

namespace upsim {

/// NVLS over several nodes (NCCL's NVLS_TREE) pipelines two stages, the in-switch reduction /
/// multicast within each node and the network tree between nodes, and the network stage keeps as
/// many bytes in flight as the first (NCCL_STEPS slots of one NVLS chunk per channel, NVIDIA/nccl
/// src/enqueue.cc and src/include/device.h at commit 5067397c): its pipeline fill is this many
/// times CollectiveTuning::nvls_pipeline_fill_mib. The 2x8 H100 InfiniBand sweep of
/// test/data/nccl-tests agrees: from 64 MiB up its time exceeds latency + bytes / plateau rate by
/// the transfer time of about 40 MB (2 x 16 MiB = 33.6 MB); in a refit of the tuning, 2 gives an
/// objective of 0.1169, 3 gives 0.1177 and 4 gives 0.1189.
inline constexpr double kNvlsTreeFillStages = 2.0;

/// One priced candidate.
struct CollectiveChoice {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  CollectiveProtocol protocol = CollectiveProtocol::kSimple;
  /// Start delay of the flows: launch overhead + algorithm / protocol latency.
  Duration latency;
  /// latency + bottleneck transfer time, as the tuner predicts it without other traffic.
  Duration predicted;
};

/// What the flow network runs: flows that start `choice.latency` after the call. A collective
/// that moves nothing (one member, zero bytes) has no flows and zero latency.
struct CollectivePlan {
  CollectiveChoice choice;
  FlowBatch flows;
};

class CollectivePlanner {
 public:
  /// Throws std::invalid_argument for an invalid tuning.
  CollectivePlanner(const Fabric& fabric, CollectiveTuning tuning);
  ~CollectivePlanner();
  CollectivePlanner(const CollectivePlanner&) = delete;
  CollectivePlanner& operator=(const CollectivePlanner&) = delete;

  const CollectiveTuning& tuning() const { return tuning_; }
  /// Efficiency of a fabric link's family (capacity = bandwidth x this).
  double link_efficiency(LinkId link) const { return link_efficiency_[link]; }

  /// Every applicable candidate, priced, in (algorithm, protocol) order.
  std::vector<CollectiveChoice> candidates(const CollectiveDesc& collective);
  /// The fastest candidate and its flows.
  CollectivePlan plan(const CollectiveDesc& collective);
  /// A given candidate. Throws std::invalid_argument when it does not apply (e.g. tree for
  /// all-to-all, NVLS without an NVLS-capable NVSwitch, a protocol that is not enabled).
  CollectivePlan plan(const CollectiveDesc& collective, CollectiveAlgorithm algorithm,
                      CollectiveProtocol protocol);

  /// Throws std::invalid_argument (with a message naming the problem) unless every member is a
  /// GPU of the fabric, members are distinct, sizes are non-negative and send_bytes is over n
  /// members or empty (all-to-all) and send/recv has two members.
  void check(const CollectiveDesc& collective) const;

  /// The ring cycles (member indices) of the first node of a member set; on one node, one per
  /// channel. Exposed for tests.
  std::vector<std::vector<uint32_t>> ring_cycles(const std::vector<RankId>& members);

 private:
  struct Layout;
  struct Candidate;
  /// Cheapest paths from one GPU to every device of its node, never through another GPU and
  /// never leaving the node, by the fabric's own link cost (fabric.h: latency + the time to
  /// move kRouteReferenceBytes); equal-cost ties go to the lower link id.
  struct LocalTree {
    std::vector<LinkId> via;  // per node position: the link that reaches it (none: unreached)
  };
  const LocalTree& local_tree(DeviceIndex gpu);
  /// Links from one device to another: inside a node (one end a GPU) the cheapest node-local
  /// path by the fabric's cost, computed here; otherwise Fabric::route.
  std::vector<LinkId> direct_path(DeviceIndex from, DeviceIndex to);
  /// direct_path, except between two GPUs of one node whose direct path leaves NVLink: then
  /// through the intermediate GPU NVLink joins to both, when there is one (NCCL's PATH_NVB).
  std::vector<LinkId> path(DeviceIndex from, DeviceIndex to);
  bool all_nvlink(std::span<const LinkId> links) const;
  /// The NICs of `gpu`'s node nearest to it (fewest hops, then least latency), in device
  /// order; empty when its node has none.
  std::vector<DeviceIndex> nearest_nics(DeviceIndex gpu);
  /// The NICs `gpu` sends through when every GPU of its node uses the network: GPUs with the
  /// same nearest NICs split them in order (GPU i of a DGX gets NIC i), whatever the group, as
  /// NCCL's point-to-point does. Empty when its node has no NIC.
  const std::vector<DeviceIndex>& own_nics(DeviceIndex gpu);
  Layout& layout(const std::vector<RankId>& members);
  std::vector<Candidate> build(const CollectiveDesc& collective, Layout& layout,
                               std::optional<CollectiveAlgorithm> only);
  CollectivePlan plan_impl(const CollectiveDesc& collective,
                           std::optional<CollectiveAlgorithm> algorithm,
                           std::optional<CollectiveProtocol> protocol);

  const Fabric& fabric_;
  CollectiveTuning tuning_;
  std::vector<double> link_efficiency_;
  std::vector<double> link_capacity_;  // bytes/s, bandwidth x efficiency
  std::vector<const LinkFamily*> link_family_;
  std::vector<std::vector<LinkId>> in_links_;  // per device, the links that end there
  std::vector<int64_t> route_cost_ps_;         // per link, the fabric's routing cost
  std::map<int32_t, std::vector<DeviceIndex>> node_devices_;  // devices of each node id
  std::vector<uint32_t> node_position_;  // position of a device in its node's list
  std::map<DeviceIndex, LocalTree> local_trees_;
  /// path()'s NVLink relays per (from, to); empty: none (the direct path is used).
  std::map<std::pair<DeviceIndex, DeviceIndex>, std::vector<LinkId>> relays_;
  std::map<DeviceIndex, std::vector<DeviceIndex>> own_nics_;  // per GPU, see own_nics()
  // Per member set: node grouping, ring cycles, NVLS switches, latency classes. Member sets of a
  // training job are few; their analysis is reused by every call.
  std::map<std::vector<RankId>, std::unique_ptr<Layout>> layouts_;
};

}  // namespace upsim

// CollectivePlanner: a CollectiveDesc becomes a batch of concurrent flows on the fabric plus a
// start latency, for each NCCL-like (algorithm, protocol) candidate; the planner predicts every
// candidate's time and keeps the fastest, as NCCL's tuner does, and the flow network then
// simulates that one so that contention with other traffic is real.
//
// The parts, one concern per file of topology/collectives/:
//  - fabric_paths.h: the paths NCCL's channels take (node-local cheapest paths, NVLink relays,
//    each GPU's NICs) and the links' capacities.
//  - collective_layout.h: one member set's nodes, ring cycles (ring_cycles.h), NICs, channels,
//    latency classes, injection caps and NVLS planes, with its cached flow structures.
//  - flow_structure.h, channel_flows.h: flows per byte of the size, merged and routed.
//  - algorithm.h: the interface of an algorithm family; ring.cpp, tree.cpp, nvls.cpp,
//    hierarchical.cpp, direct.cpp (send/recv and all-to-all) each hold one, with its
//    decomposition and NCCL's latency formula; algorithm_registry.cpp finds them.
// Every algorithm is pipelined, so all its flows run at once and one phase carries the whole
// volume. Member value r runs on fabric.gpus()[r].
//
// Pricing of a candidate: launch overhead + NCCL latency formula (tuning.cc ncclTopoTuneModel,
// in each algorithm's file) + the bottleneck time max(max over links of wire bytes crossing /
// capacity, max over GPUs of bytes sent / injection cap). Flows carry wire bytes = payload x
// protocol wire factor / algorithm efficiency; a protocol with an injection cap adds one
// virtual link per sending GPU. An algorithm may divide its bytes by the fraction of its rate it
// reaches at the size (tree all-reduce: NCCL's medium-size correction, 0.4 - 1 between 64 B and
// 256 MiB) and add a pipeline fill to its latency (NVLS: CollectiveTuning::nvls_pipeline_fill_mib).
// Candidates are the algorithms CollectiveTuning::all_reduce_algorithms lists for an
// all-reduce, ring for all-gather / reduce-scatter / broadcast, direct for all-to-all and
// send/recv, each with every enabled protocol it runs, in (algorithm, protocol) order.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "sim/cost_models.h"
#include "topology/collectives/fabric_paths.h"
#include "topology/collectives/flow_batch.h"
#include "topology/fabric.h"
#include "topology/nccl_tuning.h"

namespace upsim {

namespace collectives {
struct CollectiveLayout;
}

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
  double link_efficiency(LinkId link) const { return paths_.link_efficiency(link); }

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
  struct Candidate;
  collectives::CollectiveLayout& layout(const std::vector<RankId>& members);
  std::vector<Candidate> build(const CollectiveDesc& collective,
                               collectives::CollectiveLayout& layout,
                               std::optional<CollectiveAlgorithm> only);
  CollectivePlan plan_impl(const CollectiveDesc& collective,
                           std::optional<CollectiveAlgorithm> algorithm,
                           std::optional<CollectiveProtocol> protocol);

  const Fabric& fabric_;
  CollectiveTuning tuning_;
  collectives::FabricPaths paths_;
  // Per member set: node grouping, ring cycles, NVLS switches, latency classes. Member sets of a
  // training job are few; their analysis is reused by every call.
  std::map<std::vector<RankId>, std::unique_ptr<collectives::CollectiveLayout>> layouts_;
};

}  // namespace upsim

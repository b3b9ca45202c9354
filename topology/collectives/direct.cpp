// Direct: send/recv (members[0] sends S to members[1]) and the direct all-to-all (member i sends
// send_bytes.at(i, j) to member j; S/n to each when send_bytes is empty). Across nodes NCCL's PXN
// is modelled: i's bytes cross NVLink to the GPU of i's node with j's local rank (the proxy) and
// leave through the proxy's NIC, so the proxy's flow to j carries every sender of its node. Only
// pairs with bytes make flows (O(non-zero pairs), e.g. DLRM's outer-product sizes), and the
// flows of one member set and one set of sizes are built once and reused.
#include <stdexcept>

#include "topology/collectives/algorithm.h"

namespace upsim::collectives {
namespace {

/// The direct all-to-all for the collective's sizes: flows with payload bytes (scale 1), only
/// those that carry bytes. Within a node each pair is one flow. Across nodes NCCL's PXN
/// forwards over NVLink to the sender-node GPU with the receiver's local rank (the proxy),
/// which sends through its own NIC, so inter-node traffic stays rail-matched; the proxy's flow
/// to a receiver carries the bytes of every sender of its node. Flows with the same path
/// description merge, their bytes adding up in row-major pair order.
///
/// Flow order: as if every pair (i, j), i != j, were visited row-major, each adding its direct
/// or forwarding flow (slot 0) and then its proxy flow (slot 1), zero-byte pairs included:
/// every flow is sorted by its first appearance (i n + j, slot), computed in O(1) per flow, so
/// the plan does not depend on which pairs carry bytes. Only the spines may differ from such a
/// visit: FlowCollector::network_path spreads the flows between two different leaves over
/// their spines in routing order, and only flows that carry bytes are routed here, so where
/// flows cross leaves (fabrics with several leaf groups, or members not in rank order, whose
/// proxies sit on another rail than the receiver) a flow may take another spine than it would
/// if zero-byte pairs took their turns. Adaptive routing spreads the traffic that exists, so
/// this is the more physical choice. Cached per set of sizes in the layout.
const FlowStructure* all_to_all_structure(const CollectiveDesc& c, CollectiveLayout& lay,
                                          FabricPaths& paths) {
  const uint32_t n = static_cast<uint32_t>(lay.size());
  const uint32_t nodes = lay.node_count();
  const uint32_t p = lay.max_per_node;
  const double nd = static_cast<double>(n);
  const auto& gpu = lay.gpu;
  AllToAllKey key{c.send_bytes, c.send_bytes.empty() ? c.bytes : 0};
  auto found = lay.all_to_alls.find(key);
  if (found != lay.all_to_alls.end()) return found->second.get();
  if (lay.all_to_alls.size() >= kMaxCachedAllToAlls) lay.all_to_alls.clear();

  const bool pxn = nodes > 1 && lay.uniform && lay.max_nics > 0;
  // Per local rank k: the lowest member index with local rank k, and the lowest with local
  // rank k on another node than that one. first_elsewhere(v, k) is then the lowest member
  // index with local rank k outside node v.
  std::vector<uint32_t> lowest(pxn ? p : 0, kNone);
  std::vector<uint32_t> second(pxn ? p : 0, kNone);
  for (uint32_t m = 0; pxn && m < n; ++m) {
    const uint32_t k = lay.local_of[m];
    if (lowest[k] == kNone) {
      lowest[k] = m;
    } else if (second[k] == kNone && lay.node_of[m] != lay.node_of[lowest[k]]) {
      second[k] = m;
    }
  }
  auto first_elsewhere = [&](uint32_t v, uint32_t k) {
    return lay.node_of[lowest[k]] != v ? lowest[k] : second[k];
  };
  // First appearance of pair (i, j), slot s.
  auto order = [n](uint64_t i, uint64_t j, uint64_t slot) { return (i * n + j) * 2 + slot; };

  FlowCollector fc;
  auto add_pair = [&](uint32_t i, uint32_t j, double b) {
    const uint32_t v = lay.node_of[i];
    const uint32_t proxy = pxn ? lay.nodes[v][lay.local_of[j]] : kNone;
    if (!pxn || v == lay.node_of[j] || lay.nics_of[proxy].empty()) {
      uint64_t first = order(i, j, 0);
      // On one node, i -> j is also the NVLink segment of i's PXN pairs to j's local rank on
      // other nodes, which j forwards; the first of those is (i, first_elsewhere).
      if (pxn && v == lay.node_of[j] && !lay.nics_of[j].empty()) {
        const uint32_t other = first_elsewhere(v, lay.local_of[j]);
        if (other != kNone) first = std::min(first, order(i, other, 0));
      }
      fc.add(gpu[i], gpu[j], b, i, first);
      return;
    }
    if (proxy != i) {
      // The segment i -> proxy is also the direct pair (i, proxy) on i's node.
      fc.add(gpu[i], gpu[proxy], b, i,
             std::min(order(i, proxy, 0), order(i, first_elsewhere(v, lay.local_of[j]), 0)));
    }
    // Every sender of node v reaches j through this proxy; the lowest member of v first.
    const auto& nics = lay.nics_of[proxy];
    const auto& entry = lay.nics_of[j];
    fc.add_via(gpu[proxy], gpu[j], nics[lay.node_of[j] % nics.size()],
               entry.empty() ? kNone : entry[v % entry.size()], b, proxy,
               order(lay.nodes[v].front(), j, 1));
  };
  if (c.send_bytes.empty()) {
    const double b = static_cast<double>(c.bytes) / nd;
    fc.reserve(pxn ? static_cast<size_t>(n) * (p + nodes) : static_cast<size_t>(n) * n);
    for (uint32_t i = 0; i < n; ++i) {
      for (uint32_t j = 0; j < n; ++j) {
        if (i != j) add_pair(i, j, b);
      }
    }
  } else {
    c.send_bytes.for_each_nonzero([&](size_t i, size_t j, int64_t bytes) {
      add_pair(static_cast<uint32_t>(i), static_cast<uint32_t>(j), static_cast<double>(bytes));
    });
  }
  fc.sort_by_order();
  auto s = std::make_unique<FlowStructure>(fc.route(paths, n));
  return lay.all_to_alls.emplace(std::move(key), std::move(s)).first->second.get();
}

class Direct final : public Algorithm {
 public:
  CollectiveAlgorithm id() const override { return CollectiveAlgorithm::kDirect; }

  BuiltStructure structure(const CollectiveDesc& collective, CollectiveLayout& layout,
                           FabricPaths& paths, const CollectiveTuning& tuning) const override {
    if (collective.kind == CollectiveKind::kAllToAll)
      return {all_to_all_structure(collective, layout, paths), false};
    return Algorithm::structure(collective, layout, paths, tuning);
  }

  Duration latency(CollectiveKind /*kind*/, const LatencyTerms& t) const override {
    const bool across = t.nodes() > 1;
    const LinkClass cls = across ? t.layout.inter_class : t.layout.intra_class;
    return across ? t.generation(t.base(LatencyColumn::kRing)) + t.hop(cls, LatencyColumn::kRing) +
                        t.inter_extra()
                  : t.generation(t.base(LatencyColumn::kRing) + t.hop(cls, LatencyColumn::kRing));
  }

 protected:
  void add_flows(CollectiveKind kind, const CollectiveTuning& /*tuning*/, FabricPaths& paths,
                 ChannelFlows& flows) const override {
    if (kind != CollectiveKind::kSendRecv)
      throw std::logic_error("collective planner: all-to-all structures are built per sizes");
    const CollectiveLayout& lay = flows.layout();
    // Across nodes NCCL's p2p leaves through the sender's NIC and enters through the receiver's
    // (the same rail when both have the same local rank): the planner's leaf [-> spine] -> leaf
    // path, with no whole-fabric search per receiver, which would dominate pipeline-parallel runs
    // on thousands of GPUs.
    const std::vector<DeviceIndex>& out = paths.own_nics(lay.gpu[0]);
    const std::vector<DeviceIndex>& in = paths.own_nics(lay.gpu[1]);
    if (lay.node_count() > 1 && !out.empty() && !in.empty()) {
      flows.flows().add_via(lay.gpu[0], lay.gpu[1], out.front(), in.front(), 1.0, 0);
    } else {
      flows.flows().add(lay.gpu[0], lay.gpu[1], 1.0, 0);
    }
  }
};

}  // namespace

const Algorithm& direct_algorithm() {
  static const Direct direct;
  return direct;
}

}  // namespace upsim::collectives

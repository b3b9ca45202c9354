// Ring: reduce-scatter + all-gather around rings; each member sends 2(n-1)/n x S to its ring
// successor for an all-reduce, (n-1) x S for an all-gather, (n-1)/n x S for a reduce-scatter,
// and a broadcast is a chain from members[0] carrying S. Latency 2(n-1) (resp. n-1) NCCL hop
// latencies. Rings follow the layout's cycles (collective_layout.h); across nodes, channel c
// rotates every node's order by c so that each channel leaves a node through a different GPU
// and its NIC.
#include "topology/collectives/algorithm.h"

namespace upsim::collectives {
namespace {

class Ring final : public Algorithm {
 public:
  CollectiveAlgorithm id() const override { return CollectiveAlgorithm::kRing; }

  Duration latency(CollectiveKind kind, const LatencyTerms& t) const override {
    const uint32_t n = t.members();
    const uint32_t nodes = t.nodes();
    const auto steps = [](uint32_t k) { return static_cast<int64_t>(k); };
    uint32_t nsteps = n - 1;
    uint32_t inter_steps = nodes - 1;
    if (kind == CollectiveKind::kAllReduce) {
      nsteps = 2 * (n - 1);
      inter_steps = 2 * (nodes - 1);
    }
    Duration intra = t.generation(t.hop(t.layout.intra_class, LatencyColumn::kRing));
    if (nodes > 1) {
      // Inter-node rings still pay the network post overhead (the proxy's, not the GPU
      // generation's) on every step.
      const Duration overhead =
          t.tuning.net_overhead * (t.protocol == CollectiveProtocol::kSimple ? 3 : 1);
      intra = max(intra, overhead);
    }
    const Duration inter = t.hop(t.layout.inter_class, LatencyColumn::kRing) + t.inter_extra();
    return t.generation(t.base(LatencyColumn::kRing)) + intra * steps(nsteps - inter_steps) +
           inter * steps(inter_steps);
  }

 protected:
  void add_flows(CollectiveKind kind, const CollectiveTuning& /*tuning*/, FabricPaths& /*paths*/,
                 ChannelFlows& flows) const override {
    const CollectiveLayout& lay = flows.layout();
    const uint32_t n = static_cast<uint32_t>(lay.size());
    const double nd = static_cast<double>(n);
    const double per_channel = 1.0 / lay.channels;
    double per_arc = 0.0;
    switch (kind) {
      case CollectiveKind::kAllReduce:
        per_arc = 2.0 * (nd - 1.0) / nd;
        break;
      case CollectiveKind::kAllGather:
        per_arc = nd - 1.0;
        break;
      case CollectiveKind::kReduceScatter:
        per_arc = (nd - 1.0) / nd;
        break;
      case CollectiveKind::kBroadcast:
        per_arc = 1.0;
        break;
      default:
        break;
    }
    for (uint32_t ch = 0; ch < lay.channels; ++ch) {
      const auto ring = flows.ring_for_channel(ch);
      for (uint32_t j = 0; j < n; ++j) {
        const uint32_t from = ring[j];
        const uint32_t to = ring[(j + 1) % n];
        // A broadcast is the ring cut before the root (member 0): a pipelined chain.
        if (kind == CollectiveKind::kBroadcast && to == 0) continue;
        if (lay.node_of[from] != lay.node_of[to]) {
          flows.add_across(from, to, ch, per_arc * per_channel);
        } else {
          flows.add(from, to, per_arc * per_channel);
        }
      }
    }
  }
};

}  // namespace

const Algorithm& ring_algorithm() {
  static const Ring ring;
  return ring;
}

}  // namespace upsim::collectives

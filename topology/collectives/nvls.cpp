// NVLS (NVLink SHARP, H100 and later) all-reduce: every GPU sends S (1 + 1/p) to its NVSwitch
// and receives as much (reduce-scatter in the switch, multicast all-gather); across nodes
// (NCCL's NVLS_TREE), each GPU all-reduces its S/p shard with the same-local-rank GPUs over
// double binary trees. Needs one NVSwitch adjacent to all members of each node over links of a
// kind listed in CollectiveTuning::nvls_link_prefixes (collective_layout.h); Simple protocol
// only. Until its pipeline is full, the bytes of the fill cost their transfer time twice.
#include "topology/collectives/algorithm.h"

namespace upsim::collectives {
namespace {

class Nvls final : public Algorithm {
 public:
  CollectiveAlgorithm id() const override { return CollectiveAlgorithm::kNvls; }

  std::string unavailable(const CollectiveLayout& layout) const override {
    if (layout.nvls_planes.empty())
      return "needs every node's members attached to one NVSwitch over NVLS-capable links";
    return {};
  }

  bool runs(CollectiveProtocol protocol) const override {
    return protocol == CollectiveProtocol::kSimple;
  }

  Duration latency(CollectiveKind /*kind*/, const LatencyTerms& t) const override {
    Duration lat = t.generation(t.hop(LinkClass::kNvlink, LatencyColumn::kNvls));
    if (t.nodes() > 1) {
      const Duration inter = t.hop(t.layout.inter_class, LatencyColumn::kNvls) + t.inter_extra();
      lat += Duration::from_seconds_f(inter.seconds() * 2.0 * t.log_nodes());
    }
    return lat;
  }

  double pipeline_fill_bytes(const CollectiveLayout& layout) const override {
    return layout.nvls_fill_bytes * (layout.node_count() == 1 ? 1.0 : kNvlsTreeFillStages);
  }

 protected:
  void add_flows(CollectiveKind /*kind*/, const CollectiveTuning& /*tuning*/,
                 FabricPaths& /*paths*/, ChannelFlows& flows) const override {
    const CollectiveLayout& lay = flows.layout();
    const uint32_t n = static_cast<uint32_t>(lay.size());
    const uint32_t p = lay.max_per_node;
    const double pd = static_cast<double>(p);
    const double volume = (1.0 + 1.0 / pd) / lay.nvls_efficiency;
    for (uint32_t i = 0; i < n; ++i) {
      for (const auto& [sw, share] : lay.nvls_planes[i]) {
        flows.flows().add(lay.gpu[i], sw, volume * share, i);
        flows.flows().add(sw, lay.gpu[i], volume * share, kNone);
      }
    }
    for (uint32_t k = 0; k < p && lay.node_count() > 1; ++k)
      flows.inter_trees([&lay, k](uint32_t v) { return lay.nodes[v][k]; }, 1.0 / (2.0 * pd));
  }
};

}  // namespace

const Algorithm& nvls_algorithm() {
  static const Nvls nvls;
  return nvls;
}

}  // namespace upsim::collectives

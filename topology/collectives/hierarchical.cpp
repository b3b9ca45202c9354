// Hierarchical all-reduce: ring reduce-scatter and all-gather inside each node (each member
// sends 2(p-1)/p x S to its successor), trees across nodes among same-local-rank GPUs for the
// S/p shards. Not among NCCL's default candidates (NCCL has no such algorithm without SHARP);
// CollectiveTuning::all_reduce_algorithms enables it, CollectivePlanner::plan(..., kind) forces
// it. Needs several nodes with the same number (>= 2) of members each.
#include "topology/collectives/algorithm.h"

namespace upsim::collectives {
namespace {

class Hierarchical final : public Algorithm {
 public:
  CollectiveAlgorithm id() const override { return CollectiveAlgorithm::kHierarchical; }

  std::string unavailable(const CollectiveLayout& layout) const override {
    if (!layout.uniform || layout.node_count() < 2 || layout.max_per_node < 2)
      return "needs several nodes with the same number (>= 2) of members each";
    return {};
  }

  Duration latency(CollectiveKind /*kind*/, const LatencyTerms& t) const override {
    const auto steps = [](uint32_t k) { return static_cast<int64_t>(k); };
    const Duration intra = t.hop(t.layout.intra_class, LatencyColumn::kRing);
    const Duration inter = t.hop(t.layout.inter_class, LatencyColumn::kTree) + t.inter_extra();
    return t.generation(t.base(LatencyColumn::kRing) + intra * steps(2 * (t.per_node() - 1))) +
           Duration::from_seconds_f(inter.seconds() * 2.0 * t.log_nodes());
  }

 protected:
  void add_flows(CollectiveKind /*kind*/, const CollectiveTuning& /*tuning*/,
                 FabricPaths& /*paths*/, ChannelFlows& flows) const override {
    const CollectiveLayout& lay = flows.layout();
    const uint32_t p = lay.max_per_node;
    const double pd = static_cast<double>(p);
    for (const auto& node_cycles : lay.cycles) {
      const double per_cycle = 1.0 / static_cast<double>(node_cycles.size());
      for (const auto& cyc : node_cycles) {
        for (size_t j = 0; cyc.size() > 1 && j < cyc.size(); ++j)
          flows.add(cyc[j], cyc[(j + 1) % cyc.size()], 2.0 * (pd - 1.0) / pd * per_cycle);
      }
    }
    for (uint32_t k = 0; k < p; ++k)
      flows.inter_trees([&lay, k](uint32_t v) { return lay.nodes[v][k]; }, 1.0 / (2.0 * pd));
  }
};

}  // namespace

const Algorithm& hierarchical_algorithm() {
  static const Hierarchical hierarchical;
  return hierarchical;
}

}  // namespace upsim::collectives

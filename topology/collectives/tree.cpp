// Tree (NCCL Tree) all-reduce: per channel a chain inside each node and NCCL's double binary
// tree across node heads; each tree carries S/2 up (reduce) and down (broadcast). Its bytes move
// at NCCL's medium-size correction of its rate (treeCorrectionFactor, below).
#include <array>
#include <bit>

#include "topology/collectives/algorithm.h"

namespace upsim::collectives {
namespace {

/// NCCL's bandwidth correction of tree all-reduce at medium sizes, per protocol (LL, LL128,
/// Simple) and log2(bytes / 64) for 64 B .. 256 MiB: "Trees are not perfectly sticking to the
/// model for medium sizes. Applying a static correction factor is not ideal but works quite
/// well." (NVIDIA/nccl src/graph/tuning.cc treeCorrectionFactor, applied in
/// ncclTopoGetAlgoTime to Tree all-reduce for log sizes 0 .. 22; commit 5067397c).
constexpr std::array<std::array<double, 24>, kCollectiveProtocolCount> kTreeCorrection{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
     .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}};
constexpr int kTreeCorrectionLogSizes = 23;

/// kTreeCorrection for an all-reduce of `bytes` with `protocol` (1 outside 64 B .. 256 MiB).
double tree_correction(CollectiveProtocol protocol, int64_t bytes) {
  if (bytes < 64) return 1.0;
  const int log_size = std::bit_width(static_cast<uint64_t>(bytes >> 6)) - 1;
  if (log_size >= kTreeCorrectionLogSizes) return 1.0;
  return kTreeCorrection[static_cast<size_t>(protocol)][static_cast<size_t>(log_size)];
}

class Tree final : public Algorithm {
 public:
  CollectiveAlgorithm id() const override { return CollectiveAlgorithm::kTree; }

  Duration latency(CollectiveKind /*kind*/, const LatencyTerms& t) const override {
    const auto steps = [](uint32_t k) { return static_cast<int64_t>(k); };
    const Duration intra = t.hop(t.layout.intra_class, LatencyColumn::kTree);
    const Duration inter = t.hop(t.layout.inter_class, LatencyColumn::kTree) + t.inter_extra();
    return t.generation(t.base(LatencyColumn::kTree) + intra * steps(t.per_node() - 1) * 2) +
           Duration::from_seconds_f(inter.seconds() * t.log_nodes()) * 2;
  }

  double rate_fraction(CollectiveKind kind, CollectiveProtocol protocol,
                       int64_t bytes) const override {
    return kind == CollectiveKind::kAllReduce ? tree_correction(protocol, bytes) : 1.0;
  }

 protected:
  void add_flows(CollectiveKind /*kind*/, const CollectiveTuning& tuning, FabricPaths& /*paths*/,
                 ChannelFlows& flows) const override {
    const CollectiveLayout& lay = flows.layout();
    const uint32_t nodes = lay.node_count();
    const double per_channel = 1.0 / lay.channels;
    const double eff = tuning.tree_efficiency;
    const auto trees = double_binary_tree(nodes);
    for (uint32_t ch = 0; ch < lay.channels; ++ch) {
      // Every node's chain starts at the same local rank, so tree edges between node heads
      // stay on one rail.
      std::vector<std::vector<uint32_t>> chains;
      for (const auto& node_cycles : lay.cycles)
        chains.push_back(channel_order(node_cycles, ch, nodes > 1 ? ch : 0));
      // Both trees of the channel share the chain: S/C up and S/C down on each chain arc.
      for (const auto& chain : chains) {
        for (size_t j = 0; j + 1 < chain.size(); ++j) {
          flows.add(chain[j + 1], chain[j], per_channel / eff);
          flows.add(chain[j], chain[j + 1], per_channel / eff);
        }
      }
      for (const auto& parent : trees) {
        for (uint32_t v = 0; v < nodes; ++v) {
          if (parent[v] == kNone) continue;
          const uint32_t child = chains[v].front();
          const uint32_t up = chains[parent[v]].front();
          flows.add_across(child, up, ch, per_channel / 2.0 / eff);
          flows.add_across(up, child, ch, per_channel / 2.0 / eff);
        }
      }
    }
  }
};

}  // namespace

const Algorithm& tree_algorithm() {
  static const Tree tree;
  return tree;
}

}  // namespace upsim::collectives

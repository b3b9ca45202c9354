// What every collective algorithm family shares (algorithm.h): the latency terms and the default
// structure, built from add_flows and cached per (kind, algorithm) in the layout.
#include "topology/collectives/algorithm.h"

#include <memory>
#include <utility>

namespace upsim::collectives {

double LatencyTerms::log_nodes() const {
  uint32_t v = nodes();
  uint32_t r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return static_cast<double>(r);
}

BuiltStructure Algorithm::structure(const CollectiveDesc& collective, CollectiveLayout& layout,
                                    FabricPaths& paths, const CollectiveTuning& tuning) const {
  const auto key = std::make_pair(collective.kind, id());
  auto it = layout.structures.find(key);
  if (it != layout.structures.end()) return {it->second.get(), true};
  FlowCollector collector;
  ChannelFlows flows(layout, collector);
  add_flows(collective.kind, tuning, paths, flows);
  auto built = std::make_unique<FlowStructure>(collector.route(paths, layout.size()));
  return {layout.structures.emplace(key, std::move(built)).first->second.get(), true};
}

}  // namespace upsim::collectives

#include "topology/collectives/flow_structure.h"

#include <algorithm>

namespace upsim::collectives {

FlowStructure FlowCollector::route(FabricPaths& paths, size_t members) {
  const Fabric& fabric = paths.fabric();
  const auto in_links = paths.in_links();
  const auto capacity = paths.link_capacity();
  auto path = [&paths](DeviceIndex from, DeviceIndex to) { return paths.path(from, to); };
  FlowStructure s;
  // Load of each link the structure uses (sparse: a structure touches few of a large
  // fabric's links).
  std::unordered_map<LinkId, double> link_load;
  std::vector<double> source_load(members, 0.0);
  std::vector<LinkId> r;
  auto append = [&r](const std::vector<LinkId>& part) {
    r.insert(r.end(), part.begin(), part.end());
  };
  s.offsets.reserve(items_.size() + 1);
  for (const Item& item : items_) {
    r.clear();
    if (item.key.nic == kNone) {
      append(path(item.key.src, item.key.dst));
    } else {
      append(path(item.key.src, item.key.nic));
      if (!network_path(fabric, in_links, item.key.nic, item.key.nic_dst, r)) {
        append(fabric.route(item.key.nic, item.key.dst));
      } else {
        append(path(item.key.nic_dst, item.key.dst));
      }
    }
    s.links.insert(s.links.end(), r.begin(), r.end());
    s.offsets.push_back(static_cast<uint32_t>(s.links.size()));
    s.unit_bytes.push_back(item.unit_bytes);
    s.source.push_back(item.source);
    for (LinkId l : r)
      link_load[l] += item.unit_bytes;
    if (item.source != kNone) source_load[item.source] += item.unit_bytes;
  }
  for (const auto& [l, load] : link_load) {
    if (load > 0.0) s.unit_link_seconds = std::max(s.unit_link_seconds, load / capacity[l]);
  }
  for (double b : source_load)
    s.unit_source_bytes = std::max(s.unit_source_bytes, b);
  return s;
}

bool FlowCollector::network_path(const Fabric& fabric,
                                 std::span<const std::vector<LinkId>> in_links, DeviceIndex from,
                                 DeviceIndex to, std::vector<LinkId>& route) {
  if (to == kNone) return false;
  auto is_switch = [&](DeviceIndex d) {
    return fabric.device(d).kind == DeviceKind::kNetworkSwitch;
  };
  // A NIC's links from switches; their reverses lead up.
  auto attach = [&](DeviceIndex nic) -> LinkId {
    for (LinkId l : in_links[nic]) {
      if (is_switch(fabric.link(l).from)) return l;
    }
    return kNone;
  };
  const LinkId down_from = attach(from);
  const LinkId down_to = attach(to);
  if (down_from == kNone || down_to == kNone) return false;
  const DeviceIndex leaf_from = fabric.link(down_from).from;
  const DeviceIndex leaf_to = fabric.link(down_to).from;
  if (leaf_from == leaf_to) {
    route.push_back(fabric.link(down_from).reverse);
    route.push_back(down_to);
    return true;
  }
  const uint64_t pair = (uint64_t{leaf_from} << 32) | leaf_to;
  auto [it, inserted] = spines_.try_emplace(pair);
  Spines& sp = it->second;
  if (inserted) {
    for (LinkId in : in_links[leaf_from]) {
      const DeviceIndex spine = fabric.link(in).from;
      if (!is_switch(spine) || spine == leaf_to) continue;
      for (LinkId to_leaf : in_links[leaf_to]) {
        if (fabric.link(to_leaf).from == spine)
          sp.steps.emplace_back(fabric.link(in).reverse, to_leaf);
      }
    }
  }
  if (sp.steps.empty()) return false;
  const auto& step = sp.steps[sp.next++ % sp.steps.size()];
  route.push_back(fabric.link(down_from).reverse);
  route.push_back(step.first);
  route.push_back(step.second);
  route.push_back(down_to);
  return true;
}

}  // namespace upsim::collectives

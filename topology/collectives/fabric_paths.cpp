#include "topology/collectives/fabric_paths.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace upsim::collectives {

std::vector<DeviceIndex> share_of(const std::vector<DeviceIndex>& nics, size_t j, size_t m) {
  std::vector<DeviceIndex> mine;
  const size_t k = nics.size();
  const size_t begin = j * k / m;
  const size_t end = std::max(begin + 1, (j + 1) * k / m);
  for (size_t x = begin; x < end && x < k; ++x)
    mine.push_back(nics[x]);
  return mine;
}

FabricPaths::FabricPaths(const Fabric& fabric, const CollectiveTuning& tuning) : fabric_(fabric) {
  const auto links = fabric_.links();
  link_efficiency_.resize(links.size());
  link_capacity_.resize(links.size());
  link_family_.resize(links.size());
  for (LinkId l = 0; l < links.size(); ++l) {
    const LinkFamily& f = tuning.family_of(links[l].kind);
    link_family_[l] = &f;
    link_efficiency_[l] = tuning.link_efficiency(links[l].kind);
    link_capacity_[l] = links[l].bandwidth.bytes_per_second() * link_efficiency_[l];
  }
  in_links_.resize(fabric_.devices().size());
  route_cost_ps_.resize(links.size());
  for (LinkId l = 0; l < links.size(); ++l) {
    in_links_[links[l].to].push_back(l);
    route_cost_ps_[l] = route_cost_ps(links[l]);  // the fabric's own routing cost
  }
  node_position_.resize(fabric_.devices().size(), kNone);
  for (DeviceIndex d = 0; d < fabric_.devices().size(); ++d) {
    auto& list = node_devices_[fabric_.device(d).node];
    node_position_[d] = static_cast<uint32_t>(list.size());
    list.push_back(d);
  }
}

const FabricPaths::LocalTree& FabricPaths::local_tree(DeviceIndex gpu) {
  auto found = local_trees_.find(gpu);
  if (found != local_trees_.end()) return found->second;
  const auto links = fabric_.links();
  const int32_t node = fabric_.device(gpu).node;
  const std::vector<DeviceIndex>& members = node_devices_.at(node);
  LocalTree tree;
  tree.via.assign(members.size(), kNone);
  std::vector<int64_t> cost(members.size(), std::numeric_limits<int64_t>::max());
  using Entry = std::pair<int64_t, uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  cost[node_position_[gpu]] = 0;
  queue.emplace(0, node_position_[gpu]);
  while (!queue.empty()) {
    const auto [c, at] = queue.top();
    queue.pop();
    if (c != cost[at]) continue;
    const DeviceIndex d = members[at];
    // Other GPUs are endpoints only.
    if (d != gpu && fabric_.device(d).kind == DeviceKind::kGpu) continue;
    for (LinkId in : in_links_[d]) {
      const LinkId out = links[in].reverse;  // d -> neighbour
      const DeviceIndex to = links[out].to;
      if (fabric_.device(to).node != node) continue;
      const int64_t next = c + route_cost_ps_[out];
      const uint32_t pos = node_position_[to];
      if (next < cost[pos] || (next == cost[pos] && out < tree.via[pos])) {
        const bool improved = next < cost[pos];
        cost[pos] = next;
        tree.via[pos] = out;
        if (improved) queue.emplace(next, pos);
      }
    }
  }
  return local_trees_.emplace(gpu, std::move(tree)).first->second;
}

bool FabricPaths::all_nvlink(std::span<const LinkId> links) const {
  return std::all_of(links.begin(), links.end(),
                     [&](LinkId l) { return link_family_[l]->link_class == LinkClass::kNvlink; });
}

std::vector<LinkId> FabricPaths::path(DeviceIndex from, DeviceIndex to) {
  std::vector<LinkId> direct = direct_path(from, to);
  const FabricDevice& a = fabric_.device(from);
  const FabricDevice& b = fabric_.device(to);
  if (a.kind != DeviceKind::kGpu || b.kind != DeviceKind::kGpu || a.node != b.node ||
      a.node == kNoNode || all_nvlink(direct)) {
    return direct;
  }
  const auto key = std::make_pair(from, to);
  if (auto found = relays_.find(key); found != relays_.end()) {
    return found->second.empty() ? direct : found->second;
  }
  // NCCL's point-to-point between GPUs of one node without an NVLink path of their own goes
  // through an intermediate GPU over NVLink when one links both (NVIDIA/nccl
  // src/graph/paths.cc: PATH_NVB, "NVLink through an intermediate GPU"; src/transport/p2p.cc:
  // the intermediate rank of a PATH_NVB connection, "P2P/indirect"), not over PCIe and the CPU.
  // The cheapest such GPU by the fabric's link cost, ties to the lower device index.
  std::vector<LinkId> best;
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  for (const DeviceIndex via : node_devices_.at(a.node)) {
    if (via == from || via == to || fabric_.device(via).kind != DeviceKind::kGpu) continue;
    std::vector<LinkId> first = direct_path(from, via);
    if (!all_nvlink(first)) continue;
    const std::vector<LinkId> second = direct_path(via, to);
    if (!all_nvlink(second)) continue;
    int64_t cost = 0;
    for (LinkId l : first)
      cost += route_cost_ps_[l];
    for (LinkId l : second)
      cost += route_cost_ps_[l];
    if (cost < best_cost) {
      best_cost = cost;
      first.insert(first.end(), second.begin(), second.end());
      best = std::move(first);
    }
  }
  relays_.emplace(key, best);
  return best.empty() ? direct : best;
}

std::vector<LinkId> FabricPaths::direct_path(DeviceIndex from, DeviceIndex to) {
  const FabricDevice& a = fabric_.device(from);
  const FabricDevice& b = fabric_.device(to);
  if (a.node == b.node && a.node != kNoNode &&
      (a.kind == DeviceKind::kGpu || b.kind == DeviceKind::kGpu)) {
    const bool forward = a.kind == DeviceKind::kGpu;
    const LocalTree& tree = local_tree(forward ? from : to);
    const DeviceIndex root = forward ? from : to;
    const DeviceIndex leaf = forward ? to : from;
    std::vector<LinkId> out;
    DeviceIndex v = leaf;
    bool reached = true;
    while (v != root) {
      const LinkId l = tree.via[node_position_[v]];
      if (l == kNone) {
        reached = false;
        break;
      }
      out.push_back(l);
      v = fabric_.link(l).from;
    }
    if (reached) {
      // `out` runs leaf -> root backwards; forward paths reverse the order, backward ones
      // (device -> GPU) take each link's reverse direction in order.
      if (forward) {
        std::reverse(out.begin(), out.end());
      } else {
        for (LinkId& l : out)
          l = fabric_.link(l).reverse;
      }
      return out;
    }
  }
  return fabric_.route(from, to);
}

std::vector<DeviceIndex> FabricPaths::nearest_nics(DeviceIndex gpu) {
  std::vector<DeviceIndex> nearest;
  // The node's NICs from its own device list (not a scan of the whole fabric: layouts of many
  // small groups, e.g. pipeline send/recv pairs, stay cheap on large clusters).
  const auto devices = node_devices_.find(fabric_.device(gpu).node);
  if (devices == node_devices_.end()) return nearest;
  std::pair<size_t, int64_t> best{std::numeric_limits<size_t>::max(), 0};
  for (DeviceIndex nic : devices->second) {
    if (fabric_.device(nic).kind != DeviceKind::kNic) continue;
    const std::vector<LinkId> r = path(gpu, nic);
    int64_t latency = 0;
    for (LinkId l : r)
      latency += fabric_.link(l).latency.ps();
    const std::pair<size_t, int64_t> cost{r.size(), latency};
    if (cost < best) {
      best = cost;
      nearest.clear();
    }
    if (cost == best) nearest.push_back(nic);
  }
  return nearest;
}

const std::vector<DeviceIndex>& FabricPaths::own_nics(DeviceIndex gpu) {
  auto found = own_nics_.find(gpu);
  if (found != own_nics_.end()) return found->second;
  std::map<std::vector<DeviceIndex>, std::vector<DeviceIndex>> sharing;  // nearest NICs -> GPUs
  for (DeviceIndex d : node_devices_.at(fabric_.device(gpu).node)) {
    if (fabric_.device(d).kind == DeviceKind::kGpu) sharing[nearest_nics(d)].push_back(d);
  }
  for (const auto& [nics, sharers] : sharing) {
    for (size_t j = 0; j < sharers.size(); ++j)
      own_nics_[sharers[j]] = share_of(nics, j, sharers.size());
  }
  return own_nics_[gpu];
}

}  // namespace upsim::collectives

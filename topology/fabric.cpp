#include "topology/fabric.h"

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/reverse_graph.hpp>

#include <cmath>
#include <limits>
#include <unordered_map>

namespace upsim {

namespace {

// Directed graph over device indices; each edge carries its LinkId and its integer routing cost.
struct EdgeProps {
  LinkId link = 0;
  int64_t cost_ps = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                    boost::no_property, EdgeProps>;

constexpr int64_t kUnreachable = std::numeric_limits<int64_t>::max() / 4;

int64_t routing_cost_ps(const FabricLink& l) {
  return l.latency.ps() +
         std::llround(kRouteReferenceBytes / l.bandwidth.bytes_per_second() * 1e12);
}

/// splitmix64: a fixed, platform-independent hash for ECMP choices.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

/// Shortest-path data toward one destination: for every device, the cost to reach the
/// destination and the equal-cost next links (ECMP candidates) in link-id order.
struct RoutesTo {
  std::vector<int64_t> cost;
  std::vector<uint32_t> first;  // candidates of device v: next[first[v] .. first[v + 1])
  std::vector<LinkId> next;
};

struct Fabric::State {
  std::string name;
  std::vector<FabricDevice> devices;
  std::vector<FabricLink> links;
  std::vector<DeviceIndex> gpus;
  std::unordered_map<std::string, DeviceIndex> index;
  std::vector<std::vector<LinkId>> out_links;  // per device, in link-id order
  uint32_t nodes = 0;
  std::vector<DeviceIndex> host;  // per GPU position in `gpus`
  // Routing cache, filled lazily per destination. Mutable: route() is logically const.
  mutable std::unordered_map<DeviceIndex, RoutesTo> routes_to;
  mutable std::unordered_map<DeviceIndex, RoutesTo> routes_to_without_cpus;

  /// Routes toward `dst`; with `avoid_cpus`, CPUs other than `dst` are not transit devices.
  const RoutesTo& routes_toward(DeviceIndex dst, bool avoid_cpus = false) const;
};

const RoutesTo& Fabric::State::routes_toward(DeviceIndex dst, bool avoid_cpus) const {
  auto& cache = avoid_cpus ? routes_to_without_cpus : routes_to;
  auto it = cache.find(dst);
  if (it != cache.end()) return it->second;
  auto transit_forbidden = [&](DeviceIndex v) {
    if (v == dst) return false;
    const DeviceKind kind = devices[v].kind;
    return kind == DeviceKind::kGpu || (avoid_cpus && kind == DeviceKind::kCpu);
  };
  // Dijkstra from the destination over reversed links gives every device's cost to reach it.
  // GPUs other than the endpoints must not forward traffic: their incoming links get no
  // relaxation as transit (handled by skipping GPU vertices below when expanding candidates,
  // and by excluding links *into* a transit GPU from the graph search).
  Graph g(devices.size());
  for (LinkId l = 0; l < links.size(); ++l) {
    const FabricLink& link = links[l];
    // A link that leaves a GPU can only be the first hop of a route starting at that GPU; in
    // the reversed search from dst it would let paths pass through the GPU. Keep it: the
    // search below is from dst backwards, so a GPU's out-links connect the GPU as a *source*.
    // Links *into* a GPU other than dst would make it transit; drop them.
    if (transit_forbidden(link.to)) continue;
    boost::add_edge(link.from, link.to, EdgeProps{l, routing_cost_ps(link)}, g);
  }
  auto reversed = boost::make_reverse_graph(g);
  std::vector<int64_t> cost(devices.size(), kUnreachable);
  boost::dijkstra_shortest_paths(
      reversed, dst,
      boost::distance_map(boost::make_iterator_property_map(
                              cost.begin(), boost::get(boost::vertex_index, reversed)))
          .weight_map(boost::get(&EdgeProps::cost_ps, reversed))
          .distance_inf(kUnreachable)
          .distance_zero(int64_t{0}));
  RoutesTo r;
  r.cost = cost;
  r.first.assign(devices.size() + 1, 0);
  for (DeviceIndex v = 0; v < devices.size(); ++v) {
    r.first[v] = static_cast<uint32_t>(r.next.size());
    if (v == dst || cost[v] >= kUnreachable) continue;
    for (LinkId l : out_links[v]) {
      const FabricLink& link = links[l];
      if (transit_forbidden(link.to)) continue;
      if (cost[link.to] >= kUnreachable) continue;
      if (cost[link.to] + routing_cost_ps(link) == cost[v]) r.next.push_back(l);
    }
  }
  r.first[devices.size()] = static_cast<uint32_t>(r.next.size());
  return cache.emplace(dst, std::move(r)).first->second;
}

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kPcieSwitch:
      return "pcie_switch";
    case DeviceKind::kNvSwitch:
      return "nvswitch";
    case DeviceKind::kNic:
      return "nic";
    case DeviceKind::kNetworkSwitch:
      return "network_switch";
  }
  return "?";
}

std::optional<DeviceKind> parse_device_kind(std::string_view name) {
  for (DeviceKind k : {DeviceKind::kGpu, DeviceKind::kCpu, DeviceKind::kPcieSwitch,
                       DeviceKind::kNvSwitch, DeviceKind::kNic, DeviceKind::kNetworkSwitch}) {
    if (device_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

// ---- Fabric -----------------------------------------------------------------------------------

Fabric::Fabric(std::unique_ptr<State> state) : state_(std::move(state)) {}
Fabric::Fabric(Fabric&&) noexcept = default;
Fabric& Fabric::operator=(Fabric&&) noexcept = default;
Fabric::~Fabric() = default;

const std::string& Fabric::name() const {
  return state_->name;
}
std::span<const FabricDevice> Fabric::devices() const {
  return state_->devices;
}
std::span<const FabricLink> Fabric::links() const {
  return state_->links;
}
std::span<const DeviceIndex> Fabric::gpus() const {
  return state_->gpus;
}
uint32_t Fabric::node_count() const {
  return state_->nodes;
}

std::string Fabric::link_name(LinkId l) const {
  const FabricLink& link = state_->links[l];
  return fmt::format("{} -> {} ({})", state_->devices[link.from].id, state_->devices[link.to].id,
                     link.kind);
}

std::optional<DeviceIndex> Fabric::find(std::string_view id) const {
  auto it = state_->index.find(std::string(id));
  if (it == state_->index.end()) return std::nullopt;
  return it->second;
}

std::vector<LinkId> Fabric::route(DeviceIndex from, DeviceIndex to) const {
  std::vector<LinkId> path;
  if (from == to) return path;
  // Between nodes, traffic goes NIC to NIC through the network: a route that would cross a
  // node's CPUs (e.g. from the wrong rail's NIC to the destination GPU) is used only when no
  // other exists.
  const FabricDevice& src = state_->devices[from];
  const FabricDevice& dst = state_->devices[to];
  const bool between_nodes = src.node != dst.node;
  const RoutesTo* routes = &state_->routes_toward(to, between_nodes);
  if (between_nodes && routes->cost[from] >= kUnreachable) routes = &state_->routes_toward(to);
  const RoutesTo& r = *routes;
  if (r.cost[from] >= kUnreachable) {
    throw FabricError(fmt::format("fabric `{}`: no route from `{}` to `{}`", state_->name,
                                  state_->devices[from].id, state_->devices[to].id));
  }
  const uint64_t pair_hash = mix((uint64_t{from} << 32) | to);
  DeviceIndex v = from;
  while (v != to) {
    const uint32_t begin = r.first[v];
    const uint32_t count = r.first[v + 1] - begin;
    const LinkId l = r.next[begin + (count == 1 ? 0 : mix(pair_hash ^ v) % count)];
    path.push_back(l);
    v = state_->links[l].to;
  }
  return path;
}

Duration Fabric::route_latency(DeviceIndex from, DeviceIndex to) const {
  Duration d = Duration::zero();
  for (LinkId l : route(from, to))
    d += state_->links[l].latency;
  return d;
}

DeviceIndex Fabric::host_of(DeviceIndex gpu) const {
  for (size_t i = 0; i < state_->gpus.size(); ++i) {
    if (state_->gpus[i] == gpu) return state_->host[i];
  }
  throw FabricError(
      fmt::format("fabric `{}`: `{}` is not a GPU", state_->name, state_->devices[gpu].id));
}

// ---- FabricBuilder ----------------------------------------------------------------------------

FabricBuilder::FabricBuilder(std::string name) : state_(std::make_unique<Fabric::State>()) {
  state_->name = std::move(name);
}
FabricBuilder::FabricBuilder(FabricBuilder&&) noexcept = default;
FabricBuilder::~FabricBuilder() = default;

DeviceIndex FabricBuilder::add_device(std::string id, DeviceKind kind, int32_t node) {
  if (id.empty()) throw FabricError("a device has an empty id");
  if (state_->index.count(id)) {
    throw FabricError(fmt::format("duplicate device id `{}`", id));
  }
  const auto index = static_cast<DeviceIndex>(state_->devices.size());
  state_->index.emplace(id, index);
  state_->devices.push_back(FabricDevice{std::move(id), kind, node});
  state_->out_links.emplace_back();
  return index;
}

LinkId FabricBuilder::add_link(DeviceIndex a, DeviceIndex b, std::string kind, Bandwidth bandwidth,
                               Duration latency) {
  const size_t n = state_->devices.size();
  if (a >= n || b >= n) throw FabricError("a link names a device that does not exist");
  const std::string& ida = state_->devices[a].id;
  const std::string& idb = state_->devices[b].id;
  if (a == b) throw FabricError(fmt::format("link from `{}` to itself", ida));
  if (!(bandwidth.bytes_per_second() > 0.0)) {
    throw FabricError(fmt::format("link `{}` - `{}`: bandwidth must be positive", ida, idb));
  }
  if (latency < Duration::zero()) {
    throw FabricError(fmt::format("link `{}` - `{}`: latency must not be negative", ida, idb));
  }
  const auto ab = static_cast<LinkId>(state_->links.size());
  state_->links.push_back(FabricLink{a, b, kind, bandwidth, latency, ab + 1});
  state_->links.push_back(FabricLink{b, a, std::move(kind), bandwidth, latency, ab});
  state_->out_links[a].push_back(ab);
  state_->out_links[b].push_back(ab + 1);
  return ab;
}

std::optional<DeviceIndex> FabricBuilder::find(std::string_view id) const {
  auto it = state_->index.find(std::string(id));
  if (it == state_->index.end()) return std::nullopt;
  return it->second;
}

size_t FabricBuilder::device_count() const {
  return state_->devices.size();
}

Fabric FabricBuilder::seal() && {
  Fabric::State& s = *state_;
  int32_t max_node = -1;
  std::vector<DeviceIndex> cpus;
  for (DeviceIndex d = 0; d < s.devices.size(); ++d) {
    const FabricDevice& dev = s.devices[d];
    if (dev.kind == DeviceKind::kGpu) s.gpus.push_back(d);
    if (dev.kind == DeviceKind::kCpu) cpus.push_back(d);
    max_node = std::max(max_node, dev.node);
  }
  s.nodes = static_cast<uint32_t>(max_node + 1);
  if (s.gpus.empty()) throw FabricError(fmt::format("fabric `{}` has no GPU", s.name));

  // Connectivity (ignoring the no-transit-through-GPUs rule): one component must hold every GPU.
  {
    boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS> u(s.devices.size());
    for (size_t l = 0; l < s.links.size(); l += 2)
      boost::add_edge(s.links[l].from, s.links[l].to, u);
    std::vector<int> component(s.devices.size());
    boost::connected_components(u, component.data());
    for (DeviceIndex gpu : s.gpus) {
      if (component[gpu] != component[s.gpus.front()]) {
        throw FabricError(fmt::format("fabric `{}`: `{}` is not connected to `{}`", s.name,
                                      s.devices[gpu].id, s.devices[s.gpus.front()].id));
      }
    }
  }
  Fabric fabric(std::move(state_));
  Fabric::State& f = *fabric.state_;
  // Every GPU must reach GPU 0 and be reachable from it without passing through another GPU.
  const DeviceIndex g0 = f.gpus.front();
  for (DeviceIndex gpu : f.gpus) {
    if (gpu == g0) continue;
    // Links are full duplex with equal costs, so a route gpu -> g0 reversed is a route back.
    if (f.routes_toward(g0).cost[gpu] >= kUnreachable) {
      throw FabricError(fmt::format(
          "fabric `{}`: no route between `{}` and `{}` that avoids passing through other GPUs",
          f.name, f.devices[gpu].id, f.devices[g0].id));
    }
  }
  // Host memory of each GPU: the CPU with the cheapest route to it; CPUs are optional only for
  // fabrics that never copy to the host, so a GPU with no reachable CPU is an error only when
  // the fabric has CPUs at all.
  f.host.assign(f.gpus.size(), 0);
  for (size_t i = 0; i < f.gpus.size(); ++i) {
    int64_t best = kUnreachable;
    DeviceIndex best_cpu = f.gpus[i];
    for (DeviceIndex cpu : cpus) {
      const int64_t c = f.routes_toward(cpu).cost[f.gpus[i]];
      if (c < best) {
        best = c;
        best_cpu = cpu;
      }
    }
    if (!cpus.empty() && best >= kUnreachable) {
      throw FabricError(
          fmt::format("fabric `{}`: `{}` cannot reach any CPU", f.name, f.devices[f.gpus[i]].id));
    }
    f.host[i] = best_cpu;
  }
  return fabric;
}

}  // namespace upsim

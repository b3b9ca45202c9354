#include "topology/fabric.h"

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace upsim {

namespace {

constexpr uint32_t kNotAGpu = std::numeric_limits<uint32_t>::max();
constexpr DeviceIndex kNotADevice = std::numeric_limits<DeviceIndex>::max();

constexpr int64_t kUnreachable = std::numeric_limits<int64_t>::max() / 4;

/// splitmix64: a fixed, platform-independent hash for ECMP choices.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

struct Fabric::State {
  std::string name;
  std::vector<FabricDevice> devices;
  std::vector<FabricLink> links;
  std::vector<DeviceIndex> gpus;
  std::unordered_map<std::string, DeviceIndex> index;
  std::vector<std::vector<LinkId>> out_links;  // per device, in link-id order
  uint32_t nodes = 0;
  std::vector<DeviceIndex> host;       // per GPU position in `gpus`
  std::vector<uint32_t> gpu_position;  // per device: its position in `gpus`, or kNotAGpu
  // Links into each device (CSR, filled by seal): in_links[in_first[v] .. in_first[v + 1]).
  std::vector<uint32_t> in_first;
  std::vector<LinkId> in_links;
  std::vector<int64_t> link_cost;  // route_cost_ps per directed link
  // Scratch of the bounded route search (route() is logically const): per device the best cost
  // found so far toward the current destination (kUnreachable when untouched), the devices
  // touched (reset after each search) and the search queue.
  mutable std::vector<int64_t> search_cost;
  mutable std::vector<DeviceIndex> search_touched;
  mutable std::vector<std::pair<int64_t, DeviceIndex>> search_queue;
  // Routes computed so far, per (from << 32 | to).
  mutable std::unordered_map<uint64_t, std::vector<LinkId>> route_cache;

  /// Whether `v` may not forward traffic toward `dst`: a GPU other than `dst`; with
  /// `avoid_cpus` also a CPU other than `dst`.
  bool transit_forbidden(DeviceIndex v, DeviceIndex dst, bool avoid_cpus) const {
    if (v == dst) return false;
    const DeviceKind kind = devices[v].kind;
    return kind == DeviceKind::kGpu || (avoid_cpus && kind == DeviceKind::kCpu);
  }
  /// Dijkstra from `dst` over reversed links (transit rules of transit_forbidden), leaving in
  /// search_cost the exact cost to reach `dst` of every device whose cost is <= that of
  /// `from` (every device, when `from` is kNotADevice or unreachable). Returns whether `from`
  /// was reached. search_cost must be clean (all kUnreachable) on entry; reset_search()
  /// cleans it.
  bool search_toward(DeviceIndex dst, DeviceIndex from, bool avoid_cpus) const;
  void reset_search() const;
  /// The route from `from` to `dst` after search_toward(dst, from, avoid_cpus) reached `from`.
  std::vector<LinkId> walk(DeviceIndex from, DeviceIndex dst, bool avoid_cpus) const;
  /// Builds the routing indexes (in_first, in_links, link_cost, gpu_position).
  void index_links();
  /// Per GPU (position in `gpus`): the CPU with the cheapest route to it, the lowest device
  /// index among equals; the GPU itself when no CPU reaches it.
  std::vector<DeviceIndex> nearest_cpus(const std::vector<DeviceIndex>& cpus) const;
};

void Fabric::State::index_links() {
  const size_t n = devices.size();
  in_first.assign(n + 1, 0);
  for (const FabricLink& l : links)
    ++in_first[l.to + 1];
  for (size_t v = 0; v < n; ++v)
    in_first[v + 1] += in_first[v];
  in_links.assign(links.size(), 0);
  std::vector<uint32_t> fill(in_first.begin(), in_first.end() - 1);
  for (LinkId l = 0; l < links.size(); ++l)
    in_links[fill[links[l].to]++] = l;  // in link-id order within a device
  link_cost.resize(links.size());
  for (LinkId l = 0; l < links.size(); ++l)
    link_cost[l] = route_cost_ps(links[l]);
  search_cost.assign(n, kUnreachable);
  gpu_position.assign(n, kNotAGpu);
  for (size_t i = 0; i < gpus.size(); ++i)
    gpu_position[gpus[i]] = static_cast<uint32_t>(i);
}

std::vector<DeviceIndex> Fabric::State::nearest_cpus(const std::vector<DeviceIndex>& cpus) const {
  // One Dijkstra from all CPUs at once over reversed links, with labels (cost, CPU) compared
  // lexicographically: every device ends with the least (cost of its route to a CPU, that
  // CPU), which is what a search per CPU followed by a minimum over CPUs in index order gives,
  // at the price of one search. GPUs are never transit devices.
  const size_t n = devices.size();
  std::vector<int64_t> cost(n, kUnreachable);
  std::vector<DeviceIndex> via(n, std::numeric_limits<DeviceIndex>::max());
  using Entry = std::tuple<int64_t, DeviceIndex, DeviceIndex>;  // cost, CPU, device
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  for (DeviceIndex cpu : cpus) {
    cost[cpu] = 0;
    via[cpu] = cpu;
    queue.emplace(0, cpu, cpu);
  }
  while (!queue.empty()) {
    const auto [c, cpu, v] = queue.top();
    queue.pop();
    if (c != cost[v] || cpu != via[v]) continue;
    if (devices[v].kind == DeviceKind::kGpu) continue;
    for (uint32_t i = in_first[v]; i < in_first[v + 1]; ++i) {
      const LinkId l = in_links[i];
      const DeviceIndex u = links[l].from;
      const int64_t next = c + link_cost[l];
      if (next < cost[u] || (next == cost[u] && cpu < via[u])) {
        cost[u] = next;
        via[u] = cpu;
        queue.emplace(next, cpu, u);
      }
    }
  }
  std::vector<DeviceIndex> out(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i)
    out[i] = cost[gpus[i]] >= kUnreachable ? gpus[i] : via[gpus[i]];
  return out;
}

bool Fabric::State::search_toward(DeviceIndex dst, DeviceIndex from, bool avoid_cpus) const {
  // Dijkstra from the destination over reversed links gives every device's cost to reach it.
  // A device that must not forward traffic gets a cost, as the first hop of its own routes,
  // but is never expanded: no route passes through it.
  //
  // Bounded: once every device of cost <= cost(from) is settled, the search stops. That is
  // exact for route(): the walk from `from` visits devices v of cost <= cost(from), and an
  // equal-cost next hop w of v has cost(w) = cost(v) - cost(link) <= cost(from), so it is
  // settled; a device not settled has a true cost > cost(from) >= cost(v), and its tentative
  // cost is no lower, so it fails the equal-cost test as it would with the whole table. Routes
  // inside a node hence cost what the node costs, not what the fabric costs.
  auto& cost = search_cost;
  auto& queue = search_queue;
  const auto later = std::greater<>();
  auto label = [&](DeviceIndex v, int64_t c) {
    if (cost[v] == kUnreachable) search_touched.push_back(v);
    cost[v] = c;
    queue.emplace_back(c, v);
    std::push_heap(queue.begin(), queue.end(), later);
  };
  queue.clear();
  label(dst, 0);
  int64_t bound = kUnreachable;
  while (!queue.empty()) {
    const auto [c, v] = queue.front();
    if (c > bound) break;
    std::pop_heap(queue.begin(), queue.end(), later);
    queue.pop_back();
    if (c != cost[v]) continue;
    if (v == from) bound = c;  // settle the devices of equal cost too (zero-cost links)
    if (transit_forbidden(v, dst, avoid_cpus)) continue;
    for (uint32_t i = in_first[v]; i < in_first[v + 1]; ++i) {
      const LinkId l = in_links[i];
      const DeviceIndex u = links[l].from;
      const int64_t next = c + link_cost[l];
      if (next < cost[u]) label(u, next);
    }
  }
  return from < devices.size() && cost[from] < kUnreachable && cost[from] <= bound;
}

void Fabric::State::reset_search() const {
  for (DeviceIndex v : search_touched)
    search_cost[v] = kUnreachable;
  search_touched.clear();
}

std::vector<LinkId> Fabric::State::walk(DeviceIndex from, DeviceIndex dst, bool avoid_cpus) const {
  // Equal-cost next links (ECMP candidates) of each device in link-id order; a hash of
  // (source, destination) picks one, per device on the way.
  std::vector<LinkId> path;
  std::vector<LinkId> candidates;
  const uint64_t pair_hash = mix((uint64_t{from} << 32) | dst);
  DeviceIndex v = from;
  while (v != dst) {
    candidates.clear();
    for (LinkId l : out_links[v]) {
      const DeviceIndex to = links[l].to;
      if (transit_forbidden(to, dst, avoid_cpus)) continue;
      if (search_cost[to] >= kUnreachable) continue;
      if (search_cost[to] + link_cost[l] == search_cost[v]) candidates.push_back(l);
    }
    const size_t count = candidates.size();
    const LinkId l = candidates[count == 1 ? 0 : mix(pair_hash ^ v) % count];
    path.push_back(l);
    v = links[l].to;
  }
  return path;
}

int64_t route_cost_ps(const FabricLink& link) {
  const int64_t cost = link.latency.ps() + std::llround(kRouteReferenceBytes /
                                                        link.bandwidth.bytes_per_second() * 1e12);
  return std::max<int64_t>(cost, 1);
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

Fabric Fabric::clone() const {
  return Fabric(std::make_unique<State>(*state_));
}

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

std::vector<uint32_t> Fabric::gpu_nodes(size_t gpus) const {
  std::vector<uint32_t> out;
  std::unordered_map<int32_t, uint32_t> renumbered;
  const std::span<const DeviceIndex> all = this->gpus();
  for (size_t i = 0; i < std::min(gpus, all.size()); ++i) {
    const auto next = static_cast<uint32_t>(renumbered.size());
    out.push_back(renumbered.try_emplace(device(all[i]).node, next).first->second);
  }
  return out;
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
  if (from == to) return {};
  State& s = *state_;
  const uint64_t key = (uint64_t{from} << 32) | to;
  if (auto it = s.route_cache.find(key); it != s.route_cache.end()) return it->second;
  // Between nodes, traffic goes NIC to NIC through the network: a route that would cross a
  // node's CPUs (e.g. from the wrong rail's NIC to the destination GPU) is used only when no
  // other exists.
  const bool between_nodes = s.devices[from].node != s.devices[to].node;
  bool avoid_cpus = between_nodes;
  bool reached = s.search_toward(to, from, avoid_cpus);
  if (!reached && avoid_cpus) {
    s.reset_search();
    avoid_cpus = false;
    reached = s.search_toward(to, from, avoid_cpus);
  }
  if (!reached) {
    s.reset_search();
    throw FabricError(fmt::format("fabric `{}`: no route from `{}` to `{}`", s.name,
                                  s.devices[from].id, s.devices[to].id));
  }
  std::vector<LinkId> path = s.walk(from, to, avoid_cpus);
  s.reset_search();
  return s.route_cache.emplace(key, std::move(path)).first->second;
}

Duration Fabric::route_latency(DeviceIndex from, DeviceIndex to) const {
  Duration d = Duration::zero();
  for (LinkId l : route(from, to))
    d += state_->links[l].latency;
  return d;
}

DeviceIndex Fabric::host_of(DeviceIndex gpu) const {
  if (gpu < state_->gpu_position.size() && state_->gpu_position[gpu] != kNotAGpu) {
    return state_->host[state_->gpu_position[gpu]];
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
  f.index_links();
  // Every GPU must reach GPU 0 and be reachable from it without passing through another GPU.
  const DeviceIndex g0 = f.gpus.front();
  f.search_toward(g0, kNotADevice, false);  // the whole table toward g0
  for (DeviceIndex gpu : f.gpus) {
    if (gpu == g0) continue;
    // Links are full duplex with equal costs, so a route gpu -> g0 reversed is a route back.
    if (f.search_cost[gpu] >= kUnreachable) {
      f.reset_search();
      throw FabricError(fmt::format(
          "fabric `{}`: no route between `{}` and `{}` that avoids passing through other GPUs",
          f.name, f.devices[gpu].id, f.devices[g0].id));
    }
  }
  f.reset_search();
  // Host memory of each GPU: the CPU with the cheapest route to it; CPUs are optional only for
  // fabrics that never copy to the host, so a GPU with no reachable CPU is an error only when
  // the fabric has CPUs at all.
  f.host = f.nearest_cpus(cpus);
  for (size_t i = 0; i < f.gpus.size(); ++i) {
    if (!cpus.empty() && f.host[i] == f.gpus[i]) {
      throw FabricError(
          fmt::format("fabric `{}`: `{}` cannot reach any CPU", f.name, f.devices[f.gpus[i]].id));
    }
  }
  return fabric;
}

}  // namespace upsim

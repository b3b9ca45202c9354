#include "topology/collective_algorithms.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <unordered_map>

namespace upsim {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
// NVLS needs at least this many members in each node (see the NVLS layout check below).
constexpr uint32_t kNvlsMinGpusPerNode = 3;
// Hamiltonian cycles enumerated per node (7! = 5040 covers every cycle of an 8-GPU node) and
// the DFS steps allowed to find them; larger meshes keep the first cycles found.
constexpr size_t kMaxEnumeratedCycles = 5040;
constexpr size_t kMaxSearchSteps = 2'000'000;
// Rings (channels) chosen per node at most; NCCL uses up to 16-32 channels, each a ring.
constexpr size_t kMaxRingChannels = 12;

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

size_t index_of(CollectiveProtocol p) {
  return static_cast<size_t>(p);
}

uint32_t log2_floor(uint32_t v) {
  uint32_t r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return r;
}

int link_class_rank(LinkClass c) {
  switch (c) {
    case LinkClass::kNvlink:
      return 0;
    case LinkClass::kPci:
      return 1;
    case LinkClass::kNet:
      return 2;
  }
  return 2;
}

LinkClass worse(LinkClass a, LinkClass b) {
  return link_class_rank(a) >= link_class_rank(b) ? a : b;
}

/// Parent of every index 0..n-1 in an in-order balanced binary tree (root: kNone). Interior
/// nodes and leaves alternate along the indices, as in NCCL's double binary tree.
std::vector<uint32_t> binary_tree(uint32_t n) {
  std::vector<uint32_t> parent(n, kNone);
  struct Range {
    uint32_t lo;
    uint32_t hi;  // inclusive
    uint32_t parent;
  };
  std::vector<Range> stack;
  if (n > 0) stack.push_back(Range{0, n - 1, kNone});
  while (!stack.empty()) {
    const Range r = stack.back();
    stack.pop_back();
    const uint32_t mid = r.lo + (r.hi - r.lo) / 2;
    parent[mid] = r.parent;
    if (mid > r.lo) stack.push_back(Range{r.lo, mid - 1, mid});
    if (mid < r.hi) stack.push_back(Range{mid + 1, r.hi, mid});
  }
  return parent;
}

/// NCCL's double binary tree over n indices: the second tree mirrors the first when n is even
/// and shifts it by one when n is odd, so that most interior nodes of one are leaves of the other.
std::array<std::vector<uint32_t>, 2> double_binary_tree(uint32_t n) {
  std::vector<uint32_t> first = binary_tree(n);
  std::vector<uint32_t> second(n, kNone);
  for (uint32_t i = 0; i < n; ++i) {
    if (n % 2 == 0) {
      const uint32_t p = first[n - 1 - i];
      second[i] = p == kNone ? kNone : n - 1 - p;
    } else {
      const uint32_t p = first[(i + n - 1) % n];
      second[i] = p == kNone ? kNone : (p + 1) % n;
    }
  }
  return {std::move(first), std::move(second)};
}

/// The flows of one (kind, algorithm) for a member set, per byte of CollectiveDesc::bytes:
/// flow i carries unit_bytes[i] x S wire-free payload bytes (already divided by the algorithm
/// efficiency) from member source[i] (kNone for a switch) over links[offsets[i]..offsets[i+1]).
/// All-to-all structures are built for one set of sizes and carry bytes, not bytes per byte of
/// S (scale 1).
struct FlowStructure {
  std::vector<uint32_t> links;
  std::vector<uint32_t> offsets{0};
  std::vector<double> unit_bytes;
  std::vector<uint32_t> source;
  /// Seconds per byte of S on the busiest link (sum of unit_bytes / capacity).
  double unit_link_seconds = 0.0;
  /// Unit bytes sent by the busiest member (for injection caps).
  double unit_source_bytes = 0.0;
};

/// What an all-to-all structure is built for: its sizes, or without them the collective's size
/// (bytes / n to every pair).
struct AllToAllKey {
  AllToAllSizes sizes;
  int64_t uniform_bytes = 0;  // CollectiveDesc::bytes when `sizes` is empty, else 0
  bool operator==(const AllToAllKey&) const = default;
};
struct AllToAllKeyHash {
  size_t operator()(const AllToAllKey& k) const {
    return k.sizes.hash() ^ (static_cast<size_t>(k.uniform_bytes) * 0x9e3779b97f4a7c15ULL);
  }
};
// All-to-all structures kept per member set; past this many distinct sizes (a trace replay's
// one-off all-to-allv calls) the cache starts over. Training steps repeat a few: DLRM's forward
// and backward, an MoE layer's dispatch and combine.
constexpr size_t kMaxCachedAllToAlls = 16;

}  // namespace

/// Node grouping and topology facts of one member set.
struct CollectivePlanner::Layout {
  std::vector<RankId> members;
  std::vector<DeviceIndex> gpu;              // per member index
  std::vector<std::vector<uint32_t>> nodes;  // member indices of each node, nodes by id
  std::vector<uint32_t> node_of;             // node position of each member
  std::vector<uint32_t> local_of;            // position of each member inside its node
  uint32_t max_per_node = 0;
  bool uniform = true;  // every node has max_per_node members
  // Ring cycles of each node (permutations of that node's member indices).
  std::vector<std::vector<std::vector<uint32_t>>> cycles;
  uint32_t channels = 1;
  LinkClass intra_class = LinkClass::kNvlink;  // worst class on intra-node ring arcs
  // Factor on the base and intra-node hop latencies for the GPU generation of the intra-node
  // ring arcs' links (the largest over them; 1 without such links).
  double latency_factor = 1.0;
  // Per protocol, the most payload bytes per second a member injects (0: no cap): within one
  // node CollectiveTuning::single_node_injection_cap_for its ring arcs' link kinds, over
  // several nodes ProtocolTuning::injection_cap.
  std::array<Bandwidth, kCollectiveProtocolCount> injection_cap{};
  LinkClass inter_class = LinkClass::kNet;  // worst class on inter-node routes
  std::array<Duration, kCollectiveProtocolCount> inter_extra{};
  // NICs each member sends and receives through across nodes (its share of the NICs nearest to
  // it; empty on one node or without NICs), and the most any member has.
  std::vector<std::vector<DeviceIndex>> nics_of;
  uint32_t max_nics = 0;
  // NVLS: per member, the NVSwitches it reaches directly and the share of its NVLink bandwidth
  // to each; empty when NVLS does not apply.
  std::vector<std::vector<std::pair<DeviceIndex, double>>> nvls_planes;
  // NVLS efficiency of the NVLS links used (the lowest over their kinds).
  double nvls_efficiency = 1.0;
  // NVLS pipeline fill in bytes (the largest over the NVLS link kinds used).
  double nvls_fill_bytes = 0.0;
  // Cached flow structures per (kind, algorithm); see FlowStructure.
  std::map<std::pair<CollectiveKind, CollectiveAlgorithm>, std::unique_ptr<FlowStructure>>
      structures;
  // Cached all-to-all structures per sizes (at most kMaxCachedAllToAlls).
  std::unordered_map<AllToAllKey, std::unique_ptr<FlowStructure>, AllToAllKeyHash> all_to_alls;

  uint32_t node_count() const { return static_cast<uint32_t>(nodes.size()); }
  size_t size() const { return gpu.size(); }
};

struct CollectivePlanner::Candidate {
  CollectiveChoice choice;
  const FlowStructure* structure = nullptr;
  double scale = 0.0;  // payload bytes of flow f = structure->unit_bytes[f] x scale
};

namespace {

/// Sharer j of m of the equally near `nics` (GPUs under one PCIe switch): its slice in order,
/// at least one NIC, so GPU i of a DGX H100 gets NIC i and GPU i of an OCI BM.GPU4.8 gets NICs
/// 2i and 2i+1 -- the rail of its own PCIe switch, as NCCL's channels use them.
std::vector<DeviceIndex> share_of(const std::vector<DeviceIndex>& nics, size_t j, size_t m) {
  std::vector<DeviceIndex> mine;
  const size_t k = nics.size();
  const size_t begin = j * k / m;
  const size_t end = std::max(begin + 1, (j + 1) * k / m);
  for (size_t x = begin; x < end && x < k; ++x)
    mine.push_back(nics[x]);
  return mine;
}

/// Collects the flows of a structure and routes them; flows with the same path description
/// are merged (their bytes add up, in the order added), in order of first appearance or, after
/// sort_by_order(), by the order key given with each flow's first addition.
class FlowCollector {
 public:
  /// A flow over the fabric's route from src to dst (one of them may be a switch). Returns the
  /// index of the (merged) flow.
  uint32_t add(DeviceIndex src, DeviceIndex dst, double unit_bytes, uint32_t source,
               uint64_t order = 0) {
    return add_via(src, dst, kNone, kNone, unit_bytes, source, order);
  }
  /// A flow from GPU src to GPU dst that leaves its node through `nic` and enters the
  /// destination node through `nic_dst` (kNone: the fabric's own choice).
  uint32_t add_via(DeviceIndex src, DeviceIndex dst, DeviceIndex nic, DeviceIndex nic_dst,
                   double unit_bytes, uint32_t source, uint64_t order = 0) {
    if (src == dst) return kNone;
    const Key key{src, dst, nic, nic_dst};
    auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(items_.size()));
    if (inserted) items_.push_back(Item{key, source, 0.0, order});
    items_[it->second].unit_bytes += unit_bytes;
    return it->second;
  }
  void reserve(size_t flows) {
    items_.reserve(flows);
    index_.reserve(flows);
  }
  /// Puts the flows in ascending order of their order keys (distinct keys: the order is then
  /// unique). Flow indices returned before are void, and nothing may be added afterwards.
  void sort_by_order() {
    index_.clear();
    std::sort(items_.begin(), items_.end(),
              [](const Item& a, const Item& b) { return a.order < b.order; });
  }

  /// `path(from, to)` returns the links from one device to another (see
  /// CollectivePlanner::path).
  template <typename PathFn>
  FlowStructure route(const Fabric& fabric, std::span<const std::vector<LinkId>> in_links,
                      std::span<const double> capacity, size_t members, PathFn&& path) {
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

 private:
  /// Appends to `route` the network path from NIC `from` to NIC `to`: up to `from`'s switch,
  /// over one of that switch's spines shared with `to`'s switch (taken in turn, so that the
  /// flows of a structure between two leaves spread evenly over their spines, as InfiniBand
  /// adaptive routing and NCCL's many channels do, where the fabric's per-pair hash would leave
  /// some spine links busier), then down to `to`. Returns false (route unchanged) when `to` is
  /// kNone or the path is not leaf [-> spine] -> leaf.
  bool network_path(const Fabric& fabric, std::span<const std::vector<LinkId>> in_links,
                    DeviceIndex from, DeviceIndex to, std::vector<LinkId>& route) {
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
  struct Spines {
    std::vector<std::pair<LinkId, LinkId>> steps;  // (leaf -> spine, spine -> leaf)
    size_t next = 0;
  };
  std::unordered_map<uint64_t, Spines> spines_;
  struct Key {
    DeviceIndex src;
    DeviceIndex dst;
    DeviceIndex nic;
    DeviceIndex nic_dst;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = (uint64_t{k.src} << 32) ^ k.dst;
      h ^= (uint64_t{k.nic} << 32 ^ k.nic_dst) * 0x9e3779b97f4a7c15ULL;
      h ^= h >> 29;
      return static_cast<size_t>(h * 0xbf58476d1ce4e5b9ULL);
    }
  };
  struct Item {
    Key key;
    uint32_t source;
    double unit_bytes;
    uint64_t order;
  };
  std::vector<Item> items_;
  std::unordered_map<Key, uint32_t, KeyHash> index_;
};

}  // namespace

CollectivePlanner::CollectivePlanner(const Fabric& fabric, CollectiveTuning tuning)
    : fabric_(fabric), tuning_(std::move(tuning)) {
  validate_tuning(tuning_);
  const auto links = fabric_.links();
  link_efficiency_.resize(links.size());
  link_capacity_.resize(links.size());
  link_family_.resize(links.size());
  for (LinkId l = 0; l < links.size(); ++l) {
    const LinkFamily& f = tuning_.family_of(links[l].kind);
    link_family_[l] = &f;
    link_efficiency_[l] = tuning_.link_efficiency(links[l].kind);
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

CollectivePlanner::~CollectivePlanner() = default;

void CollectivePlanner::check(const CollectiveDesc& c) const {
  const std::string_view kind = collective_kind_name(c.kind);
  const size_t gpus = fabric_.gpus().size();
  if (c.members.empty()) {
    throw std::invalid_argument(fmt::format("{}: the collective has no members", kind));
  }
  std::vector<bool> seen(gpus, false);
  for (RankId r : c.members) {
    if (r >= gpus) {
      throw std::invalid_argument(fmt::format(
          "{}: member rank {} is not a GPU of fabric `{}`, which has {} GPUs (ranks 0..{})", kind,
          r, fabric_.name(), gpus, gpus - 1));
    }
    if (seen[r]) {
      throw std::invalid_argument(fmt::format("{}: member rank {} appears twice", kind, r));
    }
    seen[r] = true;
  }
  if (c.bytes < 0) {
    throw std::invalid_argument(fmt::format("{}: negative size {}", kind, c.bytes));
  }
  if (c.kind == CollectiveKind::kAllToAll) {
    // AllToAllSizes rejects negative sizes when it is built.
    const size_t n = c.members.size();
    if (!c.send_bytes.empty() && c.send_bytes.members() != n) {
      throw std::invalid_argument(fmt::format("{}: send_bytes are over {} members, expected n = {}",
                                              kind, c.send_bytes.members(), n));
    }
  }
  if (c.kind == CollectiveKind::kSendRecv && c.members.size() != 2) {
    throw std::invalid_argument(fmt::format(
        "{}: needs exactly two members (sender, receiver), got {}", kind, c.members.size()));
  }
}

const CollectivePlanner::LocalTree& CollectivePlanner::local_tree(DeviceIndex gpu) {
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

bool CollectivePlanner::all_nvlink(std::span<const LinkId> links) const {
  return std::all_of(links.begin(), links.end(),
                     [&](LinkId l) { return link_family_[l]->link_class == LinkClass::kNvlink; });
}

std::vector<LinkId> CollectivePlanner::path(DeviceIndex from, DeviceIndex to) {
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

std::vector<LinkId> CollectivePlanner::direct_path(DeviceIndex from, DeviceIndex to) {
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

std::vector<DeviceIndex> CollectivePlanner::nearest_nics(DeviceIndex gpu) {
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

const std::vector<DeviceIndex>& CollectivePlanner::own_nics(DeviceIndex gpu) {
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

CollectivePlanner::Layout& CollectivePlanner::layout(const std::vector<RankId>& members) {
  auto found = layouts_.find(members);
  if (found != layouts_.end()) return *found->second;

  auto owned = std::make_unique<Layout>();
  Layout& lay = *owned;
  lay.members = members;
  const size_t n = members.size();
  lay.gpu.resize(n);
  for (size_t i = 0; i < n; ++i)
    lay.gpu[i] = fabric_.gpus()[members[i]];

  // Nodes in id order; members keep their order inside a node.
  std::vector<std::pair<int32_t, uint32_t>> by_node;
  for (uint32_t i = 0; i < n; ++i)
    by_node.emplace_back(fabric_.device(lay.gpu[i]).node, i);
  std::stable_sort(by_node.begin(), by_node.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  lay.node_of.assign(n, 0);
  lay.local_of.assign(n, 0);
  for (size_t k = 0; k < by_node.size(); ++k) {
    if (k == 0 || by_node[k].first != by_node[k - 1].first) lay.nodes.emplace_back();
    const uint32_t i = by_node[k].second;
    lay.node_of[i] = static_cast<uint32_t>(lay.nodes.size() - 1);
    lay.local_of[i] = static_cast<uint32_t>(lay.nodes.back().size());
    lay.nodes.back().push_back(i);
  }
  for (const auto& node : lay.nodes)
    lay.max_per_node = std::max(lay.max_per_node, static_cast<uint32_t>(node.size()));
  for (const auto& node : lay.nodes)
    lay.uniform = lay.uniform && node.size() == lay.max_per_node;

  // Direct GPU -> device links of every member, for meshes and NVLS.
  const auto links = fabric_.links();
  std::vector<uint32_t> member_of_device(fabric_.devices().size(), kNone);
  for (uint32_t i = 0; i < n; ++i)
    member_of_device[lay.gpu[i]] = i;
  // A member's links out are the reverses of its links in (in link-id order, as pairs are).
  std::vector<std::vector<LinkId>> out_links(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (LinkId in : in_links_[lay.gpu[i]])
      out_links[i].push_back(links[in].reverse);
  }

  // Ring cycles per node.
  lay.cycles.resize(lay.nodes.size());
  for (size_t v = 0; v < lay.nodes.size(); ++v) {
    const std::vector<uint32_t>& node = lay.nodes[v];
    const size_t p = node.size();
    std::vector<std::vector<uint32_t>>& chosen = lay.cycles[v];
    chosen.push_back(node);  // member order unless direct links give better rings
    if (p < 3) continue;
    // Capacity of direct arcs between the node's members (local indices).
    std::vector<double> cap(p * p, 0.0);
    bool any_direct = false;
    for (size_t a = 0; a < p; ++a) {
      for (LinkId l : out_links[node[a]]) {
        const uint32_t to = member_of_device[links[l].to];
        if (to == kNone || lay.node_of[to] != v) continue;
        cap[a * p + lay.local_of[to]] += link_capacity_[l];
        any_direct = true;
      }
    }
    if (!any_direct) continue;
    // Enumerate directed Hamiltonian cycles over direct arcs, starting at local 0.
    std::vector<std::vector<uint32_t>> found_cycles;
    std::vector<uint32_t> path{0};
    std::vector<bool> used(p, false);
    used[0] = true;
    size_t steps = 0;
    std::vector<uint32_t> next_try{0};  // next candidate successor per depth
    while (!path.empty() && found_cycles.size() < kMaxEnumeratedCycles && steps < kMaxSearchSteps) {
      ++steps;
      const uint32_t last = path.back();
      uint32_t& cand = next_try.back();
      if (path.size() == p) {
        if (cap[last * p] > 0.0) found_cycles.push_back(path);
        used[last] = false;
        path.pop_back();
        next_try.pop_back();
        continue;
      }
      while (cand < p && (used[cand] || cap[last * p + cand] <= 0.0))
        ++cand;
      if (cand == p) {
        used[last] = false;
        path.pop_back();
        next_try.pop_back();
        continue;
      }
      const uint32_t to = cand++;
      used[to] = true;
      path.push_back(to);
      next_try.push_back(0);
    }
    if (found_cycles.empty()) continue;
    // Greedy: add the cycle that keeps the busiest arc least loaded (uses / capacity, bytes
    // split evenly over the chosen cycles); keep the best prefix.
    std::vector<double> uses(p * p, 0.0);
    std::vector<size_t> picked;
    std::vector<size_t> best;
    double best_value = std::numeric_limits<double>::infinity();
    std::vector<bool> taken(found_cycles.size(), false);
    for (size_t k = 1; k <= kMaxRingChannels && k <= found_cycles.size(); ++k) {
      size_t best_cycle = kNone;
      double best_max = std::numeric_limits<double>::infinity();
      for (size_t c = 0; c < found_cycles.size(); ++c) {
        if (taken[c]) continue;
        const auto& cyc = found_cycles[c];
        for (size_t j = 0; j < p; ++j)
          uses[cyc[j] * p + cyc[(j + 1) % p]] += 1.0;
        double worst = 0.0;
        for (size_t a = 0; a < p * p; ++a) {
          if (uses[a] > 0.0) worst = std::max(worst, uses[a] / cap[a]);
        }
        for (size_t j = 0; j < p; ++j)
          uses[cyc[j] * p + cyc[(j + 1) % p]] -= 1.0;
        if (worst < best_max) {
          best_max = worst;
          best_cycle = c;
        }
      }
      if (best_cycle == kNone) break;
      taken[best_cycle] = true;
      picked.push_back(best_cycle);
      const auto& cyc = found_cycles[best_cycle];
      for (size_t j = 0; j < p; ++j)
        uses[cyc[j] * p + cyc[(j + 1) % p]] += 1.0;
      const double value = best_max / static_cast<double>(k);
      if (value < best_value * (1.0 - 1e-12)) {
        best_value = value;
        best = picked;
      }
    }
    chosen.clear();
    for (size_t c : best) {
      std::vector<uint32_t> order;
      for (uint32_t local : found_cycles[c])
        order.push_back(node[local]);
      chosen.push_back(std::move(order));
    }
  }
  // NICs of each member across nodes: the NICs of its node with the shortest route from it (by
  // hops, then latency); members with the same nearest NICs (GPUs under one PCIe switch) split
  // them in order, so GPU i of a DGX H100 gets NIC i and GPU i of an OCI BM.GPU4.8 gets NICs 2i
  // and 2i+1 -- the rail of its own PCIe switch, as NCCL's channels use them.
  lay.nics_of.assign(n, {});
  if (lay.nodes.size() > 1) {
    for (const auto& node : lay.nodes) {
      std::map<std::vector<DeviceIndex>, std::vector<uint32_t>> sharing;  // nearest NICs -> members
      for (uint32_t i : node) {
        std::vector<DeviceIndex> nearest = nearest_nics(lay.gpu[i]);
        if (!nearest.empty()) sharing[std::move(nearest)].push_back(i);
      }
      for (const auto& [nics, sharers] : sharing) {
        for (size_t j = 0; j < sharers.size(); ++j)
          lay.nics_of[sharers[j]] = share_of(nics, j, sharers.size());
      }
    }
    for (const auto& mine : lay.nics_of)
      lay.max_nics = std::max(lay.max_nics, static_cast<uint32_t>(mine.size()));
  }

  uint32_t max_cycles = 1;
  for (const auto& c : lay.cycles)
    max_cycles = std::max(max_cycles, static_cast<uint32_t>(c.size()));
  // Across nodes NCCL runs a channel per (GPU, NIC) so that every NIC carries traffic.
  lay.channels = lay.nodes.size() > 1
                     ? std::max(max_cycles, lay.max_per_node * std::max(lay.max_nics, 1u))
                     : max_cycles;

  // Latency classes, generation and single-node injection caps: intra-node ring arcs,
  // inter-node routes.
  double latency_factor = 0.0;
  const bool one_node = lay.nodes.size() == 1;
  std::array<bool, kCollectiveProtocolCount> capped_by_arcs{};
  for (size_t p = 0; p < kCollectiveProtocolCount; ++p)
    lay.injection_cap[p] = tuning_.protocols[p].injection_cap;
  for (size_t v = 0; v < lay.nodes.size(); ++v) {
    for (const auto& cyc : lay.cycles[v]) {
      for (size_t j = 0; cyc.size() > 1 && j < cyc.size(); ++j) {
        for (LinkId l : path(lay.gpu[cyc[j]], lay.gpu[cyc[(j + 1) % cyc.size()]])) {
          lay.intra_class = worse(lay.intra_class, link_family_[l]->link_class);
          latency_factor = std::max(latency_factor, tuning_.latency_factor_for(links[l].kind));
          for (size_t p = 0; one_node && p < kCollectiveProtocolCount; ++p) {
            const Bandwidth cap = tuning_.single_node_injection_cap_for(
                static_cast<CollectiveProtocol>(p), links[l].kind);
            // The tightest cap over the arcs; zero is no cap.
            Bandwidth& mine = lay.injection_cap[p];
            if (!capped_by_arcs[p] || mine.bytes_per_second() <= 0.0 ||
                (cap.bytes_per_second() > 0.0 && cap < mine))
              mine = cap;
            capped_by_arcs[p] = true;
          }
        }
      }
    }
  }
  lay.latency_factor = latency_factor > 0.0 ? latency_factor : 1.0;
  if (lay.nodes.size() > 1) {
    lay.inter_class = LinkClass::kNvlink;
    for (size_t v = 0; v < lay.nodes.size(); ++v) {
      // A node's way out: the first member's path to its NIC and that NIC's network links, or,
      // without NICs, the fabric's route to the next node.
      const uint32_t first = lay.nodes[v].front();
      std::vector<LinkId> way_out;
      if (!lay.nics_of[first].empty()) {
        const DeviceIndex nic = lay.nics_of[first].front();
        way_out = path(lay.gpu[first], nic);
        for (LinkId in : in_links_[nic]) {
          if (fabric_.device(links[in].from).kind == DeviceKind::kNetworkSwitch)
            way_out.push_back(in);
        }
      } else {
        const uint32_t next = lay.nodes[(v + 1) % lay.nodes.size()].front();
        way_out = fabric_.route(lay.gpu[first], lay.gpu[next]);
      }
      for (LinkId l : way_out) {
        const LinkFamily& f = *link_family_[l];
        lay.inter_class = worse(lay.inter_class, f.link_class);
        for (size_t p = 0; p < kCollectiveProtocolCount; ++p)
          lay.inter_extra[p] = std::max(lay.inter_extra[p], f.extra_hop_latency[p]);
      }
    }
  }

  // NVLS: every node's members attach directly to the same NVSwitch(es) over NVLS-capable links,
  // and a node holds at least kNvlsMinGpusPerNode of them: NCCL leaves NVLS off when the
  // communicator has two or fewer GPUs in the node (NVIDIA/nccl src/transport/nvls.cc,
  // ncclNvlsInit: no NVLS support for gpuCount <= 2, NCCL 2.18.1 to 2.28.6, the versions of the
  // measured sweeps; NCCL 2.28.7 lowered it to gpuCount < 2).
  if (lay.uniform && lay.max_per_node >= kNvlsMinGpusPerNode &&
      !tuning_.nvls_link_prefixes.empty()) {
    auto nvls_capable = [&](const FabricLink& link) {
      if (fabric_.device(link.to).kind != DeviceKind::kNvSwitch) return false;
      for (const std::string& prefix : tuning_.nvls_link_prefixes) {
        if (link.kind.compare(0, prefix.size(), prefix) == 0) return true;
      }
      return false;
    };
    std::vector<std::vector<std::pair<DeviceIndex, double>>> planes(n);
    bool ok = true;
    double nvls_efficiency = 1.0;
    double nvls_fill_bytes = 0.0;
    for (const auto& node : lay.nodes) {
      // Switches every member of the node reaches directly.
      std::vector<DeviceIndex> common;
      for (size_t k = 0; k < node.size(); ++k) {
        std::vector<DeviceIndex> mine;
        for (LinkId l : out_links[node[k]]) {
          if (nvls_capable(links[l])) mine.push_back(links[l].to);
        }
        std::sort(mine.begin(), mine.end());
        mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
        if (k == 0) {
          common = mine;
        } else {
          std::vector<DeviceIndex> both;
          std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                                std::back_inserter(both));
          common = std::move(both);
        }
      }
      if (common.empty()) {
        ok = false;
        break;
      }
      for (uint32_t i : node) {
        double total = 0.0;
        for (LinkId l : out_links[i]) {
          if (std::binary_search(common.begin(), common.end(), links[l].to) &&
              nvls_capable(links[l]))
            total += link_capacity_[l];
        }
        for (DeviceIndex sw : common) {
          double share = 0.0;
          for (LinkId l : out_links[i]) {
            if (links[l].to == sw && nvls_capable(links[l])) {
              share += link_capacity_[l];
              nvls_efficiency = std::min(nvls_efficiency, tuning_.nvls_efficiency_for(
                                                              links[l].kind, lay.nodes.size() > 1));
              nvls_fill_bytes =
                  std::max(nvls_fill_bytes, tuning_.nvls_pipeline_fill_bytes_for(links[l].kind));
            }
          }
          planes[i].emplace_back(sw, share / total);
        }
      }
    }
    if (ok) {
      lay.nvls_planes = std::move(planes);
      lay.nvls_efficiency = nvls_efficiency;
      lay.nvls_fill_bytes = nvls_fill_bytes;
    }
  }

  return *layouts_.emplace(members, std::move(owned)).first->second;
}

std::vector<std::vector<uint32_t>> CollectivePlanner::ring_cycles(
    const std::vector<RankId>& members) {
  return layout(members).cycles.front();
}

namespace {

/// Member order of a node for channel `c`: cycle c mod K, starting `shift` places along it.
std::vector<uint32_t> channel_order(const std::vector<std::vector<uint32_t>>& cycles, uint32_t c,
                                    uint64_t shift) {
  const auto& cyc = cycles[c % cycles.size()];
  std::vector<uint32_t> order(cyc.size());
  for (size_t j = 0; j < cyc.size(); ++j)
    order[j] = cyc[(j + shift) % cyc.size()];
  return order;
}

}  // namespace

std::vector<CollectivePlanner::Candidate> CollectivePlanner::build(
    const CollectiveDesc& c, Layout& lay, std::optional<CollectiveAlgorithm> only) {
  const uint32_t n = static_cast<uint32_t>(lay.size());
  const uint32_t nodes = lay.node_count();
  const uint32_t p = lay.max_per_node;
  const double nd = static_cast<double>(n);
  const auto& gpu = lay.gpu;

  auto structure = [&](CollectiveAlgorithm a) -> const FlowStructure* {
    const auto key = std::make_pair(c.kind, a);
    auto it = lay.structures.find(key);
    if (it != lay.structures.end()) return it->second.get();
    FlowCollector fc;
    const uint32_t channels = lay.channels;
    const double per_channel = 1.0 / channels;
    // NIC of member i in channel ch (channels cycle over a member's NICs every p channels).
    auto nic = [&](uint32_t i, uint32_t ch) -> DeviceIndex {
      const auto& mine = lay.nics_of[i];
      return mine.empty() ? kNone : mine[(ch / std::max(p, 1u)) % mine.size()];
    };
    // A flow between members of different nodes that leaves through the channel's NIC of the
    // sender; the route picks the receiver's NIC on the same rail (the cheapest entry).
    auto add_across = [&](uint32_t from, uint32_t to, uint32_t ch, double unit) {
      const DeviceIndex nic_from = nic(from, ch);
      if (nic_from == kNone) {
        fc.add(gpu[from], gpu[to], unit, from);
      } else {
        fc.add_via(gpu[from], gpu[to], nic_from, nic(to, ch), unit, from);
      }
    };
    // Channel ch of a ring: node v starts (ch - v) places along its cycle, so that the member
    // leaving node v and the one entering node v + 1 have the same local rank and hence the same
    // rail (rail-matched rings; only the wrap-around may cross rails).
    auto ring_for_channel = [&](uint32_t ch) {
      std::vector<uint32_t> ring;
      for (uint32_t v = 0; v < nodes; ++v) {
        const uint64_t size = lay.cycles[v].front().size();
        const uint64_t shift = nodes > 1 ? (ch + size * nodes - v) % size : 0;
        const auto order = channel_order(lay.cycles[v], ch, shift);
        ring.insert(ring.end(), order.begin(), order.end());
      }
      return ring;
    };
    // Inter-node double binary trees among one member of every node (head_of(v)), each tree
    // carrying `unit` per byte of S up and down, spread over the members' NICs.
    auto inter_trees = [&](auto&& head_of, double unit) {
      const auto trees = double_binary_tree(nodes);
      for (const auto& parent : trees) {
        for (uint32_t v = 0; v < nodes; ++v) {
          if (parent[v] == kNone) continue;
          const uint32_t child = head_of(v);
          const uint32_t up = head_of(parent[v]);
          const uint32_t ways = std::max<uint32_t>(
              1,
              static_cast<uint32_t>(std::min(lay.nics_of[child].size(), lay.nics_of[up].size())));
          for (uint32_t x = 0; x < ways; ++x) {
            add_across(child, up, x * p, unit / ways);
            add_across(up, child, x * p, unit / ways);
          }
        }
      }
    };
    switch (a) {
      case CollectiveAlgorithm::kRing: {
        double per_arc = 0.0;
        switch (c.kind) {
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
        for (uint32_t ch = 0; ch < channels; ++ch) {
          const auto ring = ring_for_channel(ch);
          for (uint32_t j = 0; j < n; ++j) {
            const uint32_t from = ring[j];
            const uint32_t to = ring[(j + 1) % n];
            // A broadcast is the ring cut before the root (member 0): a pipelined chain.
            if (c.kind == CollectiveKind::kBroadcast && to == 0) continue;
            if (lay.node_of[from] != lay.node_of[to]) {
              add_across(from, to, ch, per_arc * per_channel);
            } else {
              fc.add(gpu[from], gpu[to], per_arc * per_channel, from);
            }
          }
        }
        break;
      }
      case CollectiveAlgorithm::kTree: {
        const double eff = tuning_.tree_efficiency;
        const auto trees = double_binary_tree(nodes);
        for (uint32_t ch = 0; ch < channels; ++ch) {
          // Every node's chain starts at the same local rank, so tree edges between node heads
          // stay on one rail.
          std::vector<std::vector<uint32_t>> chains;
          for (const auto& node_cycles : lay.cycles)
            chains.push_back(channel_order(node_cycles, ch, nodes > 1 ? ch : 0));
          // Both trees of the channel share the chain: S/C up and S/C down on each chain arc.
          for (const auto& chain : chains) {
            for (size_t j = 0; j + 1 < chain.size(); ++j) {
              fc.add(gpu[chain[j + 1]], gpu[chain[j]], per_channel / eff, chain[j + 1]);
              fc.add(gpu[chain[j]], gpu[chain[j + 1]], per_channel / eff, chain[j]);
            }
          }
          for (const auto& parent : trees) {
            for (uint32_t v = 0; v < nodes; ++v) {
              if (parent[v] == kNone) continue;
              const uint32_t child = chains[v].front();
              const uint32_t up = chains[parent[v]].front();
              add_across(child, up, ch, per_channel / 2.0 / eff);
              add_across(up, child, ch, per_channel / 2.0 / eff);
            }
          }
        }
        break;
      }
      case CollectiveAlgorithm::kNvls: {
        const double pd = static_cast<double>(p);
        const double volume = (1.0 + 1.0 / pd) / lay.nvls_efficiency;
        for (uint32_t i = 0; i < n; ++i) {
          for (const auto& [sw, share] : lay.nvls_planes[i]) {
            fc.add(gpu[i], sw, volume * share, i);
            fc.add(sw, gpu[i], volume * share, kNone);
          }
        }
        for (uint32_t k = 0; k < p && nodes > 1; ++k)
          inter_trees([&](uint32_t v) { return lay.nodes[v][k]; }, 1.0 / (2.0 * pd));
        break;
      }
      case CollectiveAlgorithm::kHierarchical: {
        const double pd = static_cast<double>(p);
        for (const auto& node_cycles : lay.cycles) {
          const double per_cycle = 1.0 / static_cast<double>(node_cycles.size());
          for (const auto& cyc : node_cycles) {
            for (size_t j = 0; cyc.size() > 1 && j < cyc.size(); ++j) {
              const uint32_t from = cyc[j];
              fc.add(gpu[from], gpu[cyc[(j + 1) % cyc.size()]], 2.0 * (pd - 1.0) / pd * per_cycle,
                     from);
            }
          }
        }
        for (uint32_t k = 0; k < p; ++k)
          inter_trees([&](uint32_t v) { return lay.nodes[v][k]; }, 1.0 / (2.0 * pd));
        break;
      }
      case CollectiveAlgorithm::kDirect: {
        if (c.kind == CollectiveKind::kSendRecv) {
          // Across nodes NCCL's p2p leaves through the sender's NIC and enters through the
          // receiver's (the same rail when both have the same local rank): the planner's
          // leaf [-> spine] -> leaf path, with no whole-fabric search per receiver, which
          // would dominate pipeline-parallel runs on thousands of GPUs.
          const std::vector<DeviceIndex>& out = own_nics(gpu[0]);
          const std::vector<DeviceIndex>& in = own_nics(gpu[1]);
          if (nodes > 1 && !out.empty() && !in.empty()) {
            fc.add_via(gpu[0], gpu[1], out.front(), in.front(), 1.0, 0);
          } else {
            fc.add(gpu[0], gpu[1], 1.0, 0);
          }
        } else {
          throw std::logic_error("collective planner: all-to-all structures are built per sizes");
        }
        break;
      }
    }
    auto s = std::make_unique<FlowStructure>(
        fc.route(fabric_, in_links_, link_capacity_, n,
                 [this](DeviceIndex from, DeviceIndex to) { return path(from, to); }));
    return lay.structures.emplace(key, std::move(s)).first->second.get();
  };

  // The direct all-to-all for the collective's sizes: flows with payload bytes (scale 1), only
  // those that carry bytes. Within a node each pair is one flow. Across nodes NCCL's PXN
  // forwards over NVLink to the sender-node GPU with the receiver's local rank (the proxy),
  // which sends through its own NIC, so inter-node traffic stays rail-matched; the proxy's flow
  // to a receiver carries the bytes of every sender of its node. Flows with the same path
  // description merge, their bytes adding up in row-major pair order.
  //
  // Flow order: as if every pair (i, j), i != j, were visited row-major, each adding its direct
  // or forwarding flow (slot 0) and then its proxy flow (slot 1), zero-byte pairs included:
  // every flow is sorted by its first appearance (i n + j, slot), computed in O(1) per flow, so
  // the plan does not depend on which pairs carry bytes. Only the spines may differ from such a
  // visit: FlowCollector::network_path spreads the flows between two different leaves over
  // their spines in routing order, and only flows that carry bytes are routed here, so where
  // flows cross leaves (fabrics with several leaf groups, or members not in rank order, whose
  // proxies sit on another rail than the receiver) a flow may take another spine than it would
  // if zero-byte pairs took their turns. Adaptive routing spreads the traffic that exists, so
  // this is the more physical choice.
  auto all_to_all_structure = [&]() -> const FlowStructure* {
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
    auto s = std::make_unique<FlowStructure>(
        fc.route(fabric_, in_links_, link_capacity_, n,
                 [this](DeviceIndex from, DeviceIndex to) { return path(from, to); }));
    return lay.all_to_alls.emplace(std::move(key), std::move(s)).first->second.get();
  };

  // Applicable algorithms for the kind.
  std::vector<CollectiveAlgorithm> algorithms;
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      if (only && *only != CollectiveAlgorithm::kDirect) {
        algorithms = {*only};
      } else {
        algorithms = tuning_.all_reduce_algorithms;
      }
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:
      algorithms = {CollectiveAlgorithm::kRing};
      break;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      algorithms = {CollectiveAlgorithm::kDirect};
      break;
  }
  if (only && std::find(algorithms.begin(), algorithms.end(), *only) == algorithms.end()) {
    throw std::invalid_argument(fmt::format("{}: algorithm {} does not apply",
                                            collective_kind_name(c.kind),
                                            collective_algorithm_name(*only)));
  }
  auto applicable = [&](CollectiveAlgorithm a, std::string* why) {
    switch (a) {
      case CollectiveAlgorithm::kNvls:
        if (lay.nvls_planes.empty()) {
          *why = "needs every node's members attached to one NVSwitch over NVLS-capable links";
          return false;
        }
        return true;
      case CollectiveAlgorithm::kHierarchical:
        if (!lay.uniform || nodes < 2 || p < 2) {
          *why = "needs several nodes with the same number (>= 2) of members each";
          return false;
        }
        return true;
      default:
        return true;
    }
  };

  const Duration launch = tuning_.launch_overhead;
  const double log_nodes = static_cast<double>(log2_floor(nodes));
  std::vector<Candidate> out;
  for (CollectiveAlgorithm a : algorithms) {
    std::string why;
    if (!applicable(a, &why)) {
      if (only) {
        throw std::invalid_argument(fmt::format("{}: algorithm {} does not apply: {}",
                                                collective_kind_name(c.kind),
                                                collective_algorithm_name(a), why));
      }
      continue;
    }
    const bool all_to_all =
        a == CollectiveAlgorithm::kDirect && c.kind == CollectiveKind::kAllToAll;
    const FlowStructure* s = all_to_all ? all_to_all_structure() : structure(a);
    // All-to-all structures carry bytes already.
    const double scale = all_to_all ? 1.0 : static_cast<double>(c.bytes);
    const double unit_link_seconds = s->unit_link_seconds;
    const double unit_source_bytes = s->unit_source_bytes;

    for (CollectiveProtocol proto : tuning_.enabled_protocols) {
      if (a == CollectiveAlgorithm::kNvls && proto != CollectiveProtocol::kSimple) continue;
      const ProtocolTuning& pt = tuning_.protocol(proto);
      const size_t pi = index_of(proto);
      auto hop = [&](LinkClass cls, LatencyColumn col) {
        return tuning_.hop_latency(proto, cls, col);
      };
      // Base and intra-node latencies in this GPU generation.
      auto gen = [&](Duration d) {
        return lay.latency_factor == 1.0
                   ? d
                   : Duration::from_seconds_f(d.seconds() * lay.latency_factor);
      };
      const Duration inter_extra = lay.inter_extra[pi];
      // NCCL ncclTopoTuneModel latency formulas (tuning.cc, see nccl_tuning.cpp for the commit).
      Duration lat = Duration::zero();
      const auto steps = [](uint32_t k) { return static_cast<int64_t>(k); };
      switch (a) {
        case CollectiveAlgorithm::kRing: {
          uint32_t nsteps = n - 1;
          uint32_t inter_steps = nodes - 1;
          if (c.kind == CollectiveKind::kAllReduce) {
            nsteps = 2 * (n - 1);
            inter_steps = 2 * (nodes - 1);
          }
          Duration intra = gen(hop(lay.intra_class, LatencyColumn::kRing));
          if (nodes > 1) {
            // Inter-node rings still pay the network post overhead (the proxy's, not the GPU
            // generation's) on every step.
            const Duration overhead =
                tuning_.net_overhead * (proto == CollectiveProtocol::kSimple ? 3 : 1);
            intra = max(intra, overhead);
          }
          const Duration inter = hop(lay.inter_class, LatencyColumn::kRing) + inter_extra;
          lat = gen(pt.base_latency[static_cast<size_t>(LatencyColumn::kRing)]) +
                intra * steps(nsteps - inter_steps) + inter * steps(inter_steps);
          break;
        }
        case CollectiveAlgorithm::kTree: {
          const Duration intra = hop(lay.intra_class, LatencyColumn::kTree);
          const Duration inter = hop(lay.inter_class, LatencyColumn::kTree) + inter_extra;
          lat = gen(pt.base_latency[static_cast<size_t>(LatencyColumn::kTree)] +
                    intra * steps(p - 1) * 2) +
                Duration::from_seconds_f(inter.seconds() * log_nodes) * 2;
          break;
        }
        case CollectiveAlgorithm::kNvls: {
          lat = gen(hop(LinkClass::kNvlink, LatencyColumn::kNvls));
          if (nodes > 1) {
            const Duration inter = hop(lay.inter_class, LatencyColumn::kNvls) + inter_extra;
            lat += Duration::from_seconds_f(inter.seconds() * 2.0 * log_nodes);
          }
          break;
        }
        case CollectiveAlgorithm::kHierarchical: {
          const Duration intra = hop(lay.intra_class, LatencyColumn::kRing);
          const Duration inter = hop(lay.inter_class, LatencyColumn::kTree) + inter_extra;
          lat = gen(pt.base_latency[static_cast<size_t>(LatencyColumn::kRing)] +
                    intra * steps(2 * (p - 1))) +
                Duration::from_seconds_f(inter.seconds() * 2.0 * log_nodes);
          break;
        }
        case CollectiveAlgorithm::kDirect: {
          const LinkClass cls = nodes > 1 ? lay.inter_class : lay.intra_class;
          lat = nodes > 1 ? gen(pt.base_latency[static_cast<size_t>(LatencyColumn::kRing)]) +
                                hop(cls, LatencyColumn::kRing) + inter_extra
                          : gen(pt.base_latency[static_cast<size_t>(LatencyColumn::kRing)] +
                                hop(cls, LatencyColumn::kRing));
          break;
        }
      }
      // Tree all-reduce moves its bytes at NCCL's measured medium-size fraction of its rate.
      const double bytes_scale =
          a == CollectiveAlgorithm::kTree && c.kind == CollectiveKind::kAllReduce
              ? scale / tree_correction(proto, c.bytes)
              : scale;
      double seconds = bytes_scale * unit_link_seconds * pt.wire_factor;
      const double cap = lay.injection_cap[pi].bytes_per_second();
      if (cap > 0.0) seconds = std::max(seconds, bytes_scale * unit_source_bytes / cap);
      Candidate cand;
      cand.choice.algorithm = a;
      cand.choice.protocol = proto;
      if (a == CollectiveAlgorithm::kNvls) {
        // Until the NVLS pipeline is full, its bytes cost their transfer time twice.
        const double fill = lay.nvls_fill_bytes * (nodes == 1 ? 1.0 : kNvlsTreeFillStages);
        lat += Duration::from_seconds_f(std::min(scale, fill) * unit_link_seconds * pt.wire_factor);
      }
      cand.choice.latency = launch + lat;
      cand.choice.predicted = cand.choice.latency + Duration::from_seconds_f(seconds);
      cand.structure = s;
      cand.scale = bytes_scale;
      out.push_back(std::move(cand));
    }
  }
  return out;
}

std::vector<CollectiveChoice> CollectivePlanner::candidates(const CollectiveDesc& collective) {
  check(collective);
  Layout& lay = layout(collective.members);
  std::vector<CollectiveChoice> out;
  for (const Candidate& c : build(collective, lay, std::nullopt))
    out.push_back(c.choice);
  return out;
}

CollectivePlan CollectivePlanner::plan(const CollectiveDesc& collective) {
  return plan_impl(collective, std::nullopt, std::nullopt);
}

CollectivePlan CollectivePlanner::plan(const CollectiveDesc& collective,
                                       CollectiveAlgorithm algorithm, CollectiveProtocol protocol) {
  return plan_impl(collective, algorithm, protocol);
}

CollectivePlan CollectivePlanner::plan_impl(const CollectiveDesc& collective,
                                            std::optional<CollectiveAlgorithm> algorithm,
                                            std::optional<CollectiveProtocol> protocol) {
  check(collective);
  CollectivePlan plan;
  bool moves = collective.bytes > 0;
  if (collective.kind == CollectiveKind::kAllToAll && !collective.send_bytes.empty())
    moves = collective.send_bytes.moves_bytes();
  // NCCL returns at once for a group of one or an empty buffer.
  if (collective.members.size() < 2 || !moves) {
    plan.choice.algorithm =
        collective.kind == CollectiveKind::kAllToAll || collective.kind == CollectiveKind::kSendRecv
            ? CollectiveAlgorithm::kDirect
            : CollectiveAlgorithm::kRing;
    plan.choice.latency = Duration::zero();
    plan.choice.predicted = Duration::zero();
    return plan;
  }
  Layout& lay = layout(collective.members);
  std::vector<Candidate> cands = build(collective, lay, algorithm);
  const Candidate* best = nullptr;
  for (const Candidate& c : cands) {
    if (protocol && c.choice.protocol != *protocol) continue;
    if (best == nullptr || c.choice.predicted < best->choice.predicted) best = &c;
  }
  if (best == nullptr) {
    throw std::invalid_argument(
        fmt::format("{}: no candidate for algorithm {} with protocol {} (is the protocol enabled?)",
                    collective_kind_name(collective.kind),
                    algorithm ? collective_algorithm_name(*algorithm) : "any",
                    protocol ? collective_protocol_name(*protocol) : "any"));
  }
  plan.choice = best->choice;

  // Materialise the flows: wire bytes, and one injection-cap virtual link per sending member.
  const FlowStructure& s = *best->structure;
  const ProtocolTuning& pt = tuning_.protocol(best->choice.protocol);
  const Bandwidth cap = lay.injection_cap[static_cast<size_t>(best->choice.protocol)];
  const bool capped = cap.bytes_per_second() > 0.0;
  const auto fabric_links = static_cast<uint32_t>(link_capacity_.size());
  std::vector<uint32_t> cap_link(collective.members.size(), kNone);
  const double scale = best->scale;
  FlowBatch& batch = plan.flows;
  batch.links.reserve(s.links.size() + (capped ? s.unit_bytes.size() : 0));
  batch.bytes.reserve(s.unit_bytes.size());
  batch.offsets.reserve(s.unit_bytes.size() + 1);
  for (size_t f = 0; f < s.unit_bytes.size(); ++f) {
    const double payload = s.unit_bytes[f] * scale;
    if (payload <= 0.0) continue;
    batch.links.insert(batch.links.end(), s.links.begin() + s.offsets[f],
                       s.links.begin() + s.offsets[f + 1]);
    if (capped && s.source[f] != kNone) {
      uint32_t& v = cap_link[s.source[f]];
      if (v == kNone) {
        v = fabric_links + static_cast<uint32_t>(batch.virtual_capacities.size());
        batch.virtual_capacities.push_back(cap * pt.wire_factor);
      }
      batch.links.push_back(v);
    }
    batch.offsets.push_back(static_cast<uint32_t>(batch.links.size()));
    batch.bytes.push_back(payload * pt.wire_factor);
  }
  return plan;
}

}  // namespace upsim

// Flow structures: the flows of one collective algorithm for one member set, routed, per byte
// of the collective's size, and the collector that builds them. Part of the collective planner
// (collective_planner.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "topology/collectives/fabric_paths.h"
#include "topology/fabric.h"

namespace upsim::collectives {

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

  /// Routes every flow (FabricPaths::path inside nodes, the sender's and receiver's NICs and
  /// leaf [-> spine] -> leaf between nodes) into a structure over `members` members.
  FlowStructure route(FabricPaths& paths, size_t members);

 private:
  /// Appends to `route` the network path from NIC `from` to NIC `to`: up to `from`'s switch,
  /// over one of that switch's spines shared with `to`'s switch (taken in turn, so that the
  /// flows of a structure between two leaves spread evenly over their spines, as InfiniBand
  /// adaptive routing and NCCL's many channels do, where the fabric's per-pair hash would leave
  /// some spine links busier), then down to `to`. Returns false (route unchanged) when `to` is
  /// kNone or the path is not leaf [-> spine] -> leaf.
  bool network_path(const Fabric& fabric, std::span<const std::vector<LinkId>> in_links,
                    DeviceIndex from, DeviceIndex to, std::vector<LinkId>& route);
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

}  // namespace upsim::collectives

// ChannelFlows: how an algorithm lays its flows on a member set's channels -- the NIC each
// member uses in a channel, flows that cross nodes through them, the rail-matched ring of a
// channel, and double binary trees between nodes. Part of the collective planner
// (collective_planner.h); the algorithm files build their structures with it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "topology/collectives/collective_layout.h"
#include "topology/collectives/flow_structure.h"

namespace upsim::collectives {

/// Parent of every index 0..n-1 in an in-order balanced binary tree (root: kNone). Interior
/// nodes and leaves alternate along the indices, as in NCCL's double binary tree.
std::vector<uint32_t> binary_tree(uint32_t n);

/// NCCL's double binary tree over n indices: the second tree mirrors the first when n is even
/// and shifts it by one when n is odd, so that most interior nodes of one are leaves of the other.
std::array<std::vector<uint32_t>, 2> double_binary_tree(uint32_t n);

/// Member order of a node for channel `c`: cycle c mod K, starting `shift` places along it.
std::vector<uint32_t> channel_order(const std::vector<std::vector<uint32_t>>& cycles, uint32_t c,
                                    uint64_t shift);

class ChannelFlows {
 public:
  ChannelFlows(const CollectiveLayout& layout, FlowCollector& flows)
      : layout_(layout), flows_(flows) {}

  const CollectiveLayout& layout() const { return layout_; }
  FlowCollector& flows() { return flows_; }
  /// Member i's flow to member j (inside a node, or over the fabric's route), `unit` bytes per
  /// byte of the collective's size.
  void add(uint32_t from, uint32_t to, double unit);
  /// NIC of member i in channel ch (channels cycle over a member's NICs every p channels);
  /// kNone without NICs.
  DeviceIndex nic(uint32_t member, uint32_t channel) const;
  /// A flow between members of different nodes that leaves through the channel's NIC of the
  /// sender and enters through the receiver's NIC of the same channel (the same rail).
  void add_across(uint32_t from, uint32_t to, uint32_t channel, double unit);
  /// Channel ch of a ring: node v starts (ch - v) places along its cycle, so that the member
  /// leaving node v and the one entering node v + 1 have the same local rank and hence the same
  /// rail (rail-matched rings; only the wrap-around may cross rails).
  std::vector<uint32_t> ring_for_channel(uint32_t channel) const;
  /// Inter-node double binary trees among one member of every node (head_of(v)), each tree
  /// carrying `unit` per byte of S up and down, spread over the members' NICs.
  void inter_trees(const std::function<uint32_t(uint32_t node)>& head_of, double unit);

 private:
  const CollectiveLayout& layout_;
  FlowCollector& flows_;
};

}  // namespace upsim::collectives

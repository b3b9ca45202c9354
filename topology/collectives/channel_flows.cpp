#include "topology/collectives/channel_flows.h"

#include <algorithm>

namespace upsim::collectives {

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

std::vector<uint32_t> channel_order(const std::vector<std::vector<uint32_t>>& cycles, uint32_t c,
                                    uint64_t shift) {
  const auto& cyc = cycles[c % cycles.size()];
  std::vector<uint32_t> order(cyc.size());
  for (size_t j = 0; j < cyc.size(); ++j)
    order[j] = cyc[(j + shift) % cyc.size()];
  return order;
}

void ChannelFlows::add(uint32_t from, uint32_t to, double unit) {
  flows_.add(layout_.gpu[from], layout_.gpu[to], unit, from);
}

DeviceIndex ChannelFlows::nic(uint32_t member, uint32_t channel) const {
  const auto& mine = layout_.nics_of[member];
  return mine.empty() ? kNone : mine[(channel / std::max(layout_.max_per_node, 1u)) % mine.size()];
}

void ChannelFlows::add_across(uint32_t from, uint32_t to, uint32_t channel, double unit) {
  const DeviceIndex nic_from = nic(from, channel);
  if (nic_from == kNone) {
    flows_.add(layout_.gpu[from], layout_.gpu[to], unit, from);
  } else {
    flows_.add_via(layout_.gpu[from], layout_.gpu[to], nic_from, nic(to, channel), unit, from);
  }
}

std::vector<uint32_t> ChannelFlows::ring_for_channel(uint32_t channel) const {
  const uint32_t nodes = layout_.node_count();
  std::vector<uint32_t> ring;
  for (uint32_t v = 0; v < nodes; ++v) {
    const uint64_t size = layout_.cycles[v].front().size();
    const uint64_t shift = nodes > 1 ? (channel + size * nodes - v) % size : 0;
    const auto order = channel_order(layout_.cycles[v], channel, shift);
    ring.insert(ring.end(), order.begin(), order.end());
  }
  return ring;
}

void ChannelFlows::inter_trees(const std::function<uint32_t(uint32_t node)>& head_of, double unit) {
  const uint32_t nodes = layout_.node_count();
  const uint32_t p = layout_.max_per_node;
  const auto trees = double_binary_tree(nodes);
  for (const auto& parent : trees) {
    for (uint32_t v = 0; v < nodes; ++v) {
      if (parent[v] == kNone) continue;
      const uint32_t child = head_of(v);
      const uint32_t up = head_of(parent[v]);
      const uint32_t ways =
          std::max<uint32_t>(1, static_cast<uint32_t>(std::min(layout_.nics_of[child].size(),
                                                               layout_.nics_of[up].size())));
      for (uint32_t x = 0; x < ways; ++x) {
        add_across(child, up, x * p, unit / ways);
        add_across(up, child, x * p, unit / ways);
      }
    }
  }
}

}  // namespace upsim::collectives

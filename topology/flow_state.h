// The state the flow network (topology/flow_network.h) keeps of its links, flows and their
// groups, shared by its event handling and its max-min repricing
// (topology/max_min_repricing.h). Plain data; the invariants are the network's.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sim/network_model.h"

namespace upsim::flow_state {

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

/// One hop of a flow on a link's list: the flow and which hop of its route this is.
struct Entry {
  uint32_t flow;
  uint32_t hop;
};
/// A link of the network: fabric, device memory or a batch's virtual cap; one cache line.
/// What the repricing needs only while it runs is in a dense array of its own
/// (MaxMinRepricing), found through `repricing_slot`.
struct alignas(64) Link {
  double capacity = 0.0;
  std::vector<Entry> flows;
  double reported_rate = 0.0;
  // Total rate of the flows on the link, kept as rates change (exactly 0 when it has none).
  double load = 0.0;
  uint32_t reported_flows = 0;
  // Flows whose bottleneck is this link.
  uint32_t bottlenecked = 0;
  // == MaxMinRepricing's recomputation number while that one checks the link, and then the
  // link's slot in its scratch (the link's position in its list of checked links).
  uint32_t repricing = 0;
  uint32_t repricing_slot = 0;
};
static_assert(sizeof(Link) == 64);
/// One hop of a flow's route: the link and the flow's position in that link's flow list.
struct Hop {
  uint32_t link;
  uint32_t pos;
};
/// One flow: its group, route, bytes left, rate and bottleneck; one cache line.
struct alignas(64) Flow {
  // Its route: the group's hops[offsets[i], offsets[i + 1]) for the group's flow i, kept here
  // so that the hot loops need not visit the group (whose vectors do not change while the
  // flow lives).
  Hop* route = nullptr;
  double remaining = 0.0;
  double rate = 0.0;
  // When `remaining` was last brought up to date; the projected finish follows from these.
  int64_t updated_ps = 0;
  uint32_t group = kNone;
  uint32_t hops = 0;
  uint32_t version = 0;
  // The link this flow's rate is fair on (saturated, no flow on it faster); kNone until the
  // flow is first priced. Kept true between recomputations: the incremental repricing relies
  // on it to know which untouched flows a change can reach.
  uint32_t bottleneck = kNone;
  // == MaxMinRepricing's recomputation number when that one reprices the flow, and then the
  // flow's position in its list of repriced flows.
  uint32_t inside = 0;
  uint32_t inside_pos = 0;
};
static_assert(sizeof(Flow) == 64);
/// The flows of one operation (a FlowBatch) and its completion.
struct Group {
  // The flows' routes, flow i's hops[offsets[i], offsets[i + 1]): each link with the flow's
  // position in that link's flow list (set when the flow starts).
  std::vector<Hop> hops;
  std::vector<uint32_t> offsets;
  std::vector<double> bytes;
  std::vector<uint32_t> flow_ids;
  std::vector<uint32_t> virtual_links;
  uint32_t unfinished = 0;
  NetworkModel::Completion on_done;
};

/// The hops of a flow's route, in order.
inline std::span<const Hop> route_of(const Flow& f) {
  return {f.route, f.hops};
}

/// Every link, flow and group, indexed by id (freed ids are reused by the network).
struct State {
  std::vector<Link> links;
  std::vector<Flow> flows;
  std::vector<Group> groups;
};

}  // namespace upsim::flow_state

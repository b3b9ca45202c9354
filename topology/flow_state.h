// The state the flow network (topology/flow_network.h) keeps of its links, flows and their
// groups, shared by its event handling and its max-min repricing
// (topology/max_min_repricing.h). Plain data; the invariants are the network's.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/network_model.h"

namespace upsim::flow_state {

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

/// One hop of a flow on a link's list: the flow and which hop of its route this is.
struct Entry {
  uint32_t flow;
  uint32_t hop;
};
/// A link of the network: fabric, device memory or a batch's virtual cap.
struct Link {
  double capacity = 0.0;
  std::vector<Entry> flows;
  double reported_rate = 0.0;
  uint32_t reported_flows = 0;
  // Total rate of the flows on the link, kept as rates change (exactly 0 when it has none).
  double load = 0.0;
  // Flows whose bottleneck is this link.
  uint32_t bottlenecked = 0;
  // Scratch of one recomputation: the repriced flows' rates on the link before and after.
  double repriced_old = 0.0;
  double repriced_new = 0.0;
  double residual = 0.0;
  uint32_t unfrozen = 0;
  // Repriced flows whose bottleneck (before this recomputation) is this link.
  uint32_t repriced_bottlenecked = 0;
  // The repriced flows crossing the link: MaxMinRepricing's members_[begin, end).
  uint32_t members_begin = 0;
  uint32_t members_end = 0;
  // == MaxMinRepricing's solve number when a repriced flow crosses the link in that solve.
  uint32_t touched = 0;
  // == MaxMinRepricing's recomputation number when the link is in that one's check list.
  uint32_t checked = 0;
};
/// One flow: its group, bytes left, rate, projected finish and bottleneck.
struct Flow {
  uint32_t group = kNone;
  uint32_t index = 0;  // flow index in its group
  double remaining = 0.0;
  double rate = 0.0;
  double new_rate = 0.0;
  int64_t updated_ps = 0;
  int64_t finish_ps = 0;
  uint32_t version = 0;
  // The link this flow's rate is fair on (saturated, no flow on it faster); kNone until the
  // flow is first priced. Kept true between recomputations: the incremental repricing relies
  // on it to know which untouched flows a change can reach.
  uint32_t bottleneck = kNone;
  uint32_t new_bottleneck = kNone;
  // == MaxMinRepricing's recomputation number when that one reprices the flow.
  uint32_t inside = 0;
};
/// The flows of one operation (a FlowBatch) and its completion.
struct Group {
  std::vector<uint32_t> links;
  std::vector<uint32_t> offsets;
  std::vector<double> bytes;
  std::vector<uint32_t> hop_pos;  // position of (flow, hop) in its link's flow list
  std::vector<uint32_t> flow_ids;
  std::vector<uint32_t> virtual_links;
  uint32_t unfinished = 0;
  NetworkModel::Completion on_done;
};

/// Every link, flow and group, indexed by id (freed ids are reused by the network).
struct State {
  std::vector<Link> links;
  std::vector<Flow> flows;
  std::vector<Group> groups;
};

}  // namespace upsim::flow_state

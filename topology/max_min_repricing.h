// MaxMinRepricing: the max-min fair rates of the flow network's flows (topology/flow_network.h)
// after their sets changed, repricing only the flows a change reaches (Repricing::kIncremental)
// or the whole connected component of the change (Repricing::kComponent, the reference); both
// give the max-min allocation. It gives the flows it reprices a new rate and bottleneck
// (repriced()); the network applies them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "topology/flow_network.h"
#include "topology/flow_state.h"

namespace upsim {

class MaxMinRepricing {
 public:
  /// `state` and `stats` must outlive the repricing.
  MaxMinRepricing(flow_state::State& state, FlowNetworkStats& stats)
      : links_(state.links), flows_(state.flows), stats_(stats) {}

  /// `max_passes` >= 1 (std::invalid_argument otherwise).
  void set_mode(Repricing mode, int max_passes = kDefaultRepricingPasses);

  /// A repriced flow: what the solve and the fairness check read of it, copied once from its
  /// Flow (whose cache line is not visited again until the network applies the result), and the
  /// result. Its hops are named by their links' slots in the recomputation's scratch.
  struct RepricedFlow {
    double old_rate = 0.0;
    // The max-min rate and the link it is fair on (bottleneck); new_rate < 0 while unfrozen.
    double new_rate = 0.0;
    uint32_t flow = flow_state::kNone;
    // Its hops' slots: hop_slots_[slots_begin, slots_begin + hops).
    uint32_t slots_begin = 0;
    uint32_t hops = 0;
    uint32_t old_bottleneck = flow_state::kNone;
    uint32_t new_bottleneck = flow_state::kNone;
  };

  /// Reprices after the flow sets of the links in `seeds` changed and the flows in `new_flows`
  /// (those still in a group) started; empties both. Afterwards repriced() holds the flows
  /// given a new rate and bottleneck, checked_links() every link whose total may change.
  void reprice(std::vector<uint32_t>& seeds, std::vector<uint32_t>& new_flows);

  const std::vector<RepricedFlow>& repriced() const { return inside_; }
  const std::vector<uint32_t>& checked_links() const { return check_links_; }

 private:
  using Entry = flow_state::Entry;
  using Link = flow_state::Link;
  using Flow = flow_state::Flow;
  using Hop = flow_state::Hop;

  /// A repriced flow's result (flow_state::Flow::inside_pos, valid while Flow::inside ==
  /// repricing_).
  const RepricedFlow& repriced_flow(const flow_state::Flow& f) const {
    return inside_[f.inside_pos];
  }

  /// The scratch of one checked link in one recomputation, at the link's slot (its position in
  /// check_links_, flow_state::Link::repricing_slot): dense, so that a recomputation's
  /// scratch stays in cache however many links the network has.
  struct SlotScratch {
    // The link's state, copied when the link is added (it does not change while the
    // repricing runs): capacity, total rate, flow count and flows bottlenecked on it.
    double capacity = 0.0;
    double load = 0.0;
    uint32_t flows = 0;
    uint32_t bottlenecked = 0;
    // Solve (progressive filling): the repriced flows' rates on the link before the
    // recomputation (also the fairness check's), what the held flows leave and how many
    // repriced flows are not frozen yet.
    double repriced_old = 0.0;
    double residual = 0.0;
    uint32_t unfrozen = 0;
    // == solve_ when a repriced flow crosses the link in that solve.
    uint32_t touched = 0;
    // The repriced flows crossing the link: members_[begin, end).
    uint32_t members_begin = 0;
    uint32_t members_end = 0;
    // Fairness check: the repriced flows' new rates on the link, how many repriced flows
    // had their bottleneck (before this recomputation) on it, and how many cross it.
    double repriced_new = 0.0;
    uint32_t repriced_bottlenecked = 0;
    uint32_t repriced_flows = 0;
  };
  /// A link of the filling order: its share (as share_key), then its id and slot; the heap's
  /// order is ascending (share, link), compared as integers.
  struct Share {
    uint64_t share_key;
    uint32_t link;
    uint32_t slot;
  };

  /// The link's slot, adding it to the links to check when it is not yet.
  uint32_t add_check_link(uint32_t lid);
  void add_inside(uint32_t fid);
  void add_component();
  void solve_inside();
  bool add_unfair_flows();

  std::vector<Link>& links_;
  std::vector<Flow>& flows_;
  FlowNetworkStats& stats_;
  // One recomputation's scratch: the repriced flows, their hops' slots, the links to check
  // (crossed by a repriced flow or changed; a link's slot is its position here) and their
  // scratch, the slots of the current solve, their repriced flows (positions in inside_) and
  // their shares in filling order; repricing_ and solve_ number the recomputations and solves.
  std::vector<RepricedFlow> inside_;
  std::vector<uint32_t> hop_slots_;
  std::vector<uint32_t> check_links_;
  std::vector<SlotScratch> slots_;
  std::vector<uint32_t> touched_;
  std::vector<uint32_t> members_;
  std::vector<Share> share_order_;
  uint32_t repricing_ = 0;
  uint32_t solve_ = 0;
  Repricing repricing_mode_ = Repricing::kIncremental;
  int max_passes_ = kDefaultRepricingPasses;
};

}  // namespace upsim

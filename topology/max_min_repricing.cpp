#include "topology/max_min_repricing.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>

#include "sim/prefetch_pipeline.h"

namespace upsim {
namespace {

using flow_state::kNone;

// Relative slack of the fairness check: a link within it of its capacity is saturated, a
// rate within it of another is not faster. Above the solver's own 1e-9 lazy-update slack, so
// that rounding in a partial solve never reads as unfairness.
constexpr double kFairnessTolerance = 1e-8;

/// A key whose unsigned order is the order of the doubles (no NaN; -0 taken as +0): the sign
/// bit set for non-negative values, every bit flipped for negative ones.
uint64_t share_key(double share) {
  const auto bits = std::bit_cast<uint64_t>(share + 0.0);
  return (bits >> 63) != 0 ? ~bits : bits | (uint64_t{1} << 63);
}

double share_of_key(uint64_t key) {
  return std::bit_cast<double>((key >> 63) != 0 ? key & ~(uint64_t{1} << 63) : ~key);
}

/// Heap order of the filling: the smallest (share, link) on top.
template <class Share>
struct LargerShare {
  bool operator()(const Share& a, const Share& b) const {
    if (a.share_key != b.share_key) return a.share_key > b.share_key;
    return a.link > b.link;
  }
};

}  // namespace

void MaxMinRepricing::set_mode(Repricing mode, int max_passes) {
  if (max_passes < 1) throw std::invalid_argument("max-min repricing: max_passes must be >= 1");
  repricing_mode_ = mode;
  max_passes_ = max_passes;
}

/// Max-min fair rates after the flow sets of the links in `seeds` changed, repricing only
/// the flows the change reaches. A feasible allocation is max-min fair exactly when every
/// flow has a bottleneck: a saturated link on which no flow is faster (Bertsekas & Gallager,
/// Data Networks, 2nd ed., section 6.5.2). The new flows are priced by progressive filling
/// with every other flow's rate held; then each link the repriced flows cross, and each link
/// whose flow set changed, is checked against that condition, and the flows that break it
/// (held flows that exceed a repriced one's share, lose their saturated bottleneck or are
/// beaten on it; all held flows of an overfull link) join the repriced set, which is priced
/// again. The first allocation that passes is the max-min one, so the result is exact; the
/// connected component of the change bounds the set. After max_passes_ the whole
/// component is priced at once (with Repricing::kComponent always).
void MaxMinRepricing::reprice(std::vector<uint32_t>& seeds, std::vector<uint32_t>& new_flows) {
  ++stats_.recomputations;
  if (++repricing_ == 0) {
    // The numbers wrapped: clear the stamps of earlier recomputations, so that none reads as
    // this one's.
    for (Link& link : links_)
      link.repricing = 0;
    for (Flow& f : flows_)
      f.inside = 0;
    repricing_ = 1;
  }
  inside_.clear();
  hop_slots_.clear();
  check_links_.clear();
  slots_.clear();
  // Seeds and new flows are far apart: load them (and the new flows' links) chunks ahead.
  prefetch::two_stage(
      seeds.size(), [](size_t) {}, [&](size_t i) { prefetch::line(&links_[seeds[i]]); },
      [&](size_t i) { add_check_link(seeds[i]); });
  seeds.clear();
  if (repricing_mode_ == Repricing::kComponent) {
    add_component();
    solve_inside();
  } else {
    // Flows never priced (just started) are repriced from the start.
    prefetch::two_stage(
        new_flows.size(), [&](size_t i) { prefetch::line(&flows_[new_flows[i]]); },
        [&](size_t i) {
          for (const Hop& hop : flow_state::route_of(flows_[new_flows[i]]))
            prefetch::line(&links_[hop.link]);
        },
        [&](size_t i) {
          if (flows_[new_flows[i]].group != kNone) add_inside(new_flows[i]);
        });
    for (int pass = 0;; ++pass) {
      solve_inside();
      if (!add_unfair_flows()) break;
      if (pass + 1 == max_passes_) {
        ++stats_.component_fallbacks;
        add_component();
        solve_inside();
        break;
      }
    }
  }
  new_flows.clear();
  stats_.flows_repriced += inside_.size();
  stats_.links_checked += check_links_.size();
}

uint32_t MaxMinRepricing::add_check_link(uint32_t lid) {
  Link& link = links_[lid];
  if (link.repricing == repricing_) return link.repricing_slot;
  link.repricing = repricing_;
  link.repricing_slot = static_cast<uint32_t>(check_links_.size());
  check_links_.push_back(lid);
  SlotScratch& slot = slots_.emplace_back();
  slot.capacity = link.capacity;
  slot.load = link.load;
  slot.flows = static_cast<uint32_t>(link.flows.size());
  slot.bottlenecked = link.bottlenecked;
  return link.repricing_slot;
}

void MaxMinRepricing::add_inside(uint32_t fid) {
  Flow& f = flows_[fid];
  if (f.inside == repricing_) return;
  f.inside = repricing_;
  f.inside_pos = static_cast<uint32_t>(inside_.size());
  inside_.push_back(RepricedFlow{f.rate, 0.0, fid, static_cast<uint32_t>(hop_slots_.size()), f.hops,
                                 f.bottleneck, kNone});
  for (const Hop& hop : flow_state::route_of(f))
    hop_slots_.push_back(add_check_link(hop.link));
}

/// Every flow connected to the checked links through shared links joins the repriced set.
void MaxMinRepricing::add_component() {
  for (size_t i = 0; i < check_links_.size(); ++i) {
    // add_inside appends to check_links_; index, do not iterate.
    const uint32_t lid = check_links_[i];
    for (size_t k = 0; k < links_[lid].flows.size(); ++k)
      add_inside(links_[lid].flows[k].flow);
  }
}

/// Progressive filling of the repriced flows over what the held flows leave of each link.
/// A link's fair share residual / unfrozen never decreases while flows are frozen at the
/// current minimum share, so heap entries are lower bounds: a popped entry whose share has
/// grown is pushed back with its current value (lazy update).
void MaxMinRepricing::solve_inside() {
  // A fresh slot's touched is 0: never a solve's number.
  if (++solve_ == 0) solve_ = 1;
  touched_.clear();
  for (RepricedFlow& f : inside_) {
    f.new_rate = -1.0;
    for (uint32_t h = 0; h < f.hops; ++h) {
      const uint32_t slot = hop_slots_[f.slots_begin + h];
      SlotScratch& link = slots_[slot];
      if (link.touched != solve_) {
        link.touched = solve_;
        link.repriced_old = 0.0;
        link.unfrozen = 0;
        touched_.push_back(slot);
      }
      link.repriced_old += f.old_rate;
      ++link.unfrozen;
    }
  }
  // The repriced flows of each touched link, contiguous, so that freezing a link's flows
  // does not walk the held ones.
  uint32_t members = 0;
  for (uint32_t slot : touched_) {
    SlotScratch& link = slots_[slot];
    link.members_begin = members;
    link.members_end = members;
    members += link.unfrozen;
  }
  members_.resize(members);
  for (uint32_t i = 0; i < inside_.size(); ++i) {
    const RepricedFlow& f = inside_[i];
    for (uint32_t h = 0; h < f.hops; ++h)
      members_[slots_[hop_slots_[f.slots_begin + h]].members_end++] = i;
  }
  // Links in ascending (share, link) order, from one heap of the initial shares and the
  // lazily updated ones; done once every repriced flow is frozen (the links left would all
  // have none unfrozen).
  share_order_.clear();
  for (uint32_t slot : touched_) {
    SlotScratch& scratch = slots_[slot];
    // What the held flows leave; all of the capacity when every flow is repriced.
    scratch.residual = scratch.unfrozen == scratch.flows
                           ? scratch.capacity
                           : scratch.capacity - (scratch.load - scratch.repriced_old);
    share_order_.push_back(
        Share{share_key(scratch.residual / scratch.unfrozen), check_links_[slot], slot});
  }
  const LargerShare<Share> larger;
  std::make_heap(share_order_.begin(), share_order_.end(), larger);
  size_t unfrozen_flows = inside_.size();
  while (unfrozen_flows > 0 && !share_order_.empty()) {
    std::pop_heap(share_order_.begin(), share_order_.end(), larger);
    const Share top = share_order_.back();
    share_order_.pop_back();
    const double share = share_of_key(top.share_key);
    SlotScratch& link = slots_[top.slot];
    if (link.unfrozen == 0) continue;
    double current = std::max(link.residual, 0.0) / link.unfrozen;
    if (current > share * (1.0 + 1e-9)) {
      share_order_.push_back(Share{share_key(current), top.link, top.slot});
      std::push_heap(share_order_.begin(), share_order_.end(), larger);
      continue;
    }
    // Rounding can leave a saturated link's residual at or below zero; its flows still get
    // the share they were popped with (exactly zero would never finish). A held flow that
    // fills the link is caught by the fairness check, which reprices it too.
    if (!(current > 0.0)) {
      current = share > 0.0 ? share : link.capacity / link.flows;
    }
    for (uint32_t k = link.members_begin; k < link.members_end; ++k) {
      RepricedFlow& f = inside_[members_[k]];
      if (f.new_rate >= 0.0) continue;
      f.new_rate = current;
      f.new_bottleneck = top.link;
      --unfrozen_flows;
      for (uint32_t h = 0; h < f.hops; ++h) {
        SlotScratch& crossed = slots_[hop_slots_[f.slots_begin + h]];
        crossed.residual -= current;
        --crossed.unfrozen;
      }
    }
  }
}

/// Adds to the repriced set every held flow that breaks max-min fairness on a checked link
/// with the repriced flows' new rates; returns whether any was added. A link is scanned only
/// when it is saturated or overfull, or a held flow has its bottleneck on it: on any other
/// link no flow is frozen and no held flow can lose its bottleneck.
bool MaxMinRepricing::add_unfair_flows() {
  const size_t before = inside_.size();
  for (SlotScratch& link : slots_) {
    link.repriced_old = 0.0;
    link.repriced_new = 0.0;
    link.repriced_bottlenecked = 0;
    link.repriced_flows = 0;
  }
  for (const RepricedFlow& f : inside_) {
    for (uint32_t h = 0; h < f.hops; ++h) {
      const uint32_t slot = hop_slots_[f.slots_begin + h];
      SlotScratch& link = slots_[slot];
      link.repriced_old += f.old_rate;
      link.repriced_new += f.new_rate;
      ++link.repriced_flows;
      if (f.old_bottleneck == check_links_[slot]) ++link.repriced_bottlenecked;
    }
  }
  // check_links_ grows as flows are added; the links added here are checked next pass.
  const size_t count = check_links_.size();
  for (size_t i = 0; i < count; ++i) {
    const SlotScratch& scratch = slots_[i];
    const double load = scratch.load - scratch.repriced_old + scratch.repriced_new;
    const double slack = kFairnessTolerance * scratch.capacity;
    const bool overfull = load > scratch.capacity + slack;
    const bool saturated = load >= scratch.capacity - slack;
    const bool held_bottlenecked_here = scratch.bottlenecked > scratch.repriced_bottlenecked;
    if (!saturated && !held_bottlenecked_here) continue;
    // Every flow on the link is repriced: no held flow to add (and none to scan for).
    if (scratch.repriced_flows == scratch.flows) continue;
    const uint32_t lid = check_links_[i];
    const Link& link = links_[lid];
    double fastest_held = 0.0;
    double fastest_repriced = 0.0;
    double slowest_repriced_here = std::numeric_limits<double>::infinity();
    double slowest_held_here = std::numeric_limits<double>::infinity();
    // The link's flows are far apart: load them a chunk ahead.
    const std::vector<Entry>& on_link = link.flows;
    const auto load_flow = [&](size_t k) { prefetch::line(&flows_[on_link[k].flow]); };
    prefetch::two_stage(
        on_link.size(), [](size_t) {}, load_flow,
        [&](size_t k) {
          const Flow& f = flows_[on_link[k].flow];
          if (f.inside == repricing_) {
            const RepricedFlow& repriced = repriced_flow(f);
            fastest_repriced = std::max(fastest_repriced, repriced.new_rate);
            if (repriced.new_bottleneck == lid) {
              slowest_repriced_here = std::min(slowest_repriced_here, repriced.new_rate);
            }
          } else {
            fastest_held = std::max(fastest_held, f.rate);
            if (f.bottleneck == lid) slowest_held_here = std::min(slowest_held_here, f.rate);
          }
        });
    if (fastest_held == 0.0) continue;  // every flow on the link is repriced
    // A repriced flow frozen here must be the fastest here; an overfull link must shed.
    const bool held_too_fast =
        overfull || fastest_held > slowest_repriced_here * (1.0 + kFairnessTolerance);
    // Whether some held flow lost this bottleneck (the test below, for its slowest such flow):
    // if not, and no held flow is too fast, the link adds none.
    const bool some_lost_bottleneck =
        slowest_held_here != std::numeric_limits<double>::infinity() &&
        (!saturated || fastest_repriced > slowest_held_here * (1.0 + kFairnessTolerance));
    if (!held_too_fast && !some_lost_bottleneck) continue;
    for (size_t k = 0; k < link.flows.size(); ++k) {
      const uint32_t fid = link.flows[k].flow;
      const Flow& f = flows_[fid];
      if (f.inside == repricing_) continue;
      // A held flow whose bottleneck this is needs it saturated and no repriced flow faster.
      const bool lost_bottleneck =
          f.bottleneck == lid &&
          (!saturated || fastest_repriced > f.rate * (1.0 + kFairnessTolerance));
      if (held_too_fast || lost_bottleneck) add_inside(fid);
    }
  }
  return inside_.size() > before;
}

}  // namespace upsim

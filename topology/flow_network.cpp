#include "topology/flow_network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <stdexcept>

#include "sim/prefetch_pipeline.h"
#include "topology/collectives/collective_planner.h"
#include "topology/finish_calendar.h"
#include "topology/flow_state.h"
#include "topology/max_min_repricing.h"

namespace upsim {
namespace {

using flow_state::kNone;
// Two rates closer than this (relative) are the same rate: recomputation reorders floating-point
// sums, and a flow whose rate did not really change must keep its projected finish.
constexpr double kRateTolerance = 1e-12;

bool same_rate(double a, double b) {
  return std::abs(a - b) <= kRateTolerance * std::max(std::abs(a), std::abs(b));
}

}  // namespace

// The max-min fair sharing engine behind FlowNetwork. Links are indexed [0, L) for the fabric,
// then per-GPU device-memory links, then virtual links of batches (recycled through a free list).
class FlowNetwork::Core {
 public:
  Core(FlowNetwork& owner, std::vector<double> fabric_capacity, Bandwidth device_copy_bandwidth)
      : owner_(owner), fabric_links_(static_cast<uint32_t>(fabric_capacity.size())) {
    links_.resize(fabric_capacity.size());
    for (size_t l = 0; l < fabric_capacity.size(); ++l)
      links_[l].capacity = fabric_capacity[l];
    const size_t gpus = owner_.fabric_.gpus().size();
    memory_link_base_ = static_cast<uint32_t>(links_.size());
    for (size_t g = 0; g < gpus; ++g) {
      links_.emplace_back();
      links_.back().capacity = device_copy_bandwidth.bytes_per_second();
    }
  }

  uint32_t fabric_links() const { return fabric_links_; }
  uint32_t memory_link(size_t gpu_position) const {
    return memory_link_base_ + static_cast<uint32_t>(gpu_position);
  }
  double rate(uint32_t link) const { return links_[link].reported_rate; }
  uint32_t flow_count(uint32_t link) const {
    return static_cast<uint32_t>(links_[link].flows.size());
  }
  double capacity(uint32_t link) const { return links_[link].capacity; }
  size_t active_flows() const { return active_flows_; }
  void set_repricing(Repricing mode, int max_passes) { repricer_.set_mode(mode, max_passes); }
  const FlowNetworkStats& stats() const { return stats_; }

  /// With `external`, `batch` names fabric links and its own virtual links (FlowBatch); without,
  /// it names global link ids (the network's own device-memory links) and has no virtual links.
  void submit(Engine& engine, Duration delay, FlowBatch batch, bool external, Completion on_done) {
    bind(engine);
    if (delay < Duration::zero()) throw std::invalid_argument("flow network: negative delay");
    if (batch.offsets.size() != batch.bytes.size() + 1 || batch.offsets.front() != 0 ||
        batch.offsets.back() != batch.links.size()) {
      throw std::invalid_argument("flow network: malformed flow batch (offsets)");
    }
    for (double b : batch.bytes) {
      if (!(b >= 0.0) || !std::isfinite(b)) {
        throw std::invalid_argument("flow network: flow bytes must be finite and >= 0");
      }
    }
    for (Bandwidth c : batch.virtual_capacities) {
      if (!(c.bytes_per_second() > 0.0)) {
        throw std::invalid_argument("flow network: virtual link capacity must be positive");
      }
    }
    const auto virtual_count = static_cast<uint32_t>(batch.virtual_capacities.size());
    const uint32_t virtual_base = external ? fabric_links_ : static_cast<uint32_t>(links_.size());
    for (uint32_t l : batch.links) {
      if (l >= virtual_base + virtual_count) {
        throw std::invalid_argument(fmt::format("flow network: flow names unknown link {}", l));
      }
    }
    const uint32_t id = new_group();
    Group& g = groups_[id];
    g.virtual_links.reserve(virtual_count);
    for (Bandwidth c : batch.virtual_capacities)
      g.virtual_links.push_back(new_virtual_link(c.bytes_per_second()));
    // Each hop's position in its link's flow list is set when its flow starts.
    g.hops.reserve(batch.links.size());
    for (const uint32_t l : batch.links)
      g.hops.push_back(Hop{l >= virtual_base ? g.virtual_links[l - virtual_base] : l, kNone});
    g.offsets = std::move(batch.offsets);
    g.bytes = std::move(batch.bytes);
    g.on_done = std::move(on_done);
    const Time start = engine.now() + delay;
    add_pending(start, id);
  }

 private:
  using Entry = flow_state::Entry;
  using Link = flow_state::Link;
  using Flow = flow_state::Flow;
  using Group = flow_state::Group;
  using Hop = flow_state::Hop;

  void bind(Engine& engine) {
    if (engine_ == &engine) return;
    if (engine_ != nullptr && (active_flows_ > 0 || !pending_.empty())) {
      throw std::logic_error(
          "flow network: operations in flight on another engine; one network serves one engine "
          "at a time");
    }
    engine_ = &engine;
    completion_event_ = EventHandle{};
    completion_at_ = kNoTime;
  }

  uint32_t new_group() {
    if (!free_groups_.empty()) {
      const uint32_t id = free_groups_.back();
      free_groups_.pop_back();
      return id;
    }
    groups_.emplace_back();
    return static_cast<uint32_t>(groups_.size() - 1);
  }

  uint32_t new_virtual_link(double capacity) {
    uint32_t id;
    if (!free_virtual_.empty()) {
      id = free_virtual_.back();
      free_virtual_.pop_back();
    } else {
      id = static_cast<uint32_t>(links_.size());
      links_.emplace_back();
    }
    links_[id].capacity = capacity;
    return id;
  }

  uint32_t new_flow() {
    if (!free_flows_.empty()) {
      const uint32_t id = free_flows_.back();
      free_flows_.pop_back();
      return id;
    }
    flows_.emplace_back();
    return static_cast<uint32_t>(flows_.size() - 1);
  }

  /// Makes sure a recomputation event runs at `at` and queues `group` (kNone: none) for it.
  void add_pending(Time at, uint32_t group) {
    auto [it, inserted] = pending_.try_emplace(at.ps());
    if (group != kNone) it->second.push_back(group);
    if (inserted) {
      engine_->schedule_at(at, EventPriority::kNetwork, [this, at] { on_rebalance(at); });
    }
  }

  void on_rebalance(Time at) {
    std::vector<uint32_t> starting;
    auto it = pending_.find(at.ps());
    if (it != pending_.end()) {
      starting = std::move(it->second);
      pending_.erase(it);
    }
    std::vector<uint32_t> done_groups;
    for (uint32_t gid : starting)
      activate(gid, at, done_groups);
    if (!seeds_.empty()) recompute(at);
    schedule_next_completion();
    finish_groups(done_groups);
  }

  void activate(uint32_t gid, Time at, std::vector<uint32_t>& done_groups) {
    Group& g = groups_[gid];
    const size_t n = g.bytes.size();
    g.flow_ids.assign(n, kNone);
    g.unfinished = 0;
    // The flows' links are far apart: load them, then the ends of their flow lists, chunks
    // ahead.
    const auto hops_of = [&g](size_t i) {
      return std::span<const Hop>(g.hops.data() + g.offsets[i], g.offsets[i + 1] - g.offsets[i]);
    };
    const auto load_links = [&](size_t i) {
      for (const Hop& hop : hops_of(i))
        prefetch::line(&links_[hop.link]);
    };
    const auto load_list_ends = [&](size_t i) {
      for (const Hop& hop : hops_of(i)) {
        const std::vector<Entry>& on_link = links_[hop.link].flows;
        prefetch::line(on_link.data() + on_link.size());
      }
    };
    // Nothing to move, or nothing that limits the rate: delivered at once, with no flow.
    const auto moves = [&g](size_t i) {
      return g.bytes[i] > kDoneBytes && g.offsets[i] != g.offsets[i + 1];
    };
    // The flows' ids, taken in order before the loop, so that their slots (freed long ago, far
    // apart) load chunks ahead with the links.
    for (size_t i = 0; i < n; ++i) {
      if (moves(i)) g.flow_ids[i] = new_flow();
    }
    const auto load_flow_and_links = [&](size_t i) {
      if (g.flow_ids[i] != kNone) prefetch::line(&flows_[g.flow_ids[i]]);
      load_links(i);
    };
    prefetch::two_stage(n, load_flow_and_links, load_list_ends, [&](size_t i) {
      const uint32_t begin = g.offsets[i];
      const uint32_t end = g.offsets[i + 1];
      const uint32_t fid = g.flow_ids[i];
      if (fid == kNone) return;
      Flow& f = flows_[fid];
      f.group = gid;
      f.remaining = g.bytes[i];
      f.rate = 0.0;
      f.updated_ps = at.ps();
      f.bottleneck = kNone;
      ++f.version;
      f.route = g.hops.data() + begin;
      f.hops = end - begin;
      new_flows_.push_back(fid);
      for (uint32_t h = 0; h < f.hops; ++h) {
        Hop& hop = f.route[h];
        Link& link = links_[hop.link];
        hop.pos = static_cast<uint32_t>(link.flows.size());
        link.flows.push_back(Entry{fid, h});
        seeds_.push_back(hop.link);
      }
      ++g.unfinished;
      ++active_flows_;
      ++stats_.flows_started;
    });
    if (g.unfinished == 0) done_groups.push_back(gid);
  }

  void on_completion(Time at) {
    completion_event_ = EventHandle{};
    completion_at_ = kNoTime;
    std::vector<uint32_t> done_groups;
    while (finish_calendar_.take_until(at.ps(), finishing_)) {
      // The flows of a collective usually finish together, over links far apart: load each
      // flow, then its links, then the ends of their flow lists, chunks ahead.
      prefetch::three_stage(
          finishing_.size(), [&](size_t i) { prefetch::line(&flows_[finishing_[i].flow]); },
          [&](size_t i) {
            for (const Hop& hop : flow_state::route_of(flows_[finishing_[i].flow]))
              prefetch::line(&links_[hop.link]);
          },
          [&](size_t i) {
            for (const Hop& hop : flow_state::route_of(flows_[finishing_[i].flow])) {
              const std::vector<Entry>& on_link = links_[hop.link].flows;
              if (!on_link.empty()) prefetch::line(&on_link.back());
            }
          },
          [&](size_t i) {
            if (live(finishing_[i])) retire(finishing_[i].flow, done_groups);
          });
    }
    // Rates of the survivors change at this instant; recompute after every completion of it.
    add_pending(at, kNone);
    finish_groups(done_groups);
  }

  void retire(uint32_t fid, std::vector<uint32_t>& done_groups) {
    Flow& f = flows_[fid];
    Group& g = groups_[f.group];
    for (const Hop& hop : flow_state::route_of(f)) {
      Link& link = links_[hop.link];
      const Entry moved = link.flows.back();
      link.flows[hop.pos] = moved;
      link.flows.pop_back();
      link.load = link.flows.empty() ? 0.0 : link.load - f.rate;
      if (f.bottleneck == hop.link) --link.bottlenecked;
      if (moved.flow != fid) flows_[moved.flow].route[moved.hop].pos = hop.pos;
      seeds_.push_back(hop.link);
    }
    const uint32_t gid = f.group;
    f.group = kNone;
    f.route = nullptr;
    f.hops = 0;
    f.rate = 0.0;
    ++f.version;
    free_flows_.push_back(fid);
    --active_flows_;
    ++stats_.flows_finished;
    if (--g.unfinished == 0) done_groups.push_back(gid);
  }

  void finish_groups(const std::vector<uint32_t>& done_groups) {
    if (done_groups.empty()) return;
    std::vector<Completion> callbacks;
    callbacks.reserve(done_groups.size());
    for (uint32_t gid : done_groups) {
      Group& g = groups_[gid];
      callbacks.push_back(std::move(g.on_done));
      for (uint32_t v : g.virtual_links) {
        links_[v].capacity = 0.0;
        free_virtual_.push_back(v);
      }
      g = Group{};
      free_groups_.push_back(gid);
    }
    // State is consistent here; callbacks may start new operations.
    for (Completion& cb : callbacks) {
      if (cb) cb();
    }
  }

  /// New rates for the flows the changes since the last recomputation reach, applied.
  void recompute(Time at) {
    repricer_.reprice(seeds_, new_flows_);
    apply_and_report(at);
  }

  /// Apply: advance remaining bytes at the old rate up to now, then take the new rate; report
  /// the fabric links whose total rate or flow count changed.
  void apply_and_report(Time at) {
    const int64_t now = at.ps();
    const std::vector<MaxMinRepricing::RepricedFlow>& repriced = repricer_.repriced();
    // Load each repriced flow, then its links, chunks ahead.
    const auto load_flow = [&](size_t i) { prefetch::line(&flows_[repriced[i].flow]); };
    const auto load_links = [&](size_t i) {
      for (const Hop& hop : flow_state::route_of(flows_[repriced[i].flow]))
        prefetch::line(&links_[hop.link]);
    };
    prefetch::two_stage(repriced.size(), load_flow, load_links, [&](size_t i) {
      const MaxMinRepricing::RepricedFlow& priced = repriced[i];
      Flow& f = flows_[priced.flow];
      if (f.bottleneck != priced.new_bottleneck) {
        if (f.bottleneck != kNone) --links_[f.bottleneck].bottlenecked;
        ++links_[priced.new_bottleneck].bottlenecked;
        f.bottleneck = priced.new_bottleneck;
      }
      if (f.rate > 0.0 && same_rate(f.rate, priced.new_rate)) return;
      advance(f, now);
      for (const Hop& hop : flow_state::route_of(f))
        links_[hop.link].load += priced.new_rate - f.rate;
      f.rate = priced.new_rate;
      ++f.version;
      finish_calendar_.push(projected_finish(f), priced.flow, f.version);
    });
    if (finish_calendar_.entries() > 4 * active_flows_ + 1024) rebuild_finish_calendar();

    for (uint32_t lid : repricer_.checked_links()) {
      if (lid >= fabric_links_) continue;
      Link& link = links_[lid];
      double total = link.load;
      const auto count = static_cast<uint32_t>(link.flows.size());
      if (count == link.reported_flows && same_rate(total, link.reported_rate)) continue;
      if (count == 0) total = 0.0;
      link.reported_rate = total;
      link.reported_flows = count;
      link_changes_.push_back(LinkRateChange{lid, count, Bandwidth::bytes_per_second(total)});
    }
    owner_.notify_link_rates(at, link_changes_);
    link_changes_.clear();
  }

  static void advance(Flow& f, int64_t now_ps) {
    if (now_ps > f.updated_ps && f.rate > 0.0) {
      f.remaining -= f.rate * static_cast<double>(now_ps - f.updated_ps) / 1e12;
      if (f.remaining < kDoneBytes) f.remaining = 0.0;
    }
    f.updated_ps = now_ps;
  }

  static int64_t projected_finish(const Flow& f) {
    if (f.remaining <= kDoneBytes) return f.updated_ps;
    const double ps = f.remaining * 1e12 / f.rate;
    if (ps >= 9e18) return std::numeric_limits<int64_t>::max() / 2;
    return f.updated_ps + std::llround(ps);
  }

  bool live(const FinishCalendar::Entry& e) const {
    const Flow& f = flows_[e.flow];
    return f.group != kNone && f.version == e.version;
  }

  /// Drops the stale entries: only each moving flow's latest projection stays.
  void rebuild_finish_calendar() {
    finish_calendar_.clear();
    for (uint32_t fid = 0; fid < flows_.size(); ++fid) {
      const Flow& f = flows_[fid];
      if (f.group != kNone && f.rate > 0.0) {
        finish_calendar_.push(projected_finish(f), fid, f.version);
      }
    }
  }

  void schedule_next_completion() {
    int64_t next = 0;
    if (!finish_calendar_.next([this](const FinishCalendar::Entry& e) { return live(e); }, next)) {
      if (completion_at_ != kNoTime) engine_->cancel(completion_event_);
      completion_at_ = kNoTime;
      return;
    }
    if (next == completion_at_) return;
    if (completion_at_ != kNoTime) engine_->cancel(completion_event_);
    const Time at = Time::from_ps(next);
    completion_at_ = next;
    completion_event_ =
        engine_->schedule_at(at, EventPriority::kCompletion, [this, at] { on_completion(at); });
  }

  static constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

  FlowNetwork& owner_;
  const uint32_t fabric_links_;
  uint32_t memory_link_base_ = 0;
  Engine* engine_ = nullptr;
  flow_state::State state_;
  std::vector<Link>& links_ = state_.links;
  std::vector<uint32_t> free_virtual_;
  std::vector<Flow>& flows_ = state_.flows;
  std::vector<uint32_t> free_flows_;
  std::vector<Group>& groups_ = state_.groups;
  std::vector<uint32_t> free_groups_;
  size_t active_flows_ = 0;
  // Groups waiting to start, by start time (ps); each key has one scheduled rebalance event.
  std::map<int64_t, std::vector<uint32_t>> pending_;
  // Links whose flow set changed since the last recomputation.
  std::vector<uint32_t> seeds_;
  std::vector<uint32_t> new_flows_;  // activated since the last recomputation
  FinishCalendar finish_calendar_;
  std::vector<LinkRateChange> link_changes_;      // scratch of apply_and_report
  std::vector<FinishCalendar::Entry> finishing_;  // scratch of on_completion
  EventHandle completion_event_;
  int64_t completion_at_ = kNoTime;
  FlowNetworkStats stats_;
  MaxMinRepricing repricer_{state_, stats_};
};

FlowNetwork::FlowNetwork(const Fabric& fabric, CollectiveTuning tuning,
                         Bandwidth device_copy_bandwidth)
    : fabric_(fabric), planner_(std::make_unique<CollectivePlanner>(fabric, std::move(tuning))) {
  if (!(device_copy_bandwidth.bytes_per_second() > 0.0)) {
    throw std::invalid_argument("flow network: device copy bandwidth must be positive");
  }
  const auto links = fabric.links();
  std::vector<double> capacity(links.size());
  std::vector<int64_t> gpu_of_device(fabric.devices().size(), -1);
  for (size_t g = 0; g < fabric.gpus().size(); ++g)
    gpu_of_device[fabric.gpus()[g]] = static_cast<int64_t>(g);
  link_info_.reserve(links.size());
  for (LinkId l = 0; l < links.size(); ++l) {
    capacity[l] = links[l].bandwidth.bytes_per_second() * planner_->link_efficiency(l);
    const int32_t from_node = fabric.device(links[l].from).node;
    const int32_t to_node = fabric.device(links[l].to).node;
    const int64_t from_gpu = gpu_of_device[links[l].from];
    link_info_.push_back(LinkInfo{fabric.link_name(l), links[l].bandwidth,
                                  from_node >= 0 ? from_node : to_node,
                                  from_gpu >= 0 ? from_gpu : gpu_of_device[links[l].to]});
  }
  core_ = std::make_unique<Core>(*this, std::move(capacity), device_copy_bandwidth);
  const CollectiveTuning& tuning_used = planner_->tuning();
  communication_sms_.assign(fabric.gpus().size(), 0);
  for (LinkId l = 0; l < links.size(); ++l) {
    const int64_t gpu = gpu_of_device[links[l].from];
    if (gpu < 0) continue;
    int32_t& sms = communication_sms_[static_cast<size_t>(gpu)];
    sms = std::max(
        sms, tuning_used.communication_sms_for(links[l].kind, gpu_of_device[links[l].to] >= 0));
    holds_sms_ = holds_sms_ || sms > 0;
  }
}

int32_t FlowNetwork::communication_sms(const CollectiveDesc& collective, RankId device) const {
  if (collective.members.size() < 2 || device >= communication_sms_.size()) return 0;
  if (collective.kind == CollectiveKind::kSendRecv && collective.members.size() == 2 &&
      collective.members[0] < fabric_.gpus().size() &&
      collective.members[1] < fabric_.gpus().size()) {
    const int32_t node0 = fabric_.device(fabric_.gpus()[collective.members[0]]).node;
    const int32_t node1 = fabric_.device(fabric_.gpus()[collective.members[1]]).node;
    if (node0 != node1) {
      return std::min(communication_sms_[device], planner_->tuning().network_peer_sms);
    }
  }
  return communication_sms_[device];
}

FlowNetwork::~FlowNetwork() = default;

void FlowNetwork::start_collective(Engine& engine, const CollectiveDesc& collective,
                                   Completion on_done) {
  CollectivePlan plan = planner_->plan(collective);
  core_->submit(engine, plan.choice.latency, std::move(plan.flows), true, std::move(on_done));
}

void FlowNetwork::start_transfer(Engine& engine, const TransferDesc& transfer, Completion on_done) {
  const auto gpus = fabric_.gpus();
  if (transfer.rank >= gpus.size()) {
    throw std::invalid_argument(
        fmt::format("flow network: {} on rank {}, but fabric `{}` has {} GPUs (ranks 0..{})",
                    transfer_kind_name(transfer.kind), transfer.rank, fabric_.name(), gpus.size(),
                    gpus.size() - 1));
  }
  if (transfer.bytes < 0) {
    throw std::invalid_argument(fmt::format("flow network: {} of negative size {}",
                                            transfer_kind_name(transfer.kind), transfer.bytes));
  }
  const DeviceIndex gpu = gpus[transfer.rank];
  FlowBatch batch;
  Duration delay = Duration::zero();
  const auto bytes = static_cast<double>(transfer.bytes);
  if (transfer.kind == TransferKind::kDeviceToDevice) {
    const uint32_t memory = core_->memory_link(transfer.rank);
    batch.add_flow(std::span<const uint32_t>(&memory, 1), 2.0 * bytes);
  } else {
    const DeviceIndex host = fabric_.host_of(gpu);
    if (host == gpu) {
      throw std::invalid_argument(
          fmt::format("flow network: {} on rank {} needs a CPU, but fabric `{}` has none",
                      transfer_kind_name(transfer.kind), transfer.rank, fabric_.name()));
    }
    const bool to_device = transfer.kind == TransferKind::kHostToDevice;
    const std::vector<LinkId> route =
        to_device ? fabric_.route(host, gpu) : fabric_.route(gpu, host);
    for (LinkId l : route)
      delay += fabric_.link(l).latency;
    batch.add_flow(route, bytes);
  }
  // Memory links are the network's own links above the fabric's.
  core_->submit(engine, delay, std::move(batch), false, std::move(on_done));
}

void FlowNetwork::start_flows(Engine& engine, Duration delay, FlowBatch batch, Completion on_done) {
  core_->submit(engine, delay, std::move(batch), true, std::move(on_done));
}

void FlowNetwork::set_repricing(Repricing mode, int max_passes) {
  core_->set_repricing(mode, max_passes);
}

Bandwidth FlowNetwork::link_rate(LinkId link) const {
  return Bandwidth::bytes_per_second(core_->rate(link));
}

uint32_t FlowNetwork::link_flow_count(LinkId link) const {
  return core_->flow_count(link);
}

Bandwidth FlowNetwork::link_capacity(LinkId link) const {
  return Bandwidth::bytes_per_second(core_->capacity(link));
}

size_t FlowNetwork::active_flow_count() const {
  return core_->active_flows();
}

const FlowNetworkStats& FlowNetwork::stats() const {
  return core_->stats();
}

}  // namespace upsim

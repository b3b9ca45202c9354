// FlowNetwork: a flow-level network model over a sealed Fabric. Every flow crosses a route of
// directed links; each link's bandwidth is shared max-min fairly among the flows crossing it
// (progressive filling); the two directions of a link are separate (full duplex). Collectives
// become flows through CollectivePlanner (topology/collectives/collective_planner.h), host <->
// device copies one flow over the PCIe route, device-to-device copies one flow through the GPU's
// device memory.
//
// Contract:
//  - Capacity of a fabric link = bandwidth x its family's efficiency (CollectiveTuning); links()
//    reports the nominal bandwidth. Virtual links (per-GPU device memory, per-collective
//    injection caps) constrain flows like fabric links but are not reported to observers.
//  - Rates are recomputed when flows start or finish, only for the flows the change reaches:
//    the new flows, then every flow that would otherwise break max-min fairness, checked link
//    by link (Repricing::kIncremental; the result is the max-min allocation, as pricing the
//    whole connected component of the change, Repricing::kComponent, gives it). Flows that
//    start at the same instant are activated together and priced once (one recomputation per
//    instant at EventPriority::kNetwork, after every completion of that instant, which run at
//    kCompletion).
//  - Remaining bytes advance as rate x elapsed time (times are integer picoseconds); a flow's
//    finish time is rounded to the nearest picosecond and a flow with under kDoneBytes left is
//    done. A flow with no bytes or no links is done as soon as it starts.
//  - Latency is a start delay: a transfer's flow starts after the sum of its route's link
//    latencies; a collective's flows start after the planner's latency (launch overhead + NCCL
//    base and per-hop latencies). Bandwidth is shared only while bytes move.
//  - Observers (NetworkModel::add_observer) hear on_link_rates, once per recomputation, for
//    the fabric links whose total rate or flow count changed, in the order they were checked.
//  - on_done is called exactly once per operation, from an engine event, never from inside
//    start_*; an operation that moves nothing completes at the current instant.
//  - One engine at a time: all operations in flight must share the Engine they were started on
//    (std::logic_error otherwise). The fabric must outlive the network.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/network_model.h"
#include "topology/collectives/flow_batch.h"
#include "topology/fabric.h"
#include "topology/nccl_tuning.h"

namespace upsim {

class CollectivePlanner;

/// Counters for benchmarks and tests.
struct FlowNetworkStats {
  uint64_t flows_started = 0;
  uint64_t flows_finished = 0;
  /// Max-min recomputations and the flows they repriced in total.
  uint64_t recomputations = 0;
  uint64_t flows_repriced = 0;
  /// Links checked for fairness (or priced, with Repricing::kComponent) in total.
  uint64_t links_checked = 0;
  /// Incremental recomputations that fell back to pricing the whole connected component.
  uint64_t component_fallbacks = 0;
};

/// How a recomputation chooses the flows it reprices (both give the max-min allocation).
enum class Repricing {
  /// The new flows and those the fairness check finds the change reaches (the default).
  kIncremental,
  /// Every flow connected to the change through shared links (the reference).
  kComponent,
};

/// Fairness-check passes of one incremental recomputation before it prices the whole component.
inline constexpr int kDefaultRepricingPasses = 8;

class FlowNetwork final : public NetworkModel {
 public:
  /// Bytes below which a flow counts as delivered.
  static constexpr double kDoneBytes = 1e-6;

  /// `device_copy_bandwidth` prices device-to-device copies (each byte read and written once,
  /// so a copy moves 2 x bytes through the GPU's memory). Throws std::invalid_argument for a
  /// non-positive bandwidth or an invalid tuning.
  FlowNetwork(const Fabric& fabric, CollectiveTuning tuning, Bandwidth device_copy_bandwidth);
  ~FlowNetwork() override;
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  /// Plans the collective (fastest NCCL-like algorithm and protocol) and runs its flows. Throws
  /// std::invalid_argument when a member is not a GPU of the fabric (rank >= gpus().size()),
  /// members repeat, sizes are negative, or send_bytes has the wrong shape.
  void start_collective(Engine& engine, const CollectiveDesc& collective,
                        Completion on_done) override;
  /// H2D: one flow over route(host_of(gpu), gpu); D2H the reverse; D2D: 2 x bytes through the
  /// GPU's device memory. Throws std::invalid_argument for a rank outside the fabric, negative
  /// bytes, or a host copy on a fabric without CPUs.
  void start_transfer(Engine& engine, const TransferDesc& transfer, Completion on_done) override;
  std::span<const LinkInfo> links() const override { return link_info_; }
  /// The tuning's communication_sms for the GPU's links (the largest over the links leaving
  /// it) when the collective has two members or more, at most network_peer_sms for a send /
  /// receive between GPUs of different nodes; 0 otherwise.
  int32_t communication_sms(const CollectiveDesc& collective, RankId device) const override;
  bool communication_holds_sms() const override { return holds_sms_; }

  /// Starts `batch` after `delay` (>= 0); on_done runs when its last flow has delivered.
  /// Throws std::invalid_argument for a malformed batch (unknown link, negative bytes,
  /// non-positive virtual capacity).
  void start_flows(Engine& engine, Duration delay, FlowBatch batch, Completion on_done);

  /// Chooses how rates are recomputed from the next recomputation on (default incremental);
  /// `max_passes` (>= 1, else std::invalid_argument) fairness-check passes of an incremental
  /// recomputation before it prices the whole component at once.
  void set_repricing(Repricing mode, int max_passes = kDefaultRepricingPasses);

  const Fabric& fabric() const { return fabric_; }
  CollectivePlanner& planner() { return *planner_; }
  /// Total rate on a fabric link now, all flows together.
  Bandwidth link_rate(LinkId link) const;
  uint32_t link_flow_count(LinkId link) const;
  /// The bandwidth the network shares on a fabric link (bandwidth x efficiency).
  Bandwidth link_capacity(LinkId link) const;
  /// Flows that are moving bytes now (started and not finished).
  size_t active_flow_count() const;
  const FlowNetworkStats& stats() const;

 private:
  class Core;
  const Fabric& fabric_;
  std::unique_ptr<CollectivePlanner> planner_;
  std::vector<LinkInfo> link_info_;
  /// Per fabric GPU: SMs a collective's kernel holds on it (CollectiveTuning::communication_sms).
  std::vector<int32_t> communication_sms_;
  bool holds_sms_ = false;
  std::unique_ptr<Core> core_;
};

}  // namespace upsim

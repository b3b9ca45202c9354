// The interface through which the engine moves bytes between devices.
//
// Contract: `start_*` is called at engine.now(); the model calls `on_done` exactly once, from an
// engine event at or after now(), when the last byte has arrived. A model that tracks link state
// (topology/) schedules its own rate-change events on the same engine; a stateless one
// (AnalyticalNetwork below) just schedules the completion after a CollectiveCostModel's duration.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "sim/cost_models.h"
#include "sim/engine.h"
#include "sim/observer.h"

namespace upsim {

class NetworkModel {
 public:
  using Completion = std::function<void()>;
  virtual ~NetworkModel() = default;
  virtual void start_collective(Engine& engine, const CollectiveDesc& collective,
                                Completion on_done) = 0;
  virtual void start_transfer(Engine& engine, const TransferDesc& transfer, Completion on_done) = 0;

  /// SMs the communication kernel of `collective` holds on member GPU `device` from the moment
  /// that member's kernel starts (it reaches the head of its stream, where NCCL's kernel is
  /// resident and waits for its peers) until the collective completes: NCCL runs one thread
  /// block per channel. The executor prices the compute kernels running beside it on the SMs
  /// left (device_with_sms_held). 0 (the default): the model states none, no interference.
  virtual int32_t communication_sms(const CollectiveDesc& /*collective*/, RankId /*device*/) const {
    return 0;
  }
  /// Whether communication_sms can be above 0 for any collective (the executor tracks running
  /// kernels only then).
  virtual bool communication_holds_sms() const { return false; }

  /// The links whose use the model reports through Observer::on_link_rates (index = link id);
  /// empty for models without link state.
  virtual std::span<const LinkInfo> links() const { return {}; }
  /// Observers of link use; the executor registers its observers here. Not owned.
  void add_observer(Observer* observer) { observers_.push_back(observer); }
  /// Stops reporting to `observer` (one registered with add_observer; others are ignored).
  void remove_observer(const Observer* observer) { std::erase(observers_, observer); }

 protected:
  /// Tells observers the links' new use at `at` (Observer::on_link_rates).
  void notify_link_rates(Time at, std::span<const LinkRateChange> changes) const {
    if (changes.empty()) return;
    for (Observer* o : observers_)
      o->on_link_rates(at, changes);
  }

 private:
  std::vector<Observer*> observers_;
};

/// A network without link state: each operation takes its cost model's duration, independent of
/// what else is in flight. Does not own the cost model.
class AnalyticalNetwork final : public NetworkModel {
 public:
  explicit AnalyticalNetwork(const CollectiveCostModel& costs) : costs_(costs) {}
  void start_collective(Engine& engine, const CollectiveDesc& collective,
                        Completion on_done) override {
    engine.schedule_in(costs_.collective_duration(collective), EventPriority::kCompletion,
                       std::move(on_done));
  }
  void start_transfer(Engine& engine, const TransferDesc& transfer, Completion on_done) override {
    engine.schedule_in(costs_.transfer_duration(transfer), EventPriority::kCompletion,
                       std::move(on_done));
  }

 private:
  const CollectiveCostModel& costs_;
};

}  // namespace upsim

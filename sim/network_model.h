// The interface through which the engine moves bytes between devices.
//
// Contract: `start_*` is called at engine.now(); the model calls `on_done` exactly once, from an
// engine event at or after now(), when the last byte has arrived. A model that tracks link state
// (topology/, issue 3) schedules its own rate-change events on the same engine; a stateless one
// (AnalyticalNetwork below) just schedules the completion after a CollectiveCostModel's duration.
#pragma once

#include <functional>

#include "sim/cost_models.h"
#include "sim/engine.h"

namespace upsim {

class NetworkModel {
 public:
  using Completion = std::function<void()>;
  virtual ~NetworkModel() = default;
  virtual void start_collective(Engine& engine, const CollectiveDesc& collective,
                                Completion on_done) = 0;
  virtual void start_transfer(Engine& engine, const TransferDesc& transfer, Completion on_done) = 0;
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

// The discrete-event engine: one clock, one event queue, no globals.
//
// Contract:
//  - Events run in the total order (time, priority, sequence): earlier time first; at equal
//    time, lower `EventPriority` value first; at equal time and priority, the event scheduled
//    first runs first (`sequence` is a 64-bit counter assigned by `schedule`). This order is the
//    only source of tie-breaking, so the same schedule calls give the same run, byte for byte.
//  - An event may not be scheduled in the past (time < now()): that is a logic error and throws.
//  - `cancel` marks an event dead; a dead event is dropped when it reaches the head of the queue
//    (ns-3 style lazy cancellation). Cancelling an event that already ran or was cancelled is a
//    no-op that returns false.
//  - Handlers are small callables owned by the queue. A handler may schedule and cancel events.
//  - Two engines in one process are independent (tests and sweeps rely on it).
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "sim/time.h"

namespace upsim {

/// Priority among events at the same instant. Each value says why it sorts where it does.
enum class EventPriority : uint8_t {
  /// Completions first: a resource that finishes at t must be free for work that starts at t.
  kCompletion = 0,
  /// Network rate changes after completions, so that flows ending at t release bandwidth first.
  kNetwork = 1,
  /// Starting new work last, once every completion at this instant has been seen.
  kStart = 2,
};

/// Identifies one scheduled event for cancellation. Default-constructed handles refer to nothing.
struct EventHandle {
  uint32_t slot = UINT32_MAX;
  uint64_t sequence = 0;
};

class Engine {
 public:
  using Handler = std::function<void()>;

  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Time now() const { return now_; }

  /// Schedules `handler` to run at absolute time `at`. Throws std::logic_error if at < now().
  EventHandle schedule_at(Time at, EventPriority priority, Handler handler);
  /// Schedules `handler` to run `delay` after now(). Precondition: delay >= 0.
  EventHandle schedule_in(Duration delay, EventPriority priority, Handler handler) {
    return schedule_at(now_ + delay, priority, std::move(handler));
  }
  /// Marks the event dead. Returns true if it was pending.
  bool cancel(EventHandle handle);

  /// Runs events until the queue is empty. Returns the number of events executed.
  uint64_t run();
  /// Runs events with time <= `until`; leaves later events queued and sets now() to the time of
  /// the last event run (the clock never jumps to `until` by itself).
  uint64_t run_until(Time until);

  /// Number of events currently queued, dead ones included.
  size_t queued() const { return heap_.size(); }
  /// Events executed over the engine's life.
  uint64_t executed() const { return executed_; }

 private:
  struct HeapEntry {
    int64_t time_ps;
    uint64_t order;  // priority in the top 8 bits, sequence below: one compare gives both.
    uint32_t slot;
  };
  struct Later {
    bool operator()(const HeapEntry& a, const HeapEntry& b) const {
      if (a.time_ps != b.time_ps) return a.time_ps > b.time_ps;
      return a.order > b.order;
    }
  };
  struct Slot {
    Handler handler;
    uint64_t sequence = 0;
    bool live = false;
  };

  bool pop_and_run();

  Time now_ = Time::zero();
  uint64_t next_sequence_ = 0;
  uint64_t executed_ = 0;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, Later> heap_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace upsim

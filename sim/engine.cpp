#include "sim/engine.h"

#include <stdexcept>
#include <string>

namespace upsim {

namespace {
// The sequence counter shares a 64-bit word with the priority; 2^56 events is far beyond any run.
constexpr int kPriorityShift = 56;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kPriorityShift) - 1;
}  // namespace

EventHandle Engine::schedule_at(Time at, EventPriority priority, Handler handler) {
  if (at < now_) {
    throw std::logic_error("Engine::schedule_at: event at " + std::to_string(at.ps()) +
                           " ps is before now (" + std::to_string(now_.ps()) + " ps)");
  }
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  const uint64_t sequence = next_sequence_++;
  Slot& s = slots_[slot];
  s.handler = std::move(handler);
  s.sequence = sequence;
  s.live = true;
  const uint64_t order =
      (static_cast<uint64_t>(priority) << kPriorityShift) | (sequence & kSequenceMask);
  heap_.push(HeapEntry{at.ps(), order, slot});
  return EventHandle{slot, sequence};
}

bool Engine::cancel(EventHandle handle) {
  if (handle.slot >= slots_.size()) return false;
  Slot& s = slots_[handle.slot];
  if (!s.live || s.sequence != handle.sequence) return false;
  s.live = false;
  s.handler = nullptr;
  return true;
}

bool Engine::pop_and_run() {
  const HeapEntry top = heap_.top();
  heap_.pop();
  Slot& s = slots_[top.slot];
  if (!s.live) {
    free_slots_.push_back(top.slot);
    return false;
  }
  now_ = Time::from_ps(top.time_ps);
  // Move the handler out before running it: it may schedule events and grow slots_.
  Handler handler = std::move(s.handler);
  s.handler = nullptr;
  s.live = false;
  free_slots_.push_back(top.slot);
  handler();
  ++executed_;
  return true;
}

uint64_t Engine::run() {
  const uint64_t before = executed_;
  while (!heap_.empty())
    pop_and_run();
  return executed_ - before;
}

uint64_t Engine::run_until(Time until) {
  const uint64_t before = executed_;
  while (!heap_.empty() && heap_.top().time_ps <= until.ps())
    pop_and_run();
  return executed_ - before;
}

}  // namespace upsim

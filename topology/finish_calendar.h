// FinishCalendar: the projected finish times of the flow network's flows (flow_network.h),
// grouped by time. The flows of one collective usually share their finish picosecond, so one
// heap entry per distinct time replaces one per flow; a flow repriced again leaves its old entry
// behind (stale, recognised by its version).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>

namespace upsim {

class FinishCalendar {
 public:
  struct Entry {
    uint32_t flow;
    uint32_t version;
  };

  void push(int64_t finish_ps, uint32_t flow, uint32_t version) {
    auto [it, inserted] = slot_of_time_.try_emplace(finish_ps, 0);
    if (inserted) {
      if (free_slots_.empty()) {
        it->second = static_cast<uint32_t>(slots_.size());
        slots_.emplace_back();
      } else {
        it->second = free_slots_.back();
        free_slots_.pop_back();
      }
      times_.push(finish_ps);
    }
    slots_[it->second].push_back(Entry{flow, version});
    ++entries_;
  }

  /// The earliest time holding an entry for which live(entry) is true, dropping the earlier
  /// times that hold only stale entries; false when there is none.
  template <class Live>
  bool next(const Live& live, int64_t& time_ps) {
    while (!times_.empty()) {
      const int64_t t = times_.top();
      const std::vector<Entry>& slot = slots_[slot_of_time_.at(t)];
      if (std::any_of(slot.begin(), slot.end(), live)) {
        time_ps = t;
        return true;
      }
      drop_earliest();
    }
    return false;
  }

  /// Removes the earliest time if it is at or before `time_ps` and moves its entries into
  /// `out`, in ascending flow order (the order of the per-flow heap this replaces); returns
  /// false when the earliest time is later (or there is none).
  bool take_until(int64_t time_ps, std::vector<Entry>& out) {
    if (times_.empty() || times_.top() > time_ps) return false;
    const uint32_t slot = slot_of_time_.at(times_.top());
    out.swap(slots_[slot]);
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
      return a.flow != b.flow ? a.flow < b.flow : a.version < b.version;
    });
    drop_earliest();
    return true;
  }

  /// Entries held, stale ones included.
  size_t entries() const { return entries_; }

  void clear() {
    times_ = {};
    slot_of_time_.clear();
    for (uint32_t s = 0; s < slots_.size(); ++s)
      slots_[s].clear();
    free_slots_.clear();
    for (uint32_t s = static_cast<uint32_t>(slots_.size()); s-- > 0;)
      free_slots_.push_back(s);
    entries_ = 0;
  }

 private:
  void drop_earliest() {
    const auto it = slot_of_time_.find(times_.top());
    std::vector<Entry>& slot = slots_[it->second];
    entries_ -= slot.size();
    slot.clear();
    free_slots_.push_back(it->second);
    slot_of_time_.erase(it);
    times_.pop();
  }

  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> times_;
  std::unordered_map<int64_t, uint32_t> slot_of_time_;
  std::vector<std::vector<Entry>> slots_;
  std::vector<uint32_t> free_slots_;
  size_t entries_ = 0;
};

}  // namespace upsim

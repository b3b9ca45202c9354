// Where the time went, per op and kernel: each task's time summed by (kind, PyTorch op, name)
// over the measured iterations of every rank — the per-op and per-kernel table of a run's
// machine-readable results (ops.csv) and of `upsim diff`.
//
// Contract:
//  - A task counts when it begins inside its rank's measured window, as RunSummaryObserver
//    places it: after the rank's first `warmup_iterations` iteration marks and, with
//    `measured_iterations`, before the mark that ends the last measured iteration.
//  - A task's time is its end minus its begin: a kernel's or copy's execution, a CPU task's
//    host time, a collective's from its rank's arrival (rendezvous wait included) to its end, a
//    stream wait's hold of its stream. Iteration marks are not counted.
//  - Rows are ordered by total time (largest first), then kind, op and name, so the table is
//    the same for the same run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/observer.h"
#include "sim/task_graph.h"
#include "sim/time.h"

namespace upsim {

struct OpProfileRow {
  TaskKind kind = TaskKind::kKernel;
  std::string op;    ///< the PyTorch op the tasks belong to
  std::string name;  ///< kernel, runtime call, collective or host-op name
  uint64_t count = 0;
  Duration total;  ///< summed over every rank and measured iteration
};

class OpProfileObserver final : public Observer {
 public:
  explicit OpProfileObserver(uint32_t warmup_iterations,
                             std::optional<uint32_t> measured_iterations = std::nullopt)
      : warmup_(warmup_iterations), measured_(measured_iterations) {}

  void on_run_begin(const TaskGraph& graph) override;
  void on_task_begin(TaskId task, Time at) override;
  void on_task_end(TaskId task, Time at) override;

  /// The rows (see the file comment); valid after the run.
  std::vector<OpProfileRow> rows() const;

 private:
  bool measuring(RankId rank) const;

  const TaskGraph* graph_ = nullptr;
  uint32_t warmup_;
  std::optional<uint32_t> measured_;
  std::vector<uint32_t> marks_seen_;  // per rank
  /// Begin time of the running task of each CPU thread and stream (one at a time each), and
  /// whether it began inside the measured window.
  std::vector<uint32_t> thread_base_;
  std::vector<uint32_t> stream_base_;
  std::vector<Time> begin_;
  std::vector<uint8_t> counted_;
  struct Sum {
    TaskKind kind;
    NameId op;
    NameId name;
    uint64_t count = 0;
    int64_t total_ps = 0;
  };
  std::vector<Sum> sums_;
  struct Key {
    TaskKind kind;
    NameId op;
    NameId name;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()((static_cast<uint64_t>(k.op) << 32) ^ k.name) ^
             static_cast<size_t>(k.kind);
    }
  };
  std::unordered_map<Key, uint32_t, KeyHash> index_;  // -> sums_
};

}  // namespace upsim

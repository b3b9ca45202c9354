// Observers see what the engine does; they never change it.
//
// Contract: callbacks arrive in simulated-time order (non-decreasing `at`), in the engine's event
// order for equal times, so an observer that records them is as deterministic as the run.
// Observers must not throw out of callbacks except for I/O failure, which aborts the run.
#pragma once

#include "sim/task_graph.h"
#include "sim/time.h"

namespace upsim {

class Observer {
 public:
  virtual ~Observer() = default;
  /// Before the first event; `graph` outlives the run.
  virtual void on_run_begin(const TaskGraph& graph) { (void)graph; }
  /// A task takes its resource. For a Collective this is the rank's arrival at the rendezvous.
  virtual void on_task_begin(TaskId task, Time at) {
    (void)task;
    (void)at;
  }
  /// A task completes and frees its resource.
  virtual void on_task_end(TaskId task, Time at) {
    (void)task;
    (void)at;
  }
  /// A GPU task enters its stream's queue (its launch completed, or time zero).
  virtual void on_gpu_enqueue(TaskId task, Time at) {
    (void)task;
    (void)at;
  }
  /// The last member of a collective group arrived: the network starts moving bytes now.
  virtual void on_collective_begin(CollectiveId collective, Time at) {
    (void)collective;
    (void)at;
  }
  /// After the last event.
  virtual void on_run_end(Time at) { (void)at; }
};

}  // namespace upsim

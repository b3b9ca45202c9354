// Observers see what the engine does; they never change it.
//
// Contract: callbacks arrive in simulated-time order (non-decreasing `at`), in the engine's event
// order for equal times, so an observer that records them is as deterministic as the run.
// Observers must not throw out of callbacks except for I/O failure, which aborts the run.
#pragma once

#include <span>
#include <string>

#include "sim/task_graph.h"
#include "sim/time.h"
#include "sim/units.h"

namespace upsim {

/// A link of the fabric as observers see it: a name for display and its capacity.
struct LinkInfo {
  std::string name;
  Bandwidth capacity;
  /// The node (server) the link lies in: that of its ends (of the end inside a node when the
  /// other is a network switch); -1 for links between network switches or without nodes.
  int32_t node = -1;
  /// The GPU at one end (the index collective members and transfers use), or -1.
  int64_t gpu = -1;
};

/// A link's new use, as Observer::on_link_rates hears it: from then on `link` carries `rate`
/// (all flows together) over `flows` flows.
struct LinkRateChange {
  uint32_t link = 0;
  uint32_t flows = 0;
  Bandwidth rate;
};

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
  /// Before the first event, when the network model tracks links: link i is `links[i]`.
  virtual void on_links_declared(std::span<const LinkInfo> links) { (void)links; }
  /// From `at` on, `link` carries `rate` (bytes per second, all flows together) over `flows`
  /// flows; a rate of zero means the link went idle.
  virtual void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) {
    (void)link;
    (void)at;
    (void)rate;
    (void)flows;
  }
  /// The changes of several links at `at`, in the network model's order (what the model
  /// reports); the default hears each through on_link_rate, in that order. An observer of
  /// many links may take them together.
  virtual void on_link_rates(Time at, std::span<const LinkRateChange> changes) {
    for (const LinkRateChange& c : changes)
      on_link_rate(c.link, at, c.rate, c.flows);
  }
  /// After the last event.
  virtual void on_run_end(Time at) { (void)at; }
};

}  // namespace upsim

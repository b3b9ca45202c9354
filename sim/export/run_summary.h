// The run summary: predicted iteration time and, per rank, where the GPU's time went.
//
// Definitions (all over the measured window of a rank, from the start of its first measured
// iteration to the end of its last task; iterations start at IterationMark tasks):
//  - iteration time: window / measured iterations; the run's predicted iteration time is the
//    maximum over ranks (the slowest rank sets the step, as in Lin et al., TPDS 2024).
//  - compute busy: union of kernel and memcpy intervals on any stream of the rank.
//  - communication: union of the network phases of the rank's collectives (last arrival to end).
//  - exposed communication: communication time with no compute running (not hidden by overlap).
//  - rendezvous wait: time a collective had arrived and waited for other ranks, with no compute
//    or communication running.
//  - CPU-bound idle: time the rank's streams had nothing enqueued — the GPU waited for the host
//    to launch work.
//  - other idle: the rest (streams blocked on cross-stream waits, host syncs, ...).
// compute busy + exposed communication + rendezvous wait + CPU-bound idle + other idle = window.
//  - collective wait: all the time some collective of the rank had arrived and waited for the
//    other members, whatever else ran meanwhile: the union of the Chrome trace's "wait:" slices
//    of the rank (sim/export/chrome_trace_writer.h) clipped to the window. Only its part with no
//    compute or communication running is rendezvous wait; the rest is hidden behind work on
//    other streams (e.g. a comm stream waiting for a slower rank while the compute stream keeps
//    going). Not part of the sum above. Pipeline waits are left out: their trace slices
//    are "bubble:", and a stage posts its receives early, so they span most of the run; their
//    part with nothing else running is the bubble.
//  - iteration times: iteration k of a rank lasts from its k-th iteration mark to the next one,
//    the last to the rank's last task end, so that the measured ones add up to the window.
//
// Parallel dimensions: a collective belongs to the dimension its CollectiveDesc::parallel_dim
// states (sim/parallel_dim.h: a transformer's tensor, context, expert, pipeline or data
// parallelism; "other" for the rest). Then:
//  - exposed communication splits into one share per dimension: exposed_by_dim[d] is the time
//    a collective of dimension d moved data with no compute running and no collective of an
//    earlier dimension (in ParallelDim order: tp, cp, ep, pp, dp, other) doing so; the shares
//    add up to exposed communication exactly.
//  - bubble: rendezvous wait on pipeline collectives (a stage waiting for its neighbour's
//    send or receive), with no compute or communication running; rendezvous wait is then the
//    wait on every other collective outside compute, communication and bubble.
// compute busy + exposed communication + bubble + rendezvous wait + CPU-bound idle + other idle
// = window. Without pipeline collectives bubble is zero, and without dimensions the split is
// all "other".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/observer.h"
#include "sim/parallel_dim.h"
#include "sim/task_graph.h"
#include "sim/time.h"

namespace upsim {

struct RankBreakdown {
  std::string name;
  uint32_t measured_iterations = 0;
  Duration window;
  Duration iteration_time;
  Duration compute_busy;
  Duration communication;
  Duration exposed_communication;
  /// exposed_communication split by ParallelDim (indexed by its value); sums to it.
  std::array<Duration, kParallelDimCount> exposed_by_dim{};
  Duration bubble;  ///< rendezvous wait on pipeline collectives
  Duration rendezvous_wait;
  Duration cpu_bound_idle;
  Duration other_idle;
  /// Arrived at a collective (not a pipeline one) and waiting for its other members, overlapped or
  /// not (the trace's "wait:" slices); rendezvous_wait is its part with nothing else running.
  Duration collective_wait;
  /// Every iteration of the rank, warm-up included: iteration_times[k] is iteration k + 1's
  /// time (mark to next mark; the last: to the rank's last task end).
  std::vector<Duration> iteration_times;
  uint64_t kernels = 0;
  uint64_t collectives = 0;
};

/// Use of one fabric link over the whole run (all iterations, warm-up included).
struct LinkUsage {
  std::string name;
  Bandwidth capacity;
  double bytes = 0.0;
  Duration busy;  ///< time with at least one flow on the link
};

struct RunSummary {
  uint32_t iterations = 0;
  uint32_t warmup_iterations = 0;
  Duration predicted_iteration_time;
  Time end;
  uint64_t tasks = 0;
  std::vector<RankBreakdown> ranks;
  /// Bit (1 << ParallelDim) set for every dimension some collective of the graph belongs to.
  /// format_run_summary prints the per-dimension columns only when a dimension other than
  /// kOther is present.
  uint32_t parallel_dims = 0;
  /// Links that carried traffic, busiest (by busy time, then bytes, then name) first; empty
  /// when the network model has no link state.
  std::vector<LinkUsage> links;
};

/// Observer that collects the intervals the summary needs. Call `summary()` after the run.
class RunSummaryObserver final : public Observer {
 public:
  /// The first `warmup_iterations` iteration marks of each rank are excluded from the window.
  /// With `measured_iterations`, the window ends at the iteration mark that follows the last
  /// measured iteration when the rank has one (a replayed trace marks where its step ended);
  /// otherwise it runs to the rank's last task.
  explicit RunSummaryObserver(uint32_t warmup_iterations,
                              std::optional<uint32_t> measured_iterations = std::nullopt)
      : warmup_(warmup_iterations), measured_(measured_iterations) {}

  void on_run_begin(const TaskGraph& graph) override;
  void on_task_begin(TaskId task, Time at) override;
  void on_task_end(TaskId task, Time at) override;
  void on_gpu_enqueue(TaskId task, Time at) override;
  void on_collective_begin(CollectiveId collective, Time at) override;
  void on_links_declared(std::span<const LinkInfo> links) override;
  void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) override;
  void on_link_rates(Time at, std::span<const LinkRateChange> changes) override;
  void on_run_end(Time at) override;

  /// Throws std::logic_error before the run has ended, and std::runtime_error when a rank has
  /// no measured iteration (e.g. fewer iteration marks than warm-up iterations + 1).
  RunSummary summary() const;

 private:
  struct Interval {
    Time begin;
    Time end;
  };
  struct RankLog {
    std::vector<Time> marks;
    std::vector<Interval> compute;
    std::vector<Interval> communication;
    std::array<std::vector<Interval>, kParallelDimCount> communication_by_dim;
    std::vector<Interval> rendezvous;           // rendezvous on every other collective
    std::vector<Interval> pipeline_rendezvous;  // rendezvous on pipeline collectives
    std::vector<Interval> starved;              // nothing enqueued on any stream
    uint64_t outstanding = 0;                   // GPU tasks entered but not completed
    Time starved_since = Time::zero();
    Time last_end = Time::zero();
    uint64_t kernels = 0;
    uint64_t collectives = 0;
  };

  /// Adds [begin, end] to r.compute, joining the last interval when they touch.
  static void add_compute(RankLog& r, Time begin, Time end);

  const TaskGraph* graph_ = nullptr;
  uint32_t warmup_;
  std::optional<uint32_t> measured_;
  std::vector<RankLog> ranks_;
  /// Stream s of rank r is stream_base_[r] + s; a stream runs one task at a time, so the begin
  /// time of its running task is all that on_task_end needs.
  std::vector<uint32_t> stream_base_;
  std::vector<Time> stream_begin_;
  std::vector<Time> collective_begin_;       // per collective group: network phase start
  std::vector<ParallelDim> collective_dim_;  // per collective group
  uint32_t parallel_dims_ = 0;
  // Per fabric link: its name and capacity (usage's bytes and busy time are filled in by
  // summary()), and apart, the meter that on_link_rate updates, small so that the meters of a
  // large fabric stay in cache.
  struct LinkMeter {
    double bytes = 0.0;
    Duration busy;
    double rate = 0.0;  // bytes per second since `since`
    Time since;
  };
  std::vector<LinkUsage> links_;
  std::vector<LinkMeter> link_meters_;
  bool ended_ = false;
  Time end_;
};

/// Human-readable summary table (what `upsim run` writes to summary.txt; golden tests compare it
/// exactly). With more ranks than `max_rank_rows`, the table shows the `max_rank_rows` slowest
/// ranks (in rank order) and one line on the others' iteration times.
std::string format_run_summary(const RunSummary& summary, size_t max_rank_rows = SIZE_MAX);

}  // namespace upsim

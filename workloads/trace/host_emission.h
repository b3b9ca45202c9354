// What the emission of one rank of a Kineto trace shares between the rank builder
// (rank_builder.h) and its host emitters (measured_host_emitter.h, modelled_host_emitter.h): the
// rank's tasks as they are added (RankTasks), the names host tasks take (HostOpNames), and the
// cursor of one thread's emission with the helpers that add its host work, launches and event
// records (HostEmission).
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/rank_dependencies.h"
#include "workloads/trace/rank_timeline.h"

namespace upsim::trace_build {

/// The tasks emission attaches to hand-off `i` of RankDependencies::handoffs.
struct HandoffTasks {
  TaskId trigger_task = kNoTask;
  TaskId wait_task = kNoTask;
  int64_t wait_fallback_ps = 0;  // the measured wait, used when no trigger task exists
};

/// One rank's tasks as emission adds them. The rank builder adds the rank, its GPU tasks (first:
/// launches name them) and the EventRecords and StreamWaits of its stream waits; the host
/// emitters launch them and fill in the hand-offs, which the rank builder then connects.
struct RankTasks {
  TaskGraph* graph = nullptr;
  RankId rank = 0;
  int64_t origin = 0;                                // time zero on this rank's clock
  std::vector<TaskId> gpu_task;                      // per event: its GPU task (kNoTask)
  std::unordered_map<uint32_t, TaskId> record_task;  // GPU event -> the EventRecord after it
  std::vector<TaskId> wait_task;                     // per RankDependencies::waits: its StreamWait
  std::vector<HandoffTasks> handoff_tasks;           // per RankDependencies::handoffs
};

/// The names of one rank's host tasks, after the ops around its host events.
class HostOpNames {
 public:
  HostOpNames(const KinetoTrace& kineto, const RankTimeline& timeline)
      : kineto_(kineto), events_(kineto.events), timeline_(timeline) {}

  /// Name of the innermost cpu op around host event `e` (annotation if no op), for display and
  /// CPU cost lookup.
  std::string_view op_name_of(uint32_t e) const;

  /// op_name_of the runtime call `call` that launched a GPU event ("untraced launch": kNone).
  std::string_view op_name_of_launch(uint32_t call) const;

  /// The innermost host event of thread `t` that is open at `ts` (for naming host gaps).
  std::string_view op_at(const ThreadData& t, int64_t ts) const;

 protected:
  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const RankTimeline& timeline_;
};

/// Where the emission of one host thread stands.
struct Cursor {
  uint16_t thread = 0;
  int64_t at = 0;  // rank-local ps
  TaskId last = kNoTask;
  uint32_t launch_op = kNone;
  uint32_t launch_index = 0;
};

/// What the host emitters of one rank share: the helpers that add a thread's tasks at its cursor.
/// Made once `tasks` holds the rank, its GPU tasks, EventRecords and StreamWaits.
class HostEmission : public HostOpNames {
 public:
  HostEmission(const KinetoTrace& kineto, const RankTimeline& timeline,
               const RankDependencies& deps, RankTasks& tasks)
      : HostOpNames(kineto, timeline),
        deps_(deps),
        tasks_(tasks),
        graph_(tasks.graph),
        rank_(tasks.rank),
        origin_(tasks.origin) {}

 protected:
  /// The cursor of host thread `thread` at the rank's time zero.
  Cursor start_of_thread(uint32_t thread) const {
    Cursor c;
    c.thread = static_cast<uint16_t>(thread);
    c.at = origin_;
    return c;
  }

  /// Host time from the cursor until `until` (none when not later): a CpuOp `name` of that fixed
  /// duration.
  void host_work(Cursor& c, int64_t until, std::string_view name);

  /// Task `t` takes `ps` (no less than zero).
  void fixed(TaskId t, int64_t ps);

  /// The launch index of call `call` at the cursor: one more than the previous call's when both
  /// have the same parent host event, else 0.
  uint32_t next_launch_index(Cursor& c, uint32_t call);

  /// Launch of every GPU event of `call`; the call's duration goes to the first (`first_ps`).
  void emit_launches(Cursor& c, uint32_t call, int64_t first_ps);

  /// The zero-time launch of the EventRecord after GPU event `gi`, if a stream wait needs one.
  void emit_record(Cursor& c, uint32_t gi, std::string_view op);

  /// A CUDA graph's replay (cudaGraphLaunch, whose correlation id every kernel the graph runs
  /// carries): one graph launch task (TaskGraph::add_graph_launch) that enqueues the GPU tasks
  /// of `call` with their inferred EventRecords, returned; kNoTask for any other call.
  TaskId emit_graph_launch(Cursor& c, uint32_t call);

  const RankDependencies& deps_;
  RankTasks& tasks_;
  TaskGraph* graph_;
  RankId rank_;
  int64_t origin_;
};

}  // namespace upsim::trace_build

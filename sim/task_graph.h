// The task graph: the program the engine runs, for every rank at once.
//
// Contract:
//  - A rank has CPU threads and GPU streams, numbered from 0 within the rank.
//  - Every task is bound to one resource: CPU tasks (CpuOp, Launch, HostSync, IterationMark) to a
//    CPU thread, GPU tasks (Kernel, Memcpy, Collective, EventRecord, StreamWait) to a stream.
//  - A CPU thread runs its tasks in program order = the order they were added to the graph.
//  - A GPU task enters its stream when the Launch task that names it completes; a GPU task that
//    no Launch names enters its stream at time zero, in the order it was added. A stream runs its
//    tasks in the order they entered, one at a time.
//  - A task starts when it is at the head of its resource, the resource is idle, and every task
//    it depends on (explicit edges, and for StreamWait its EventRecord) has completed. Exception:
//    a StreamWait takes its stream as soon as it is at the head and completes when its
//    dependencies have, so the time a stream spends waiting is visible.
//  - A Collective task belongs to a collective group (CollectiveId); it finishes only when every
//    member rank's task of that group has started (rendezvous) and the network has moved its bytes.
//  - A HostSync holds its CPU thread until the target stream (or every stream of its rank) has
//    completed every task that entered it before the sync started.
//  - The graph is immutable once `seal()` returns; only sealed graphs run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "sim/cost_models.h"
#include "sim/time.h"

namespace upsim {

using TaskId = uint32_t;
using CollectiveId = uint32_t;
using NameId = uint32_t;
/// A kernel description stored once in the graph and shared by every kernel task that names it
/// (workloads that repeat a layer add its descriptions once: memory, and one model call each).
using KernelDescId = uint32_t;
inline constexpr TaskId kNoTask = UINT32_MAX;
inline constexpr uint32_t kNoDevice = UINT32_MAX;

enum class TaskKind : uint8_t {
  kCpuOp,          ///< host work; duration from CpuCostModel
  kLaunch,         ///< host runtime call that enqueues a GPU task; duration from CpuCostModel
  kHostSync,       ///< host waits for a stream or the whole device to drain
  kIterationMark,  ///< zero-duration marker: iteration `payload` starts on this rank
  kKernel,         ///< GPU kernel; duration from KernelCostModel
  kMemcpy,         ///< GPU copy; duration from the NetworkModel
  kCollective,     ///< GPU collective; rendezvous across its group, then the NetworkModel
  kEventRecord,    ///< GPU marker; completes when its stream reaches it
  kStreamWait,     ///< GPU; holds its stream until its EventRecord has completed
};
std::string_view task_kind_name(TaskKind kind);
constexpr bool is_gpu_task(TaskKind kind) {
  return kind >= TaskKind::kKernel;
}

/// What a HostSync waits for.
inline constexpr uint16_t kAllStreams = UINT16_MAX;

struct Task {
  TaskKind kind;
  HostPhase phase;    ///< CPU tasks: which part of an op (cost lookup)
  uint16_t resource;  ///< CPU thread index or stream index within the rank
  RankId rank;
  NameId name;       ///< display name (kernel name, runtime call, op name)
  NameId op_name;    ///< PyTorch op this task belongs to (CPU cost lookup, trace args)
  uint32_t payload;  ///< kind-specific: see TaskGraph accessors
  uint32_t launch_index;
  int64_t fixed_ps;  ///< measured duration in ps overriding the model; -1 = use the model
};

/// Allocates on 64-byte boundaries, so that no 32-byte Task straddles two cache lines (the
/// executor reads every task once or twice, from a graph far larger than the cache).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <typename U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlignment); }
  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};
static_assert(64 % sizeof(Task) == 0, "a Task must not straddle cache lines");

struct RankInfo {
  std::string name;
  uint16_t cpu_threads = 1;
  std::vector<std::string> stream_names;
  /// The GPU this rank runs on, as collective members and transfers name it (the fabric's GPU
  /// index); kNoDevice = the rank id. Differs from the rank id only when a workload simulates a
  /// subset of the GPUs (rank symmetry, CollectiveDesc::simulated_members).
  uint32_t device = kNoDevice;
};

/// Thrown by TaskGraph::add_* once the graph holds task_limit() tasks.
class TaskLimitError : public std::length_error {
 public:
  using std::length_error::length_error;
};

class TaskGraph {
 public:
  TaskGraph() = default;

  // ---- building --------------------------------------------------------------------------
  RankId add_rank(RankInfo info);
  NameId intern(std::string_view name);
  /// Capacity hint: room for `tasks` tasks in all, so that a large graph is not copied as it
  /// grows. Changes nothing else.
  void reserve_tasks(size_t tasks);
  /// The most tasks the graph accepts; adding one more throws TaskLimitError. Default: what a
  /// TaskId can number. The composition root lowers it to what the machine's memory holds, so
  /// that a workload too large for it stops with an error rather than being killed.
  /// `refuse_estimates`: expect_tasks may refuse on an estimate (a run with a share of memory,
  /// which runs again alone when refused).
  void set_task_limit(size_t max_tasks, bool refuse_estimates = false);
  size_t task_limit() const { return task_limit_; }
  /// A workload's estimate of the tasks it will hold in all, once it can make one. When the
  /// limit refuses estimates and `tasks` is above it, throws TaskLimitError now rather than
  /// when the graph reaches the limit; otherwise nothing.
  void expect_tasks(size_t tasks) const;

  /// Host work of `op_name` on `thread` (phase kOpBegin, kOpEnd or kOpBody).
  TaskId add_cpu_op(RankId rank, uint16_t thread, std::string_view op_name, HostPhase phase);
  /// A runtime call (`api`, e.g. "cudaLaunchKernel") made by `op_name` that enqueues `gpu_task`.
  /// `launch_index` counts the op's launches from 0.
  TaskId add_launch(RankId rank, uint16_t thread, std::string_view api, std::string_view op_name,
                    uint32_t launch_index, TaskId gpu_task);
  /// A CUDA graph launch (`api`, e.g. "cudaGraphLaunch") made by `op_name`: one runtime call
  /// (HostPhase::kGraphLaunch) that enqueues `gpu_tasks`, a captured graph's GPU tasks of this
  /// rank, each on its own stream, in the given order. Throws std::invalid_argument for an empty
  /// list, a task that is not a GPU task of `rank`, or one launched already.
  TaskId add_graph_launch(RankId rank, uint16_t thread, std::string_view api,
                          std::string_view op_name, std::span<const TaskId> gpu_tasks);
  TaskId add_host_sync(RankId rank, uint16_t thread, uint16_t stream_or_all,
                       std::string_view op_name);
  TaskId add_iteration_mark(RankId rank, uint16_t thread, uint32_t iteration);

  /// A kernel task; its description is stored once per distinct value (add_kernel_desc).
  TaskId add_kernel(RankId rank, uint16_t stream, std::string_view name, std::string_view op_name,
                    const KernelDesc& kernel);
  /// Stores `kernel` for kernel tasks to share (add_kernel with a KernelDescId): a description
  /// equal to one stored before gets that one's id, so that the executor asks the kernel model
  /// once per distinct shape and a graph of many ranks running the same shapes stays small.
  KernelDescId add_kernel_desc(const KernelDesc& kernel);
  TaskId add_kernel(RankId rank, uint16_t stream, std::string_view name, std::string_view op_name,
                    KernelDescId kernel);
  TaskId add_memcpy(RankId rank, uint16_t stream, std::string_view name, std::string_view op_name,
                    const TransferDesc& transfer);
  /// Declares a collective group; each member rank then adds one task with add_collective.
  CollectiveId add_collective_group(CollectiveDesc collective, std::string_view name);
  TaskId add_collective(RankId rank, uint16_t stream, CollectiveId group, std::string_view op_name);
  TaskId add_event_record(RankId rank, uint16_t stream);
  /// `record` must be an EventRecord task of the same rank.
  TaskId add_stream_wait(RankId rank, uint16_t stream, TaskId record);

  /// `after` may not start before `before` has completed.
  void add_dependency(TaskId before, TaskId after);
  /// Replay: this task takes `duration` instead of the model's prediction.
  void set_fixed_duration(TaskId task, Duration duration);

  /// Checks the graph (resources exist, launches name GPU tasks of their rank at most once,
  /// waits name records) and builds the dependency index. Throws std::invalid_argument.
  void seal();

  // ---- reading ---------------------------------------------------------------------------
  bool sealed() const { return sealed_; }
  size_t task_count() const { return tasks_.size(); }
  size_t rank_count() const { return ranks_.size(); }
  const Task& task(TaskId id) const { return tasks_[id]; }
  const RankInfo& rank(RankId id) const { return ranks_[id]; }
  std::string_view name(NameId id) const { return names_[id]; }

  const KernelDesc& kernel(TaskId id) const { return kernels_[tasks_[id].payload]; }
  /// The stored description a kernel task names (shared between tasks added with its id).
  KernelDescId kernel_desc_of(TaskId id) const { return tasks_[id].payload; }
  size_t kernel_desc_count() const { return kernels_.size(); }
  /// A stored description by its id (add_kernel_desc's).
  const KernelDesc& kernel_desc(KernelDescId id) const { return kernels_.at(id); }
  /// The GPU rank `id` runs on (RankInfo::device, or the rank id).
  uint32_t device_of(RankId id) const {
    return ranks_[id].device == kNoDevice ? id : ranks_[id].device;
  }
  const TransferDesc& transfer(TaskId id) const { return transfers_[tasks_[id].payload]; }
  CollectiveId collective_of(TaskId id) const { return tasks_[id].payload; }
  size_t collective_count() const { return collectives_.size(); }
  const CollectiveDesc& collective(CollectiveId id) const { return collectives_[id]; }
  std::string_view collective_name(CollectiveId id) const { return names_[collective_names_[id]]; }
  /// Launch: the GPU tasks it enqueues, in order (one; a graph launch's captured tasks).
  std::span<const TaskId> launched_tasks(TaskId launch) const {
    static_assert(std::is_same_v<decltype(Task::payload), TaskId>,
                  "a launch's payload is the TaskId it enqueues");
    const Task& t = tasks_[launch];
    if (t.phase != HostPhase::kGraphLaunch) return {&t.payload, 1};
    const auto [begin, end] = graph_launches_[t.payload];
    return {graph_launch_tasks_.data() + begin, end - begin};
  }
  /// Launch: the (first) GPU task it enqueues. GPU task: the launch that enqueues it, or
  /// kNoTask.
  TaskId launched_task(TaskId launch) const { return launched_tasks(launch).front(); }
  TaskId launcher_of(TaskId gpu_task) const { return launcher_[gpu_task]; }
  uint16_t sync_target(TaskId sync) const { return static_cast<uint16_t>(tasks_[sync].payload); }
  /// StreamWait: the EventRecord it waits for.
  TaskId awaited_record(TaskId stream_wait) const { return tasks_[stream_wait].payload; }
  uint32_t iteration_of(TaskId mark) const { return tasks_[mark].payload; }

  /// Tasks that wait for `id` (sealed graphs only).
  const TaskId* successors_begin(TaskId id) const { return succ_.data() + succ_offset_[id]; }
  const TaskId* successors_end(TaskId id) const { return succ_.data() + succ_offset_[id + 1]; }
  uint32_t predecessor_count(TaskId id) const { return pred_count_[id]; }
  /// Hint that `id` will run soon: asks the CPU to fetch its record and successor offsets
  /// (sealed graphs only). Changes nothing.
  void prefetch(TaskId id) const {
    __builtin_prefetch(&tasks_[id]);
    __builtin_prefetch(&succ_offset_[id]);
  }

 private:
  TaskId add_task(Task task);
  void check_rank_resource(RankId rank, uint16_t resource, bool gpu) const;

  bool sealed_ = false;
  size_t task_limit_ = kNoTask - 1;
  bool refuse_estimates_ = false;
  std::vector<RankInfo> ranks_;
  std::vector<Task, CacheLineAllocator<Task>> tasks_;
  std::vector<KernelDesc> kernels_;
  /// Hash of each stored description -> its id (add_kernel_desc's deduplication); released by
  /// seal().
  std::unordered_multimap<uint64_t, KernelDescId> kernel_index_;
  std::vector<TransferDesc> transfers_;
  std::vector<CollectiveDesc> collectives_;
  std::vector<NameId> collective_names_;
  /// Per collective group, its members sorted, built on the first add_collective of the group
  /// (membership checks in O(log n), not O(n) per member); released by seal().
  std::vector<std::vector<RankId>> sorted_members_;
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, NameId> name_index_;
  /// intern()'s memory of recent answers (kNoName: none yet).
  static constexpr NameId kNoName = UINT32_MAX;
  struct RecentName {
    NameId id = kNoName;
  };
  std::array<RecentName, 64> recent_names_{};
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::vector<TaskId> launcher_;
  /// Graph launches: each one's [begin, end) in graph_launch_tasks_ (its payload indexes it).
  std::vector<std::pair<uint32_t, uint32_t>> graph_launches_;
  std::vector<TaskId> graph_launch_tasks_;
  // Sealed dependency index (CSR).
  std::vector<uint32_t> succ_offset_;
  std::vector<TaskId> succ_;
  std::vector<uint32_t> pred_count_;
};

}  // namespace upsim

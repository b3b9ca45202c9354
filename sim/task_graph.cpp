#include "sim/task_graph.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace upsim {

namespace {
std::string task_label(const TaskGraph& g, TaskId id) {
  const Task& t = g.task(id);
  return "task " + std::to_string(id) + " (" + std::string(task_kind_name(t.kind)) + " `" +
         std::string(g.name(t.name)) + "` on rank " + std::to_string(t.rank) + ")";
}

/// FNV-1a style mixing of 64-bit words; only needs to spread equal-looking descriptions.
class Hasher {
 public:
  void add(uint64_t word) { h_ = (h_ ^ word) * 0x100000001b3ULL; }
  void add(int64_t v) { add(static_cast<uint64_t>(v)); }
  void add(double v) { add(std::bit_cast<uint64_t>(v)); }
  void add(bool v) { add(uint64_t{v}); }
  template <typename E>
  requires std::is_enum_v<E>
  void add(E v) { add(static_cast<uint64_t>(v)); }
  template <typename T>
  void add(const std::vector<T>& v) {
    add(static_cast<uint64_t>(v.size()));
    for (const T& x : v)
      add(x);
  }
  void add(const EmbeddingTableShape& t) {
    add(t.rows);
    add(t.dim);
    add(t.pooling);
    add(t.reuse_histogram);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

/// A hash consistent with KernelDesc::operator== (equal descriptions hash alike, except that
/// 0.0 and -0.0 may not: such a pair is merely stored twice).
uint64_t kernel_desc_hash(const KernelDesc& k) {
  Hasher h;
  h.add(k.cls);
  h.add(k.dtype);
  h.add(k.batch);
  h.add(k.m);
  h.add(k.n);
  h.add(k.k);
  h.add(k.grouped.routed);
  h.add(k.grouped.cap);
  h.add(k.bytes_read);
  h.add(k.bytes_written);
  h.add(k.flops);
  h.add(k.memory_op);
  h.add(k.row_elements);
  h.add(k.optimizer.kind);
  h.add(k.optimizer.impl);
  h.add(k.optimizer.tensor_elements);
  h.add(k.optimizer.large_kernel_args);
  const EmbeddingShape& e = k.embedding;
  h.add(e.batch);
  h.add(e.tables);
  h.add(e.rows);
  h.add(e.dim);
  h.add(e.pooling);
  h.add(e.reuse_histogram);
  h.add(e.per_table);
  h.add(e.index_bytes);
  h.add(e.optimizer);
  const AttentionShape& a = k.attention;
  h.add(a.batch);
  h.add(a.heads);
  h.add(a.kv_heads);
  h.add(a.seq_q);
  h.add(a.seq_kv);
  h.add(a.head_dim);
  h.add(a.causal);
  h.add(a.backward);
  h.add(a.fused);
  h.add(a.implementation);
  h.add(a.window);
  return h.value();
}
}  // namespace

RankId TaskGraph::add_rank(RankInfo info) {
  if (sealed_) throw std::logic_error("TaskGraph::add_rank on a sealed graph");
  if (info.cpu_threads == 0)
    throw std::invalid_argument("rank `" + info.name + "` has no CPU thread");
  ranks_.push_back(std::move(info));
  return static_cast<RankId>(ranks_.size() - 1);
}

NameId TaskGraph::intern(std::string_view name) {
  // Workloads pass the same few names from the same storage over and over: a slot chosen by
  // where the text lives remembers the last answer, checked by content.
  const auto address = reinterpret_cast<uintptr_t>(name.data());
  RecentName& recent = recent_names_[((address >> 4) ^ name.size()) % recent_names_.size()];
  if (recent.id != kNoName && names_[recent.id] == name) return recent.id;
  NameId id;
  auto it = name_index_.find(name);
  if (it != name_index_.end()) {
    id = it->second;
  } else {
    names_.emplace_back(name);
    id = static_cast<NameId>(names_.size() - 1);
    name_index_.emplace(names_.back(), id);
  }
  recent.id = id;
  return id;
}

void TaskGraph::set_task_limit(size_t max_tasks, bool refuse_estimates) {
  task_limit_ = std::min<size_t>(max_tasks, kNoTask - 1);
  refuse_estimates_ = refuse_estimates;
}

void TaskGraph::expect_tasks(size_t tasks) const {
  if (refuse_estimates_ && tasks > task_limit_) {
    throw TaskLimitError("the task graph would hold about " + std::to_string(tasks) +
                         " tasks, more than its limit of " + std::to_string(task_limit_));
  }
}

void TaskGraph::reserve_tasks(size_t tasks) {
  tasks_.reserve(tasks);
  launcher_.reserve(tasks);
}

void TaskGraph::check_rank_resource(RankId rank, uint16_t resource, bool gpu) const {
  if (rank >= ranks_.size()) {
    throw std::invalid_argument("task on rank " + std::to_string(rank) + ", but the graph has " +
                                std::to_string(ranks_.size()) + " ranks");
  }
  const RankInfo& r = ranks_[rank];
  const size_t limit = gpu ? r.stream_names.size() : r.cpu_threads;
  if (resource >= limit) {
    throw std::invalid_argument(std::string(gpu ? "stream " : "CPU thread ") +
                                std::to_string(resource) + " does not exist on rank `" + r.name +
                                "` (it has " + std::to_string(limit) + ")");
  }
}

TaskId TaskGraph::add_task(Task task) {
  if (sealed_) throw std::logic_error("TaskGraph: adding a task to a sealed graph");
  check_rank_resource(task.rank, task.resource, is_gpu_task(task.kind));
  if (tasks_.size() >= task_limit_) {
    throw TaskLimitError("the task graph is full: it holds at most " + std::to_string(task_limit_) +
                         " tasks");
  }
  tasks_.push_back(task);
  launcher_.push_back(kNoTask);
  return static_cast<TaskId>(tasks_.size() - 1);
}

TaskId TaskGraph::add_cpu_op(RankId rank, uint16_t thread, std::string_view op_name,
                             HostPhase phase) {
  const NameId op = intern(op_name);
  return add_task(Task{TaskKind::kCpuOp, phase, thread, rank, op, op, 0, 0, -1});
}

TaskId TaskGraph::add_launch(RankId rank, uint16_t thread, std::string_view api,
                             std::string_view op_name, uint32_t launch_index, TaskId gpu_task) {
  if (gpu_task >= tasks_.size() || !is_gpu_task(tasks_[gpu_task].kind)) {
    throw std::invalid_argument("launch `" + std::string(api) + "` of `" + std::string(op_name) +
                                "` names task " + std::to_string(gpu_task) +
                                ", which is not a GPU task");
  }
  if (tasks_[gpu_task].rank != rank) {
    throw std::invalid_argument("launch on rank " + std::to_string(rank) + " names " +
                                task_label(*this, gpu_task) + " of another rank");
  }
  if (launcher_[gpu_task] != kNoTask) {
    throw std::invalid_argument(task_label(*this, gpu_task) + " is launched twice");
  }
  const TaskId id = add_task(Task{TaskKind::kLaunch, HostPhase::kLaunch, thread, rank, intern(api),
                                  intern(op_name), gpu_task, launch_index, -1});
  launcher_[gpu_task] = id;
  return id;
}

TaskId TaskGraph::add_graph_launch(RankId rank, uint16_t thread, std::string_view api,
                                   std::string_view op_name, std::span<const TaskId> gpu_tasks) {
  const auto where = [&] {
    return "graph launch `" + std::string(api) + "` of `" + std::string(op_name) + "`";
  };
  if (gpu_tasks.empty()) throw std::invalid_argument(where() + " enqueues no GPU task");
  for (const TaskId g : gpu_tasks) {
    if (g >= tasks_.size() || !is_gpu_task(tasks_[g].kind)) {
      throw std::invalid_argument(where() + " names task " + std::to_string(g) +
                                  ", which is not a GPU task");
    }
    if (tasks_[g].rank != rank) {
      throw std::invalid_argument(where() + " on rank " + std::to_string(rank) + " names " +
                                  task_label(*this, g) + " of another rank");
    }
    if (launcher_[g] != kNoTask) {
      throw std::invalid_argument(task_label(*this, g) + " is launched twice");
    }
  }
  const auto index = static_cast<uint32_t>(graph_launches_.size());
  const TaskId id = add_task(Task{TaskKind::kLaunch, HostPhase::kGraphLaunch, thread, rank,
                                  intern(api), intern(op_name), index, 0, -1});
  const auto begin = static_cast<uint32_t>(graph_launch_tasks_.size());
  for (const TaskId g : gpu_tasks) {
    graph_launch_tasks_.push_back(g);
    launcher_[g] = id;
  }
  graph_launches_.emplace_back(begin, static_cast<uint32_t>(graph_launch_tasks_.size()));
  return id;
}

TaskId TaskGraph::add_host_sync(RankId rank, uint16_t thread, uint16_t stream_or_all,
                                std::string_view op_name) {
  if (stream_or_all != kAllStreams) check_rank_resource(rank, stream_or_all, true);
  const NameId op = intern(op_name);
  return add_task(
      Task{TaskKind::kHostSync, HostPhase::kOpBody, thread, rank, op, op, stream_or_all, 0, -1});
}

TaskId TaskGraph::add_iteration_mark(RankId rank, uint16_t thread, uint32_t iteration) {
  const NameId n = intern("iteration");
  return add_task(
      Task{TaskKind::kIterationMark, HostPhase::kMarker, thread, rank, n, n, iteration, 0, -1});
}

TaskId TaskGraph::add_kernel(RankId rank, uint16_t stream, std::string_view name,
                             std::string_view op_name, const KernelDesc& kernel) {
  return add_kernel(rank, stream, name, op_name, add_kernel_desc(kernel));
}

KernelDescId TaskGraph::add_kernel_desc(const KernelDesc& kernel) {
  if (sealed_) throw std::logic_error("TaskGraph: adding a kernel description to a sealed graph");
  const uint64_t hash = kernel_desc_hash(kernel);
  const auto [begin, end] = kernel_index_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (kernels_[it->second] == kernel) return it->second;
  }
  const auto id = static_cast<KernelDescId>(kernels_.size());
  kernels_.push_back(kernel);
  kernel_index_.emplace(hash, id);
  return id;
}

TaskId TaskGraph::add_kernel(RankId rank, uint16_t stream, std::string_view name,
                             std::string_view op_name, KernelDescId kernel) {
  if (kernel >= kernels_.size()) {
    throw std::invalid_argument("kernel task names description " + std::to_string(kernel) +
                                ", but the graph has " + std::to_string(kernels_.size()));
  }
  return add_task(Task{TaskKind::kKernel, HostPhase::kMarker, stream, rank, intern(name),
                       intern(op_name), kernel, 0, -1});
}

TaskId TaskGraph::add_memcpy(RankId rank, uint16_t stream, std::string_view name,
                             std::string_view op_name, const TransferDesc& transfer) {
  TransferDesc t = transfer;
  check_rank_resource(rank, stream, true);
  t.rank = device_of(rank);
  const TaskId id =
      add_task(Task{TaskKind::kMemcpy, HostPhase::kMarker, stream, rank, intern(name),
                    intern(op_name), static_cast<uint32_t>(transfers_.size()), 0, -1});
  transfers_.push_back(t);
  return id;
}

CollectiveId TaskGraph::add_collective_group(CollectiveDesc collective, std::string_view name) {
  if (sealed_) throw std::logic_error("TaskGraph: adding a collective to a sealed graph");
  const size_t n = collective.members.size();
  if (n == 0) throw std::invalid_argument("collective `" + std::string(name) + "` has no member");
  if (collective.kind == CollectiveKind::kAllToAll && collective.send_bytes.members() != n) {
    throw std::invalid_argument("all-to-all `" + std::string(name) + "` needs send sizes over " +
                                std::to_string(n) + " members, got " +
                                std::to_string(collective.send_bytes.members()));
  }
  collectives_.push_back(std::move(collective));
  collective_names_.push_back(intern(name));
  return static_cast<CollectiveId>(collectives_.size() - 1);
}

TaskId TaskGraph::add_collective(RankId rank, uint16_t stream, CollectiveId group,
                                 std::string_view op_name) {
  if (group >= collectives_.size()) {
    throw std::invalid_argument("collective group " + std::to_string(group) + " does not exist");
  }
  check_rank_resource(rank, stream, true);
  if (sorted_members_.size() < collectives_.size()) sorted_members_.resize(collectives_.size());
  std::vector<RankId>& sorted = sorted_members_[group];
  if (sorted.empty()) {
    sorted = collectives_[group].members;
    std::sort(sorted.begin(), sorted.end());
  }
  if (!std::binary_search(sorted.begin(), sorted.end(), device_of(rank))) {
    throw std::invalid_argument("rank " + std::to_string(rank) +
                                " is not a member of collective `" +
                                std::string(collective_name(group)) + "`");
  }
  return add_task(Task{TaskKind::kCollective, HostPhase::kMarker, stream, rank,
                       collective_names_[group], intern(op_name), group, 0, -1});
}

TaskId TaskGraph::add_event_record(RankId rank, uint16_t stream) {
  const NameId n = intern("cudaEventRecord");
  return add_task(Task{TaskKind::kEventRecord, HostPhase::kMarker, stream, rank, n, n, 0, 0, -1});
}

TaskId TaskGraph::add_stream_wait(RankId rank, uint16_t stream, TaskId record) {
  if (record >= tasks_.size() || tasks_[record].kind != TaskKind::kEventRecord ||
      tasks_[record].rank != rank) {
    throw std::invalid_argument("stream wait on rank " + std::to_string(rank) + " must name an " +
                                "event record of the same rank, got task " +
                                std::to_string(record));
  }
  const NameId n = intern("cudaStreamWaitEvent");
  const TaskId id =
      add_task(Task{TaskKind::kStreamWait, HostPhase::kMarker, stream, rank, n, n, record, 0, -1});
  edges_.emplace_back(record, id);
  return id;
}

void TaskGraph::add_dependency(TaskId before, TaskId after) {
  if (sealed_) throw std::logic_error("TaskGraph: adding a dependency to a sealed graph");
  if (before >= tasks_.size() || after >= tasks_.size() || before == after) {
    throw std::invalid_argument("dependency " + std::to_string(before) + " -> " +
                                std::to_string(after) + " names a missing task or a self-loop");
  }
  edges_.emplace_back(before, after);
}

void TaskGraph::set_fixed_duration(TaskId task, Duration duration) {
  if (task >= tasks_.size()) throw std::invalid_argument("set_fixed_duration: no such task");
  if (duration < Duration::zero()) {
    throw std::invalid_argument("set_fixed_duration: negative duration for " +
                                task_label(*this, task));
  }
  tasks_[task].fixed_ps = duration.ps();
}

void TaskGraph::seal() {
  if (sealed_) return;
  kernel_index_ = {};
  sorted_members_ = {};
  const size_t n = tasks_.size();
  succ_offset_.assign(n + 1, 0);
  pred_count_.assign(n, 0);
  for (const auto& [from, to] : edges_) {
    ++succ_offset_[from + 1];
    ++pred_count_[to];
  }
  for (size_t i = 0; i < n; ++i)
    succ_offset_[i + 1] += succ_offset_[i];
  succ_.assign(edges_.size(), 0);
  // Fill each task's successors in edge order, advancing succ_offset_[from] as the cursor; the
  // cursors end where the next task's list begins, so shifting them by one restores the offsets.
  for (const auto& [from, to] : edges_)
    succ_[succ_offset_[from]++] = to;
  for (size_t i = n; i > 0; --i)
    succ_offset_[i] = succ_offset_[i - 1];
  succ_offset_[0] = 0;
  edges_.clear();
  edges_.shrink_to_fit();
  sealed_ = true;
}

}  // namespace upsim

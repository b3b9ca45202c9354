#include "sim/executor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "sim/hbm_sharing.h"

namespace upsim {

namespace {

enum class TaskState : uint8_t { kWaiting, kRunning, kDone };

/// A CPU thread runs its program (the tasks bound to it, in graph order) one task at a time.
struct CpuThread {
  std::vector<TaskId> program;
  size_t cursor = 0;
  bool busy = false;
};

/// A host sync waiting until `stream` has completed `target` tasks.
struct SyncWaiter {
  TaskId sync;
  uint64_t target;
};

/// A GPU stream runs the tasks that entered it, in entry order, one at a time.
struct GpuStream {
  std::vector<TaskId> queue;
  size_t head = 0;
  bool busy = false;
  uint64_t entered = 0;
  uint64_t completed = 0;
  std::vector<SyncWaiter> waiters;
};

/// A kernel priced by the kernel model, running while communication kernels may come and go on
/// its GPU: its work is a fraction that drains at the rate its current SM share gives.
struct RunningKernel {
  TaskId task;
  Time segment_start;
  /// The time the work left at segment_start takes at the SM share of this segment, ps.
  int64_t segment_ps;
  /// Fraction of the kernel's work left at segment_start, in [0, 1].
  double work_left;
  EventHandle completion;
};

/// A GEMM under a static persistent schedule (sim/gemm_launch.h) some of whose CTAs found no SM
/// free at its launch.
struct PersistentGemm {
  TaskId task;
  int64_t cta_ps;    ///< one CTA's share of the tiles, ps
  int64_t resident;  ///< CTAs that started at launch
  int64_t deferred;  ///< CTAs still waiting for an SM
  Time first_end;    ///< when the CTAs that started at launch finish
  Time launched;
  EventHandle completion;
};

/// SMs a running communication kernel holds on its rank's GPU.
struct CommunicationHold {
  TaskId task;
  int32_t sms;
};

/// Rendezvous state of one collective group.
struct Rendezvous {
  std::vector<TaskId> arrived;  // member tasks that reached the head of their stream
};

std::string join_ranks(const std::vector<RankId>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

class GraphExecutor::Impl {
 public:
  Impl(Engine& engine, const TaskGraph& graph, const ModelSet& models)
      : engine_(engine), graph_(graph), models_(models) {}
  ~Impl() {
    if (hbm_ && models_.network) models_.network->remove_observer(hbm_.get());
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void add_observer(Observer* o) {
    observers_.push_back(o);
    if (models_.network) models_.network->add_observer(o);
  }

  RunStats run() {
    validate();
    build_resources();
    for (Observer* o : observers_)
      o->on_run_begin(graph_);
    const std::span<const LinkInfo> links = models_.network->links();
    if (!links.empty()) {
      for (Observer* o : observers_)
        o->on_links_declared(links);
    }
    const uint64_t events_before = engine_.executed();
    for (size_t s = 0; s < streams_.size(); ++s) {
      for (TaskId t : streams_[s].queue) {
        for (Observer* o : observers_)
          o->on_gpu_enqueue(t, engine_.now());
      }
    }
    for (size_t t = 0; t < threads_.size(); ++t)
      try_start_thread(t);
    for (size_t s = 0; s < streams_.size(); ++s)
      try_start_stream(s);
    engine_.run();
    if (done_ != graph_.task_count()) throw SimulationError(diagnose());
    for (Observer* o : observers_)
      o->on_run_end(last_completion_);
    return RunStats{last_completion_,
                    engine_.executed() - events_before,
                    done_,
                    waits_before_record_,
                    persistent_gemms_split_,
                    Duration::from_ps(persistent_split_ps_)};
  }

 private:
  void validate() const {
    if (!graph_.sealed()) throw std::logic_error("GraphExecutor: the task graph is not sealed");
    if (models_.devices.size() < graph_.rank_count()) {
      throw std::invalid_argument("GraphExecutor: " + std::to_string(graph_.rank_count()) +
                                  " ranks but " + std::to_string(models_.devices.size()) +
                                  " device profiles");
    }
    if (!models_.kernels || !models_.cpu || !models_.network) {
      throw std::invalid_argument("GraphExecutor: a cost model is missing");
    }
  }

  void build_resources() {
    const size_t n = graph_.task_count();
    pending_.resize(n);
    state_.assign(n, TaskState::kWaiting);
    thread_base_.resize(graph_.rank_count() + 1, 0);
    stream_base_.resize(graph_.rank_count() + 1, 0);
    for (RankId r = 0; r < graph_.rank_count(); ++r) {
      thread_base_[r + 1] = thread_base_[r] + graph_.rank(r).cpu_threads;
      stream_base_[r + 1] =
          stream_base_[r] + static_cast<uint32_t>(graph_.rank(r).stream_names.size());
    }
    threads_.resize(thread_base_.back());
    streams_.resize(stream_base_.back());
    rendezvous_.resize(graph_.collective_count());
    uniform_devices_ = true;
    for (RankId r = 1; r < graph_.rank_count(); ++r)
      uniform_devices_ = uniform_devices_ && same_device(models_.devices[r], models_.devices[0]);
    kernel_ps_.assign(graph_.kernel_desc_count(), -1);
    sm_sharing_ = models_.network->communication_holds_sms();
    for (CollectiveId c = 0; c < graph_.collective_count() && !sm_sharing_; ++c)
      sm_sharing_ = graph_.collective(c).sms > 0;
    running_kernels_.assign(graph_.rank_count(), {});
    build_hbm_sharing();
    tracks_running_ = sm_sharing_ || hbm_ != nullptr;
    holds_.assign(graph_.rank_count(), {});
    held_sms_.assign(graph_.rank_count(), 0);
    persistent_gemms_ = models_.gemm_launch.schedule == GemmSchedule::kStaticPersistent;
    busy_sms_.assign(graph_.rank_count(), 0);
    margin_sms_.assign(graph_.rank_count(), 0);
    deferred_gemms_.assign(graph_.rank_count(), {});
    for (TaskId t = 0; t < n; ++t) {
      pending_[t] = graph_.predecessor_count(t);
      const Task& task = graph_.task(t);
      if (!is_gpu_task(task.kind)) {
        threads_[thread_base_[task.rank] + task.resource].program.push_back(t);
      } else if (graph_.launcher_of(t) == kNoTask) {
        GpuStream& s = streams_[stream_base_[task.rank] + task.resource];
        s.queue.push_back(t);
        ++s.entered;
      }
    }
  }

  size_t thread_of(const Task& t) const { return thread_base_[t.rank] + t.resource; }

  static size_t arrivals_needed(const CollectiveDesc& desc) {
    return desc.simulated_members > 0 ? desc.simulated_members : desc.members.size();
  }

  /// The kernel model's duration, asked once per shared description when every rank has the
  /// same device (models are pure, so the answer cannot change).
  Duration kernel_duration(TaskId t, RankId rank) {
    if (!uniform_devices_) return ask_kernel_model(t, models_.devices[rank]);
    const KernelDescId id = graph_.kernel_desc_of(t);
    int64_t& ps = kernel_ps_[id];
    if (ps < 0) ps = ask_kernel_model(t, models_.devices[rank]).ps();
    return Duration::from_ps(ps);
  }

  /// The same on the SMs that communication (`held_sms_[rank]`) and, for a GEMM, the carveout
  /// leave, and the HBM bandwidth communication leaves.
  Duration kernel_duration_beside_communication(TaskId t, RankId rank) {
    int32_t held = held_sms_[rank];
    if (graph_.kernel(t).cls == KernelClass::kGemm) {
      held = std::max(held, models_.gemm_launch.sm_carveout);
    }
    return kernel_duration_on_sms_left(t, rank, held);
  }

  /// The HBM level (HbmSharing::level) communication takes on `rank` now.
  int32_t hbm_level(RankId rank) const { return hbm_ ? hbm_->level(rank) : 0; }

  /// The device a kernel on `rank` sees with `held` SMs held and HBM level `hbm`.
  DeviceProfile shared_device(RankId rank, int32_t held, int32_t hbm) const {
    return device_with_hbm_taken(device_with_sms_held(models_.devices[rank], held), hbm);
  }

  /// The kernel model's duration on the SMs that `held` leave (device_with_sms_held) and the
  /// HBM bandwidth communication leaves now (device_with_hbm_taken), cached per (description,
  /// SMs held, HBM level) when every rank has the same device.
  Duration kernel_duration_on_sms_left(TaskId t, RankId rank, int32_t held) {
    held = std::max(held, 0);
    const int32_t hbm = hbm_level(rank);
    if (held == 0 && hbm == 0) return kernel_duration(t, rank);
    if (!uniform_devices_) return ask_kernel_model(t, shared_device(rank, held, hbm));
    const int64_t key = static_cast<int64_t>(held) * (HbmSharing::kMaxLevel + 1) + hbm;
    size_t level = 0;
    while (level < shared_levels_.size() && shared_levels_[level] != key)
      ++level;
    if (level == shared_levels_.size()) {
      if (shared_levels_.size() == kCachedSharedLevels) {
        return ask_kernel_model(t, shared_device(rank, held, hbm));
      }
      shared_levels_.push_back(key);
      shared_level_ps_.resize(shared_levels_.size() * kernel_ps_.size(), -1);
    }
    int64_t& ps = shared_level_ps_[level * kernel_ps_.size() + graph_.kernel_desc_of(t)];
    if (ps < 0) ps = ask_kernel_model(t, shared_device(rank, held, hbm)).ps();
    return Duration::from_ps(ps);
  }

  /// Communication's HBM share (sim/hbm_sharing.h), when the models give one: the network model
  /// reports its links' rates and the devices' achievable memory fraction is stated.
  void build_hbm_sharing() {
    if (!(models_.achievable_memory_fraction > 0.0) || !models_.network) return;
    const std::span<const LinkInfo> links = models_.network->links();
    if (links.empty()) return;
    std::vector<int64_t> gpu_of_rank(graph_.rank_count());
    std::vector<Bandwidth> achievable(graph_.rank_count());
    for (RankId r = 0; r < graph_.rank_count(); ++r) {
      gpu_of_rank[r] = static_cast<int64_t>(graph_.device_of(r));
      achievable[r] = models_.devices[r].hbm_bandwidth * models_.achievable_memory_fraction;
      if (!(achievable[r].bytes_per_second() > 0.0)) return;
    }
    hbm_ = std::make_unique<HbmSharing>(links, gpu_of_rank, std::move(achievable),
                                        [this](RankId rank) { reprice_running(rank); });
    models_.network->add_observer(hbm_.get());
  }

  /// The kernel model's answer for task t, which must be a duration >= 0; a model that cannot
  /// give one (e.g. 1 FLOP/s makes a GEMM last longer than the simulator's +-106 days) is an
  /// error naming the kernel, not a time travelling event.
  Duration ask_kernel_model(TaskId t, const DeviceProfile& device) {
    Duration d;
    try {
      d = models_.kernels->kernel_duration(graph_.kernel(t), device);
    } catch (const std::range_error& e) {
      throw SimulationError(describe(t) + ": " + e.what() +
                            "; check the hardware profile (peak_flops, memory bandwidth) and the "
                            "workload's sizes");
    }
    if (d < Duration::zero()) {
      throw SimulationError(describe(t) + ": the kernel model returned a negative duration (" +
                            std::to_string(d.ps()) + " ps)");
    }
    return d;
  }

  /// The CPU model's duration, asked once per (op name, phase, launch index) for the first
  /// kCachedLaunches launch indices (models are pure, so the answer cannot change).
  Duration cpu_duration(const Task& task) {
    if (task.launch_index >= kCachedLaunches) {
      return models_.cpu->host_duration(
          HostOpDesc{graph_.name(task.op_name), task.phase, task.launch_index});
    }
    const size_t slot =
        (static_cast<size_t>(task.op_name) * kHostPhases + static_cast<size_t>(task.phase)) *
            kCachedLaunches +
        task.launch_index;
    if (slot >= cpu_ps_.size()) cpu_ps_.resize(slot + 1, -1);
    int64_t& ps = cpu_ps_[slot];
    if (ps < 0) {
      ps = models_.cpu
               ->host_duration(HostOpDesc{graph_.name(task.op_name), task.phase, task.launch_index})
               .ps();
    }
    return Duration::from_ps(ps);
  }

  static bool same_device(const DeviceProfile& a, const DeviceProfile& b) {
    return a.name == b.name && a.peak_flops == b.peak_flops && a.hbm_bandwidth == b.hbm_bandwidth &&
           a.hbm_bytes == b.hbm_bytes && a.l2_bandwidth == b.l2_bandwidth &&
           a.l2_bytes == b.l2_bytes && a.sm_count == b.sm_count &&
           a.sm_boost_clock_mhz == b.sm_boost_clock_mhz &&
           a.host_link_bandwidth == b.host_link_bandwidth;
  }
  size_t stream_of(const Task& t) const { return stream_base_[t.rank] + t.resource; }

  void try_start_thread(size_t index) {
    CpuThread& th = threads_[index];
    if (th.busy || th.cursor == th.program.size()) return;
    const TaskId t = th.program[th.cursor];
    if (pending_[t] != 0) return;
    th.busy = true;
    if (th.cursor + 1 < th.program.size()) prefetch(th.program[th.cursor + 1]);
    start_cpu(t);
  }

  void try_start_stream(size_t index) {
    GpuStream& s = streams_[index];
    if (s.busy || s.head == s.queue.size()) return;
    const TaskId t = s.queue[s.head];
    if (pending_[t] != 0) {
      // A stream wait occupies its stream from the moment it reaches the head: that interval is
      // the cross-stream wait the timeline shows. It completes when its record does.
      if (graph_.task(t).kind != TaskKind::kStreamWait) return;
      s.busy = true;
      begin(t);
      return;
    }
    s.busy = true;
    if (s.head + 1 < s.queue.size()) prefetch(s.queue[s.head + 1]);
    start_gpu(t);
  }

  /// Asks the CPU to fetch what starting `t` will read: the graph is far larger than the cache,
  /// and a resource's next task is known long before it starts.
  void prefetch(TaskId t) const {
    graph_.prefetch(t);
    __builtin_prefetch(&pending_[t]);
  }

  void begin(TaskId t) {
    state_[t] = TaskState::kRunning;
    for (Observer* o : observers_)
      o->on_task_begin(t, engine_.now());
  }

  EventHandle schedule_completion(TaskId t, Duration after) {
    return engine_.schedule_in(after, EventPriority::kCompletion, [this, t] { complete(t); });
  }

  void start_cpu(TaskId t) {
    begin(t);
    const Task& task = graph_.task(t);
    switch (task.kind) {
      case TaskKind::kHostSync: {
        const RankId r = task.rank;
        const uint16_t target = graph_.sync_target(t);
        uint32_t waiting = 0;
        for (uint32_t s = stream_base_[r]; s < stream_base_[r + 1]; ++s) {
          if (target != kAllStreams && s != stream_base_[r] + target) continue;
          GpuStream& stream = streams_[s];
          if (stream.completed < stream.entered) {
            stream.waiters.push_back(SyncWaiter{t, stream.entered});
            ++waiting;
          }
        }
        // The sync started, so its dependencies are met (pending_ is 0): pending_ now counts the
        // streams it waits for.
        pending_[t] = waiting;
        if (waiting == 0) schedule_completion(t, Duration::zero());
        return;
      }
      case TaskKind::kIterationMark:
        schedule_completion(t, Duration::zero());
        return;
      default:
        schedule_completion(
            t, task.fixed_ps >= 0 ? Duration::from_ps(task.fixed_ps) : cpu_duration(task));
        return;
    }
  }

  void start_gpu(TaskId t) {
    begin(t);
    const Task& task = graph_.task(t);
    switch (task.kind) {
      case TaskKind::kKernel: {
        if (task.fixed_ps >= 0) {
          schedule_completion(t, Duration::from_ps(task.fixed_ps));
          return;
        }
        if (persistent_gemms_ && graph_.kernel(t).cls == KernelClass::kGemm) {
          const int64_t ctas = gemm_ctas(t, task.rank);
          if (ctas > 0) {
            start_persistent_gemm(t, task.rank, ctas);
            return;
          }
        }
        const Duration d = kernel_duration_beside_communication(t, task.rank);
        const EventHandle completion = schedule_completion(t, d);
        if (tracks_running_) {
          running_kernels_[task.rank].push_back(
              RunningKernel{t, engine_.now(), d.ps(), 1.0, completion});
        }
        return;
      }
      case TaskKind::kMemcpy:
        if (task.fixed_ps >= 0) {
          schedule_completion(t, Duration::from_ps(task.fixed_ps));
        } else {
          models_.network->start_transfer(engine_, graph_.transfer(t), [this, t] { complete(t); });
        }
        return;
      case TaskKind::kCollective:
        arrive(t);
        return;
      default:  // EventRecord, StreamWait: their dependencies are met, they take no time.
        schedule_completion(t, Duration::zero());
        return;
    }
  }

  void arrive(TaskId t) {
    const CollectiveId c = graph_.collective_of(t);
    Rendezvous& rv = rendezvous_[c];
    rv.arrived.push_back(t);
    const CollectiveDesc& desc = graph_.collective(c);
    if (sm_sharing_) {
      const RankId rank = graph_.task(t).rank;
      const int32_t sms = member_sms(desc, rank);
      if (sms > 0) {
        holds_[rank].push_back(CommunicationHold{t, sms});
        change_held_sms(rank, sms);
      }
    }
    if (rv.arrived.size() < arrivals_needed(desc)) return;
    if (persistent_gemms_ && sm_sharing_) mark_moving(desc, rv.arrived, +1);
    for (Observer* o : observers_)
      o->on_collective_begin(c, engine_.now());
    // Replay: a collective whose member tasks carry measured durations takes the longest one.
    int64_t fixed_ps = -1;
    for (TaskId m : rv.arrived)
      fixed_ps = std::max(fixed_ps, graph_.task(m).fixed_ps);
    auto finish = [this, c] {
      if (persistent_gemms_ && sm_sharing_) {
        mark_moving(graph_.collective(c), rendezvous_[c].arrived, -1);
      }
      for (TaskId m : rendezvous_[c].arrived)
        complete(m);
    };
    if (fixed_ps >= 0) {
      engine_.schedule_in(Duration::from_ps(fixed_ps), EventPriority::kCompletion, finish);
    } else {
      models_.network->start_collective(engine_, desc, finish);
    }
  }

  void complete(TaskId t) {
    const Task& task = graph_.task(t);
    state_[t] = TaskState::kDone;
    ++done_;
    last_completion_ = engine_.now();
    for (Observer* o : observers_)
      o->on_task_end(t, engine_.now());
    if (tracks_running_ && task.kind == TaskKind::kKernel) forget_running_kernel(task.rank, t);
    if (persistent_gemms_ && task.kind == TaskKind::kKernel) forget_deferred_gemm(task.rank, t);
    if (sm_sharing_ && task.kind == TaskKind::kCollective) release_hold(task.rank, t);
    if (is_gpu_task(task.kind)) {
      const size_t si = stream_of(task);
      GpuStream& s = streams_[si];
      s.busy = false;
      ++s.head;
      ++s.completed;
      release_sync_waiters(s);
      release_successors(t);
      try_start_stream(si);
    } else {
      const size_t ti = thread_of(task);
      CpuThread& th = threads_[ti];
      th.busy = false;
      ++th.cursor;
      if (task.kind == TaskKind::kLaunch) {
        for (const TaskId gpu_task : graph_.launched_tasks(t))
          enqueue(gpu_task);
      }
      release_successors(t);
      try_start_thread(ti);
    }
  }

  void forget_running_kernel(RankId rank, TaskId t) {
    std::vector<RunningKernel>& running = running_kernels_[rank];
    for (size_t i = 0; i < running.size(); ++i) {
      if (running[i].task != t) continue;
      running[i] = running.back();
      running.pop_back();
      return;
    }
  }

  /// The kernel model's per-tile CTAs of GEMM t, asked once per description when every rank
  /// has the same device.
  int64_t gemm_ctas(TaskId t, RankId rank) {
    if (!uniform_devices_)
      return models_.kernels->gemm_ctas(graph_.kernel(t), models_.devices[rank]);
    if (gemm_ctas_.empty()) gemm_ctas_.assign(graph_.kernel_desc_count(), -1);
    int64_t& ctas = gemm_ctas_[graph_.kernel_desc_of(t)];
    if (ctas < 0) ctas = models_.kernels->gemm_ctas(graph_.kernel(t), models_.devices[rank]);
    return ctas;
  }

  /// SMs a member of `desc` on `rank` runs its communication kernel on (0: none).
  int32_t member_sms(const CollectiveDesc& desc, RankId rank) const {
    return desc.sms >= 0 ? desc.sms
                         : models_.network->communication_sms(desc, graph_.device_of(rank));
  }

  /// Launches a GEMM under a static persistent schedule (sim/gemm_launch.h): its CTAs that find
  /// no SM free wait; it is not repriced when communication starts beside it.
  void start_persistent_gemm(TaskId t, RankId rank, int64_t ctas) {
    const int32_t sms = models_.devices[rank].sm_count;
    const int32_t reserved = std::max(models_.gemm_launch.sm_carveout, margin_sms_[rank]);
    const PersistentGrid grid = persistent_grid(ctas, sms, reserved, busy_sms_[rank]);
    const int64_t cta_ps = kernel_duration_on_sms_left(t, rank, reserved).ps();
    const EventHandle completion =
        schedule_completion(t, Duration::from_ps(persistent_duration_ps(grid, cta_ps)));
    if (grid.deferred == 0) return;
    ++persistent_gemms_split_;
    deferred_gemms_[rank].push_back(PersistentGemm{t, cta_ps, grid.resident, grid.deferred,
                                                   engine_.now() + Duration::from_ps(cta_ps),
                                                   engine_.now(), completion});
  }

  /// The members of `desc` start (`sign` +1) or stop (-1) moving data: their SMs count against
  /// persistent GEMMs launched meanwhile; SMs freed start waiting CTAs.
  void mark_moving(const CollectiveDesc& desc, const std::vector<TaskId>& members, int32_t sign) {
    for (TaskId m : members) {
      const RankId rank = graph_.task(m).rank;
      const int32_t sms = member_sms(desc, rank);
      if (sms <= 0) continue;
      busy_sms_[rank] += sign * sms;
      if (desc.gemm_sm_margin) margin_sms_[rank] += sign * sms;
      if (sign < 0) start_deferred_ctas(rank, sms);
    }
  }

  /// `freed` SMs of `rank` became free now: CTAs waiting since their GEMM's launch take them,
  /// and their GEMM ends when the last of its CTAs has run its share.
  void start_deferred_ctas(RankId rank, int64_t freed) {
    const Time now = engine_.now();
    for (PersistentGemm& g : deferred_gemms_[rank]) {
      if (freed <= 0) return;
      if (g.deferred == 0 || now >= g.first_end) continue;
      const int64_t starting = std::min(g.deferred, freed);
      g.deferred -= starting;
      freed -= starting;
      const Time end =
          g.deferred == 0
              ? now + Duration::from_ps(g.cta_ps)
              : g.first_end +
                    Duration::from_ps(((g.deferred + g.resident - 1) / g.resident) * g.cta_ps);
      engine_.cancel(g.completion);
      g.completion = schedule_completion(g.task, end - now);
    }
  }

  void forget_deferred_gemm(RankId rank, TaskId t) {
    std::vector<PersistentGemm>& gemms = deferred_gemms_[rank];
    for (size_t i = 0; i < gemms.size(); ++i) {
      if (gemms[i].task != t) continue;
      persistent_split_ps_ += (engine_.now() - gemms[i].launched).ps() - gemms[i].cta_ps;
      gemms[i] = gemms.back();
      gemms.pop_back();
      return;
    }
  }

  void release_hold(RankId rank, TaskId t) {
    std::vector<CommunicationHold>& holds = holds_[rank];
    for (size_t i = 0; i < holds.size(); ++i) {
      if (holds[i].task != t) continue;
      const int32_t sms = holds[i].sms;
      holds.erase(holds.begin() + static_cast<std::ptrdiff_t>(i));
      change_held_sms(rank, -sms);
      return;
    }
  }

  /// The SMs held on `rank`'s GPU change by `delta` now.
  void change_held_sms(RankId rank, int32_t delta) {
    held_sms_[rank] += delta;
    reprice_running(rank);
  }

  /// What communication leaves `rank`'s GPU (SMs, HBM bandwidth) changed now: every model-priced
  /// kernel running there keeps the work it has done and prices the work it has left on the new
  /// share.
  void reprice_running(RankId rank) {
    const Time now = engine_.now();
    for (RunningKernel& k : running_kernels_[rank]) {
      const int64_t elapsed = (now - k.segment_start).ps();
      if (k.segment_ps > 0) {
        k.work_left *=
            std::max(0.0, 1.0 - static_cast<double>(elapsed) / static_cast<double>(k.segment_ps));
      }
      engine_.cancel(k.completion);
      const double full_ps =
          static_cast<double>(kernel_duration_beside_communication(k.task, rank).ps());
      k.segment_ps = std::llround(k.work_left * full_ps);
      k.segment_start = now;
      k.completion = schedule_completion(k.task, Duration::from_ps(k.segment_ps));
    }
  }

  void enqueue(TaskId gpu_task) {
    const Task& task = graph_.task(gpu_task);
    if (task.kind == TaskKind::kStreamWait) {
      // A wait enqueued before its event was recorded waits for nothing (CUDA semantics of
      // cudaStreamWaitEvent): drop its edge from the record.
      const TaskId record = task.payload;
      const TaskId record_launch = graph_.launcher_of(record);
      if (record_launch != kNoTask && state_[record_launch] != TaskState::kDone) {
        if (wait_released_.empty()) wait_released_.assign(graph_.task_count(), false);
        wait_released_[gpu_task] = true;
        ++waits_before_record_;
        --pending_[gpu_task];
      }
    }
    const size_t si = stream_of(task);
    GpuStream& s = streams_[si];
    s.queue.push_back(gpu_task);
    ++s.entered;
    for (Observer* o : observers_)
      o->on_gpu_enqueue(gpu_task, engine_.now());
    try_start_stream(si);
  }

  void release_sync_waiters(GpuStream& s) {
    if (s.waiters.empty()) return;
    auto keep = s.waiters.begin();
    for (auto it = s.waiters.begin(); it != s.waiters.end(); ++it) {
      if (s.completed >= it->target) {
        if (--pending_[it->sync] == 0) schedule_completion(it->sync, Duration::zero());
      } else {
        *keep++ = *it;
      }
    }
    s.waiters.erase(keep, s.waiters.end());
  }

  void release_successors(TaskId t) {
    for (const TaskId* it = graph_.successors_begin(t); it != graph_.successors_end(t); ++it) {
      const TaskId next = *it;
      // The edge of a wait released before its record was enqueued is already gone.
      if (!wait_released_.empty() && wait_released_[next] &&
          graph_.task(t).kind == TaskKind::kEventRecord && graph_.task(next).payload == t) {
        continue;
      }
      if (--pending_[next] != 0) continue;
      const Task& nt = graph_.task(next);
      if (state_[next] == TaskState::kRunning) {  // a stream wait that was holding its stream
        schedule_completion(next, Duration::zero());
        continue;
      }
      if (is_gpu_task(nt.kind)) {
        try_start_stream(stream_of(nt));
      } else {
        try_start_thread(thread_of(nt));
      }
    }
  }

  std::string describe(TaskId t) const {
    const Task& task = graph_.task(t);
    const RankInfo& r = graph_.rank(task.rank);
    std::string where = is_gpu_task(task.kind) ? "stream `" + r.stream_names[task.resource] + "`"
                                               : "CPU thread " + std::to_string(task.resource);
    return std::string(task_kind_name(task.kind)) + " `" + std::string(graph_.name(task.name)) +
           "` (task " + std::to_string(t) + ") on " + where + " of rank " +
           std::to_string(task.rank);
  }

  /// Why unfinished task `t` cannot proceed (one clause), and the task it waits for (kNoTask when
  /// it waits for something that is no single task: a rendezvous, or nothing known).
  /// `blocker[t]`: an unfinished predecessor of t (kNoTask when none).
  std::pair<std::string, TaskId> explain(TaskId t, const std::vector<TaskId>& blocker) const {
    const Task& task = graph_.task(t);
    if (state_[t] == TaskState::kRunning && task.kind == TaskKind::kHostSync) {
      for (const GpuStream& s : streams_) {
        for (const SyncWaiter& w : s.waiters) {
          if (w.sync != t) continue;
          const TaskId head = s.head < s.queue.size() ? s.queue[s.head] : kNoTask;
          return {"waits for its stream to finish the " + std::to_string(w.target) +
                      " tasks enqueued on it (" + std::to_string(s.completed) + " done)",
                  head};
        }
      }
    }
    if (state_[t] == TaskState::kRunning && task.kind == TaskKind::kCollective) {
      const CollectiveId c = graph_.collective_of(t);
      const CollectiveDesc& desc = graph_.collective(c);
      std::vector<RankId> arrived;
      for (TaskId a : rendezvous_[c].arrived)
        arrived.push_back(graph_.device_of(graph_.task(a).rank));
      std::vector<RankId> missing;
      for (RankId m : desc.members) {
        if (std::find(arrived.begin(), arrived.end(), m) == arrived.end()) missing.push_back(m);
      }
      return {"waits at the rendezvous of collective `" + std::string(graph_.collective_name(c)) +
                  "` for rank" + (missing.size() > 1 ? "s " : " ") + join_ranks(missing),
              kNoTask};
    }
    if (pending_[t] > 0 && blocker[t] != kNoTask) {
      return {"waits for " + describe(blocker[t]), blocker[t]};
    }
    if (is_gpu_task(task.kind) && graph_.launcher_of(t) != kNoTask &&
        state_[graph_.launcher_of(t)] != TaskState::kDone) {
      return {"is not launched yet: its launch is " + describe(graph_.launcher_of(t)),
              graph_.launcher_of(t)};
    }
    // Behind an earlier task of its thread or stream.
    if (!is_gpu_task(task.kind)) {
      const CpuThread& th = threads_[thread_of(task)];
      if (th.cursor < th.program.size() && th.program[th.cursor] != t) {
        return {"waits for its thread, where " + describe(th.program[th.cursor]) + " runs first",
                th.program[th.cursor]};
      }
    } else {
      const GpuStream& st = streams_[stream_of(task)];
      if (st.head < st.queue.size() && st.queue[st.head] != t) {
        return {"waits for its stream, where " + describe(st.queue[st.head]) + " runs first",
                st.queue[st.head]};
      }
    }
    return {"waits for nothing known (a scheduling fault)", kNoTask};
  }

  /// The first blocked task (lowest id at the head of a thread or stream) and the chain of what
  /// it waits for, to a task that is not blocked by another or back to itself (a cycle).
  std::string explain_first_blocked() const {
    std::vector<TaskId> blocker(graph_.task_count(), kNoTask);
    for (TaskId u = 0; u < graph_.task_count(); ++u) {
      if (state_[u] == TaskState::kDone) continue;
      for (const TaskId* it = graph_.successors_begin(u); it != graph_.successors_end(u); ++it) {
        if (blocker[*it] == kNoTask) blocker[*it] = u;
      }
    }
    TaskId first = kNoTask;
    for (const CpuThread& th : threads_) {
      if (th.cursor < th.program.size()) first = std::min(first, th.program[th.cursor]);
    }
    for (const GpuStream& st : streams_) {
      if (st.head < st.queue.size()) first = std::min(first, st.queue[st.head]);
    }
    if (first == kNoTask) return "";
    std::string out = "\n  first blocked: " + describe(first);
    std::vector<TaskId> seen;
    for (TaskId t = first; t != kNoTask && seen.size() < 16;) {
      seen.push_back(t);
      const auto [why, next] = explain(t, blocker);
      out += (t == first ? " " : ";\n    that ") + why;
      if (std::find(seen.begin(), seen.end(), next) != seen.end()) {
        out +=
            ";\n    a dependency cycle: these tasks wait for each other (the graph's edges "
            "and a thread's or stream's order contradict each other)";
        break;
      }
      t = next;
    }
    return out;
  }

  std::string diagnose() const {
    std::string msg =
        "the simulation cannot finish: " + std::to_string(graph_.task_count() - done_) + " of " +
        std::to_string(graph_.task_count()) + " tasks never completed";
    msg += explain_first_blocked();
    bool named_collective = false;
    for (CollectiveId c = 0; c < rendezvous_.size(); ++c) {
      const Rendezvous& rv = rendezvous_[c];
      const CollectiveDesc& desc = graph_.collective(c);
      if (rv.arrived.empty() || rv.arrived.size() == arrivals_needed(desc)) continue;
      std::vector<RankId> arrived;
      std::vector<RankId> missing;
      for (TaskId t : rv.arrived)
        arrived.push_back(graph_.device_of(graph_.task(t).rank));
      for (RankId m : desc.members) {
        if (std::find(arrived.begin(), arrived.end(), m) == arrived.end()) missing.push_back(m);
      }
      msg += "\n  collective `" + std::string(graph_.collective_name(c)) + "` (" +
             std::string(collective_kind_name(desc.kind)) + " over " +
             std::to_string(desc.members.size()) + " ranks): ranks " + join_ranks(arrived) +
             " arrived; never arrived: rank" + (missing.size() > 1 ? "s " : " ") +
             join_ranks(missing);
      named_collective = true;
    }
    msg += named_collective ? "\n  where each rank is stuck:" : "\n  blocked tasks:";
    int listed = 0;
    for (const CpuThread& th : threads_) {
      if (th.cursor < th.program.size() && listed < 16) {
        msg += "\n    " + describe(th.program[th.cursor]);
        ++listed;
      }
    }
    for (const GpuStream& s : streams_) {
      if (s.head < s.queue.size() && listed < 16) {
        msg += "\n    " + describe(s.queue[s.head]);
        ++listed;
      }
    }
    return msg;
  }

  Engine& engine_;
  const TaskGraph& graph_;
  const ModelSet& models_;
  std::vector<Observer*> observers_;
  std::vector<uint32_t> pending_;
  std::vector<TaskState> state_;
  std::vector<uint32_t> thread_base_;
  std::vector<uint32_t> stream_base_;
  std::vector<CpuThread> threads_;
  std::vector<GpuStream> streams_;
  std::vector<Rendezvous> rendezvous_;
  bool uniform_devices_ = true;
  /// Per kernel description: its duration in ps once asked, else -1 (uniform devices only).
  std::vector<int64_t> kernel_ps_;
  /// The distinct (SMs held, HBM level) pairs seen so far, as held x (kMaxLevel + 1) + level
  /// (at most kCachedSharedLevels), and per (pair, kernel description) the duration in ps on
  /// that share, else -1 (uniform devices only).
  static constexpr size_t kCachedSharedLevels = 16;
  std::vector<int64_t> shared_levels_;
  std::vector<int64_t> shared_level_ps_;
  /// Whether communication kernels hold SMs (the network model states any): only then are
  /// running kernels tracked per rank.
  bool sm_sharing_ = false;
  /// Per rank: model-priced kernels running now, communication kernels holding SMs now, and
  /// the SMs they hold in total.
  std::vector<std::vector<RunningKernel>> running_kernels_;
  /// Communication's HBM share (null: none); running kernels are tracked when SMs or HBM are
  /// shared.
  std::unique_ptr<HbmSharing> hbm_;
  bool tracks_running_ = false;
  std::vector<std::vector<CommunicationHold>> holds_;
  std::vector<int32_t> held_sms_;
  /// Whether GEMMs run under a static persistent schedule; per rank then: the SMs of
  /// collectives moving data, the part of them GEMMs leave free (gemm_sm_margin), and the
  /// GEMMs with CTAs waiting.
  bool persistent_gemms_ = false;
  std::vector<int32_t> busy_sms_;
  std::vector<int32_t> margin_sms_;
  std::vector<std::vector<PersistentGemm>> deferred_gemms_;
  /// Per kernel description: its per-tile CTAs once asked, else -1 (uniform devices only).
  std::vector<int64_t> gemm_ctas_;
  /// RunStats::persistent_gemms_split and persistent_gemm_split_time, in ps.
  uint64_t persistent_gemms_split_ = 0;
  int64_t persistent_split_ps_ = 0;
  static constexpr uint32_t kCachedLaunches = 4;
  static constexpr size_t kHostPhases = kHostPhaseCount;
  /// Per (op name, phase, launch index < kCachedLaunches): the CPU duration in ps, else -1.
  std::vector<int64_t> cpu_ps_;
  uint64_t done_ = 0;
  Time last_completion_ = Time::zero();
  /// Per task: a StreamWait enqueued before its record (its record edge dropped); empty until
  /// the first such wait.
  std::vector<bool> wait_released_;
  uint64_t waits_before_record_ = 0;
};

GraphExecutor::GraphExecutor(Engine& engine, const TaskGraph& graph, const ModelSet& models)
    : impl_(std::make_unique<Impl>(engine, graph, models)) {}
GraphExecutor::~GraphExecutor() = default;
void GraphExecutor::add_observer(Observer* observer) {
  impl_->add_observer(observer);
}
RunStats GraphExecutor::run() {
  return impl_->run();
}

}  // namespace upsim

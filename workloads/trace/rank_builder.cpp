#include "workloads/trace/rank_builder.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "workloads/trace/kineto_names.h"
#include "workloads/trace/measured_host_emitter.h"
#include "workloads/trace/modelled_host_emitter.h"

namespace upsim::trace_build {

TraceRankSummary RankBuilder::emit(TaskGraph& g, const std::vector<CollectiveId>& collective_of,
                                   const std::vector<int64_t>& collective_ps,
                                   const std::vector<uint8_t>& collective_alone, int64_t origin_ps,
                                   uint32_t gpu) {
  TraceRankSummary s;
  add_rank(g, gpu, s);
  tasks_.graph = &g;
  tasks_.origin = origin_ps;

  // GPU tasks first: launches name them.
  add_gpu_tasks(collective_of, collective_ps, collective_alone, s);
  add_stream_waits(s);
  emit_threads(s);
  connect_handoffs(s);
  s.iterations = timeline_.iterations;
  return s;
}

void RankBuilder::add_rank(TaskGraph& g, uint32_t gpu, TraceRankSummary& s) {
  s.file = kineto_.file;
  s.trace_rank = kineto_.distributed.rank;
  s.device = kineto_.devices.empty() ? "GPU" : kineto_.devices.front().name;
  for (const KinetoDevice& d : kineto_.devices) {
    if (!timeline_.gpu_events.empty() && d.id == events_[timeline_.gpu_events.front()].device)
      s.device = d.name;
  }
  RankInfo info;
  info.name = "rank " + std::to_string(g.rank_count()) + " (" + file_name(kineto_.file) + ")";
  const bool orphan_thread = !timeline_.orphans.empty();
  info.cpu_threads = static_cast<uint16_t>(timeline_.threads.size() + (orphan_thread ? 1 : 0));
  const bool many_devices =
      !timeline_.stream_index.empty() &&
      timeline_.stream_index.begin()->first.first != timeline_.stream_index.rbegin()->first.first;
  for (const auto& entry : timeline_.stream_index) {
    const auto& [device, stream] = entry.first;
    info.stream_names.push_back(
        "stream " + std::to_string(stream) +
        (many_devices ? " (device " + std::to_string(device) + ")" : std::string()));
  }
  info.device = gpu;
  tasks_.rank = g.add_rank(info);
  s.rank = tasks_.rank;
  s.cpu_threads = info.cpu_threads;
  s.streams = static_cast<uint16_t>(info.stream_names.size());
}

void RankBuilder::add_gpu_tasks(const std::vector<CollectiveId>& collective_of,
                                const std::vector<int64_t>& collective_ps,
                                const std::vector<uint8_t>& collective_alone, TraceRankSummary& s) {
  TaskGraph& g = *tasks_.graph;
  tasks_.gpu_task.assign(events_.size(), kNoTask);
  std::unordered_map<uint32_t, size_t> nccl_pos;
  for (size_t i = 0; i < timeline_.nccl.size(); ++i)
    nccl_pos.emplace(timeline_.nccl[i].gpu, i);
  for (uint32_t gi : timeline_.gpu_events) {
    const KinetoEvent& e = events_[gi];
    const uint16_t stream = timeline_.stream_of[gi];
    const std::string_view op = names_.op_name_of_launch(timeline_.launcher[gi]);
    TaskId t = kNoTask;
    const bool model = options_.mode == TraceMode::kModel;
    if (const auto it = nccl_pos.find(gi); it != nccl_pos.end()) {
      t = g.add_collective(tasks_.rank, stream, collective_of[it->second],
                           timeline_.nccl[it->second].op_name);
      // Model mode keeps a collective measured when nobody else is known to take part.
      const bool keep = model && collective_alone[it->second] != 0;
      if (!model || keep) g.set_fixed_duration(t, Duration::from_ps(collective_ps[it->second]));
      if (keep) ++s.collectives_kept_measured;
      ++s.collectives;
      tasks_.gpu_task[gi] = t;
      continue;
    }
    bool measured = !model;
    if (e.category == KinetoCategory::kGpuMemcpy) {
      TransferDesc td;
      td.rank = tasks_.rank;
      td.bytes = std::max<int64_t>(0, e.bytes);
      const std::string_view n = kineto_.name_of(e);
      td.kind = n.find("HtoD") != std::string_view::npos   ? TransferKind::kHostToDevice
                : n.find("DtoH") != std::string_view::npos ? TransferKind::kDeviceToHost
                                                           : TransferKind::kDeviceToDevice;
      t = g.add_memcpy(tasks_.rank, stream, n, op, td);
      ++s.copies;
    } else if (e.category == KinetoCategory::kGpuMemset) {
      KernelDesc kd;
      kd.cls = KernelClass::kMemoryBound;
      kd.bytes_written = static_cast<double>(std::max<int64_t>(0, e.bytes));
      t = g.add_kernel(tasks_.rank, stream, kineto_.name_of(e), op, kd);
      ++s.memsets;
    } else {
      std::optional<KernelDesc> kd;
      KeptReason why = KeptReason::kShapes;
      if (model) kd = kernels_.kernel_desc(gi, why);
      if (!kd) {
        kd = KernelDesc{};
        measured = true;
        if (model) ++s.kernels_kept_measured;
        if (why == KeptReason::kCompiled) ++s.kernels_compiled_kept_measured;
        if (why == KeptReason::kNonAten) ++s.kernels_non_aten_kept_measured;
      }
      t = g.add_kernel(tasks_.rank, stream, kineto_.name_of(e), op, *kd);
      ++s.kernels;
    }
    if (measured) g.set_fixed_duration(t, Duration::from_ps(e.dur_ps));
    tasks_.gpu_task[gi] = t;
  }
}

void RankBuilder::add_stream_waits(TraceRankSummary& s) {
  TaskGraph& g = *tasks_.graph;
  tasks_.record_task.clear();
  tasks_.wait_task.clear();
  for (const StreamWaitInfo& w : deps_.waits) {
    auto it = tasks_.record_task.find(w.producer);
    if (it == tasks_.record_task.end()) {
      it =
          tasks_.record_task
              .emplace(w.producer, g.add_event_record(tasks_.rank, timeline_.stream_of[w.producer]))
              .first;
    }
    tasks_.wait_task.push_back(g.add_stream_wait(tasks_.rank, w.stream, it->second));
  }
  s.stream_waits = deps_.waits.size();
  s.stream_waits_exact = static_cast<uint64_t>(std::count_if(
      deps_.waits.begin(), deps_.waits.end(), [](const StreamWaitInfo& w) { return w.exact; }));
  s.stream_waits_dropped = deps_.waits_dropped;
  std::vector<int64_t> cuda_stream(timeline_.stream_index.size());
  for (const auto& [key, index] : timeline_.stream_index)
    cuda_stream[index] = key.second;
  for (const StreamWaitInfo& w : deps_.waits) {
    s.stream_wait_edges.push_back(TraceStreamWaitEdge{
        events_[w.call].correlation, events_[w.producer].correlation, cuda_stream[w.stream],
        cuda_stream[timeline_.stream_of[w.producer]], w.exact});
  }
}

void RankBuilder::emit_threads(TraceRankSummary& s) {
  const bool orphan_thread = !timeline_.orphans.empty();
  tasks_.handoff_tasks.assign(deps_.handoffs.size(), HandoffTasks{});
  MeasuredHostEmitter measured(kineto_, timeline_, deps_, tasks_);
  ModelledHostEmitter modelled(kineto_, timeline_, deps_, tasks_);
  for (uint32_t t = 0; t < timeline_.threads.size(); ++t) {
    if (options_.host == TraceHost::kModelled)
      modelled.emit_thread_modelled(t, s);
    else
      measured.emit_thread(t, s);
  }
  if (orphan_thread) measured.emit_orphans(static_cast<uint16_t>(timeline_.threads.size()), s);
}

void RankBuilder::connect_handoffs(TraceRankSummary& s) {
  TaskGraph& g = *tasks_.graph;
  for (const HandoffTasks& h : tasks_.handoff_tasks) {
    if (h.wait_task == kNoTask) continue;
    if (h.trigger_task != kNoTask) {
      g.add_dependency(h.trigger_task, h.wait_task);
      ++s.handoffs;
    } else {
      // No task of the other thread ends at the trigger: keep the measured idle time instead.
      g.set_fixed_duration(h.wait_task, Duration::from_ps(h.wait_fallback_ps));
    }
  }
}

}  // namespace upsim::trace_build

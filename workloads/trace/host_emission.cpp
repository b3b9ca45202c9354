#include "workloads/trace/host_emission.h"

#include <algorithm>
#include <vector>

namespace upsim::trace_build {

std::string_view HostOpNames::op_name_of(uint32_t e) const {
  uint32_t annotation = kNone;
  for (uint32_t p = e; p != kNone; p = timeline_.parent[p]) {
    const KinetoCategory c = events_[p].category;
    if (c == KinetoCategory::kCpuOp && p != e) return kineto_.name_of(events_[p]);
    if (c == KinetoCategory::kUserAnnotation && annotation == kNone && p != e) annotation = p;
  }
  return annotation != kNone ? kineto_.name_of(events_[annotation]) : std::string_view("host");
}

std::string_view HostOpNames::op_name_of_launch(uint32_t call) const {
  return call == kNone ? std::string_view("untraced launch") : op_name_of(call);
}

std::string_view HostOpNames::op_at(const ThreadData& t, int64_t ts) const {
  const auto it = std::upper_bound(t.host.begin(), t.host.end(), ts,
                                   [&](int64_t x, uint32_t i) { return x < events_[i].ts_ps; });
  if (it == t.host.begin()) return "host";
  for (uint32_t p = *(it - 1); p != kNone; p = timeline_.parent[p]) {
    const KinetoEvent& e = events_[p];
    if (e.end_ps() >= ts &&
        (e.category == KinetoCategory::kCpuOp || e.category == KinetoCategory::kUserAnnotation)) {
      return kineto_.name_of(e);
    }
  }
  return "host";
}

void HostEmission::host_work(Cursor& c, int64_t until, std::string_view name) {
  if (until <= c.at) return;
  const TaskId t = graph_->add_cpu_op(rank_, c.thread, name, HostPhase::kOpBody);
  graph_->set_fixed_duration(t, Duration::from_ps(until - c.at));
  c.at = until;
  c.last = t;
}

void HostEmission::fixed(TaskId t, int64_t ps) {
  graph_->set_fixed_duration(t, Duration::from_ps(std::max<int64_t>(0, ps)));
}

uint32_t HostEmission::next_launch_index(Cursor& c, uint32_t call) {
  const uint32_t op = timeline_.parent[call];
  if (op != c.launch_op || op == kNone) {
    c.launch_op = op;
    c.launch_index = 0;
  } else {
    ++c.launch_index;
  }
  return c.launch_index;
}

TaskId HostEmission::emit_graph_launch(Cursor& c, uint32_t call) {
  const std::string_view api = kineto_.name_of(events_[call]);
  if (!api.starts_with("cudaGraphLaunch")) return kNoTask;
  std::vector<TaskId> captured;
  for (uint32_t gi : timeline_.launched.at(call)) {
    captured.push_back(tasks_.gpu_task[gi]);
    if (const auto r = tasks_.record_task.find(gi); r != tasks_.record_task.end()) {
      captured.push_back(r->second);
    }
  }
  c.last = graph_->add_graph_launch(rank_, c.thread, api, op_name_of(call), captured);
  return c.last;
}

void HostEmission::emit_launches(Cursor& c, uint32_t call, int64_t first_ps) {
  if (const TaskId g = emit_graph_launch(c, call); g != kNoTask) {
    fixed(g, first_ps);
    return;
  }
  const std::string_view api = kineto_.name_of(events_[call]);
  const std::string_view op = op_name_of(call);
  bool first = true;
  for (uint32_t gi : timeline_.launched.at(call)) {
    const TaskId l = graph_->add_launch(rank_, c.thread, api, op, next_launch_index(c, call),
                                        tasks_.gpu_task[gi]);
    fixed(l, first ? first_ps : 0);
    first = false;
    c.last = l;
    emit_record(c, gi, op);
  }
}

void HostEmission::emit_record(Cursor& c, uint32_t gi, std::string_view op) {
  const auto r = tasks_.record_task.find(gi);
  if (r == tasks_.record_task.end()) return;
  const TaskId l =
      graph_->add_launch(rank_, c.thread, "cudaEventRecord (inferred)", op, 0, r->second);
  fixed(l, 0);
  c.last = l;
}

}  // namespace upsim::trace_build

#include "sim/export/op_profile.h"

#include <algorithm>
#include <tuple>

namespace upsim {

void OpProfileObserver::on_run_begin(const TaskGraph& graph) {
  graph_ = &graph;
  marks_seen_.assign(graph.rank_count(), 0);
  thread_base_.clear();
  stream_base_.clear();
  uint32_t slots = 0;
  for (RankId r = 0; r < graph.rank_count(); ++r) {
    thread_base_.push_back(slots);
    slots += graph.rank(r).cpu_threads;
    stream_base_.push_back(slots);
    slots += static_cast<uint32_t>(graph.rank(r).stream_names.size());
  }
  begin_.assign(slots, Time::zero());
  counted_.assign(slots, 0);
}

bool OpProfileObserver::measuring(RankId rank) const {
  const uint32_t seen = marks_seen_[rank];
  if (seen <= warmup_) return false;
  return !measured_ || seen <= warmup_ + *measured_;
}

void OpProfileObserver::on_task_begin(TaskId task, Time at) {
  const Task& t = graph_->task(task);
  if (t.kind == TaskKind::kIterationMark) return;
  const uint32_t slot =
      is_gpu_task(t.kind) ? stream_base_[t.rank] + t.resource : thread_base_[t.rank] + t.resource;
  begin_[slot] = at;
  counted_[slot] = measuring(t.rank) ? 1 : 0;
}

void OpProfileObserver::on_task_end(TaskId task, Time at) {
  const Task& t = graph_->task(task);
  if (t.kind == TaskKind::kIterationMark) {
    ++marks_seen_[t.rank];
    return;
  }
  const uint32_t slot =
      is_gpu_task(t.kind) ? stream_base_[t.rank] + t.resource : thread_base_[t.rank] + t.resource;
  if (!counted_[slot]) return;
  const Key key{t.kind, t.op_name, t.name};
  const auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(sums_.size()));
  if (inserted) sums_.push_back(Sum{t.kind, t.op_name, t.name});
  Sum* sum = &sums_[it->second];
  ++sum->count;
  sum->total_ps += (at - begin_[slot]).ps();
}

std::vector<OpProfileRow> OpProfileObserver::rows() const {
  std::vector<OpProfileRow> out;
  out.reserve(sums_.size());
  for (const Sum& s : sums_) {
    out.push_back(OpProfileRow{s.kind, std::string(graph_->name(s.op)),
                               std::string(graph_->name(s.name)), s.count,
                               Duration::from_ps(s.total_ps)});
  }
  std::sort(out.begin(), out.end(), [](const OpProfileRow& a, const OpProfileRow& b) {
    if (a.total != b.total) return a.total > b.total;
    return std::tie(a.kind, a.op, a.name) < std::tie(b.kind, b.op, b.name);
  });
  return out;
}

}  // namespace upsim

#include "sim/export/run_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "sim/prefetch_pipeline.h"

namespace upsim {

namespace {

struct Span {
  Time begin;
  Time end;
};
using Spans = std::vector<Span>;

/// Sorts, clips to [lo, hi] and merges overlapping spans.
template <typename Interval>
Spans normalize(const std::vector<Interval>& in, Time lo, Time hi) {
  Spans spans;
  spans.reserve(in.size());
  for (const auto& i : in) {
    const Time b = max(i.begin, lo);
    const Time e = min(i.end, hi);
    if (b < e) spans.push_back(Span{b, e});
  }
  const auto by_begin = [](const Span& a, const Span& b) { return a.begin < b.begin; };
  // Mostly recorded in order already; spans with equal begins merge the same in any order.
  if (!std::is_sorted(spans.begin(), spans.end(), by_begin))
    std::sort(spans.begin(), spans.end(), by_begin);
  Spans merged;
  for (const Span& s : spans) {
    if (!merged.empty() && s.begin <= merged.back().end) {
      merged.back().end = max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  return merged;
}

Spans unite(const Spans& a, const Spans& b) {
  Spans all(a);
  all.insert(all.end(), b.begin(), b.end());
  return normalize(all, Time::zero(), Time::max());
}

Duration measure(const Spans& spans) {
  Duration d = Duration::zero();
  for (const Span& s : spans)
    d += s.end - s.begin;
  return d;
}

/// |a \ b| for normalized span lists.
Duration minus(const Spans& a, const Spans& b) {
  return measure(unite(a, b)) - measure(b);
}

std::string ms(Duration d) {
  return fmt::format("{:.4f}", d.ms());
}
std::string pct(Duration part, Duration whole) {
  if (whole <= Duration::zero()) return "-";
  return fmt::format("{:.1f}%",
                     100.0 * static_cast<double>(part.ps()) / static_cast<double>(whole.ps()));
}

/// True when the summary has collectives of a named dimension (not only kOther).
bool has_named_dims(uint32_t dims) {
  return (dims & ~(1u << parallel_dim_index(ParallelDim::kOther))) != 0;
}

}  // namespace

void RunSummaryObserver::on_run_begin(const TaskGraph& graph) {
  graph_ = &graph;
  ranks_.assign(graph.rank_count(), RankLog{});
  stream_base_.assign(graph.rank_count() + 1, 0);
  for (RankId r = 0; r < graph.rank_count(); ++r) {
    stream_base_[r + 1] =
        stream_base_[r] + static_cast<uint32_t>(graph.rank(r).stream_names.size());
  }
  stream_begin_.assign(stream_base_.back(), Time::zero());
  collective_begin_.assign(graph.collective_count(), Time::zero());
  collective_dim_.assign(graph.collective_count(), ParallelDim::kOther);
  parallel_dims_ = 0;
  for (CollectiveId c = 0; c < graph.collective_count(); ++c) {
    collective_dim_[c] = graph.collective(c).parallel_dim;
    parallel_dims_ |= 1u << parallel_dim_index(collective_dim_[c]);
  }
  ended_ = false;
}

void RunSummaryObserver::on_task_begin(TaskId task, Time at) {
  const Task& t = graph_->task(task);
  if (is_gpu_task(t.kind)) {
    stream_begin_[stream_base_[t.rank] + t.resource] = at;
  } else if (t.kind == TaskKind::kIterationMark) {
    ranks_[t.rank].marks.push_back(at);
  }
}

void RunSummaryObserver::add_compute(RankLog& r, Time begin, Time end) {
  // Intervals end in time order, so one that touches or overlaps the last stored one joins it:
  // the union, which is all that normalize() keeps of them, is the same.
  if (!r.compute.empty() && begin <= r.compute.back().end) {
    Interval& last = r.compute.back();
    last.begin = min(last.begin, begin);
    last.end = max(last.end, end);
    return;
  }
  r.compute.push_back({begin, end});
}

void RunSummaryObserver::on_gpu_enqueue(TaskId task, Time at) {
  RankLog& r = ranks_[graph_->task(task).rank];
  if (r.outstanding == 0 && r.starved_since < at) r.starved.push_back({r.starved_since, at});
  ++r.outstanding;
}

void RunSummaryObserver::on_collective_begin(CollectiveId collective, Time at) {
  collective_begin_[collective] = at;
}

void RunSummaryObserver::on_task_end(TaskId task, Time at) {
  const Task& t = graph_->task(task);
  RankLog& r = ranks_[t.rank];
  r.last_end = max(r.last_end, at);
  if (!is_gpu_task(t.kind)) return;
  const Time begin = stream_begin_[stream_base_[t.rank] + t.resource];
  switch (t.kind) {
    case TaskKind::kKernel:
      ++r.kernels;
      add_compute(r, begin, at);
      break;
    case TaskKind::kMemcpy:
      add_compute(r, begin, at);
      break;
    case TaskKind::kCollective: {
      ++r.collectives;
      const CollectiveId group = graph_->collective_of(task);
      const Time network_begin = collective_begin_[group];
      const ParallelDim dim = collective_dim_[group];
      if (dim == ParallelDim::kPipeline) {
        r.pipeline_rendezvous.push_back({begin, network_begin});
      } else {
        r.rendezvous.push_back({begin, network_begin});
      }
      r.communication.push_back({network_begin, at});
      r.communication_by_dim[parallel_dim_index(dim)].push_back({network_begin, at});
      break;
    }
    default:
      break;
  }
  if (--r.outstanding == 0) r.starved_since = at;
}

void RunSummaryObserver::on_links_declared(std::span<const LinkInfo> links) {
  links_.clear();
  for (const LinkInfo& l : links)
    links_.push_back(LinkUsage{l.name, l.capacity, 0.0, {}});
  link_meters_.assign(links.size(), LinkMeter{});
}

void RunSummaryObserver::on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t) {
  if (link >= link_meters_.size()) return;
  LinkMeter& m = link_meters_[link];
  const Duration elapsed = at - m.since;
  m.bytes += m.rate * elapsed.seconds();
  if (m.rate > 0.0) m.busy += elapsed;
  m.rate = rate.bytes_per_second();
  m.since = at;
}

void RunSummaryObserver::on_link_rates(Time at, std::span<const LinkRateChange> changes) {
  // A large fabric's meters are far apart: load them a chunk ahead.
  const auto load_meter = [&](size_t i) {
    if (changes[i].link < link_meters_.size()) prefetch::line(&link_meters_[changes[i].link]);
  };
  prefetch::two_stage(
      changes.size(), [](size_t) {}, load_meter,
      [&](size_t i) { on_link_rate(changes[i].link, at, changes[i].rate, changes[i].flows); });
}

void RunSummaryObserver::on_run_end(Time at) {
  for (uint32_t i = 0; i < link_meters_.size(); ++i) {
    if (link_meters_[i].rate > 0.0) on_link_rate(i, at, Bandwidth{}, 0);
  }
  end_ = at;
  ended_ = true;
}

RunSummary RunSummaryObserver::summary() const {
  if (!ended_) throw std::logic_error("RunSummaryObserver::summary before the run ended");
  RunSummary out;
  out.end = end_;
  out.tasks = graph_->task_count();
  out.warmup_iterations = warmup_;
  out.parallel_dims = parallel_dims_;
  for (RankId rank = 0; rank < ranks_.size(); ++rank) {
    const RankLog& r = ranks_[rank];
    out.iterations = std::max(out.iterations, static_cast<uint32_t>(r.marks.size()));
    if (r.marks.size() <= warmup_) {
      throw std::runtime_error(fmt::format(
          "rank `{}` has {} iteration marks; at least {} are needed to measure an iteration after "
          "{} warm-up iteration(s)",
          graph_->rank(rank).name, r.marks.size(), warmup_ + 1, warmup_));
    }
    const Time lo = r.marks[warmup_];
    const size_t end_mark = measured_ ? warmup_ + *measured_ : r.marks.size();
    const Time hi = end_mark < r.marks.size() ? r.marks[end_mark] : r.last_end;
    RankBreakdown b;
    b.name = graph_->rank(rank).name;
    b.measured_iterations = static_cast<uint32_t>(std::min(end_mark, r.marks.size()) - warmup_);
    b.window = hi - lo;
    b.iteration_time = b.window / b.measured_iterations;
    const Spans compute = normalize(r.compute, lo, hi);
    const Spans comm = normalize(r.communication, lo, hi);
    const Spans bubble = normalize(r.pipeline_rendezvous, lo, hi);
    const Spans collective_wait = normalize(r.rendezvous, lo, hi);
    const Spans rendezvous = unite(collective_wait, bubble);
    std::vector<Span> starved_in;
    for (const auto& s : r.starved)
      starved_in.push_back({s.begin, s.end});
    if (r.outstanding == 0) starved_in.push_back({r.starved_since, hi});
    const Spans starved = normalize(starved_in, lo, hi);
    const Spans busy = unite(compute, comm);
    const Spans busy_or_waiting = unite(busy, rendezvous);
    const Spans accounted = unite(busy_or_waiting, starved);
    b.compute_busy = measure(compute);
    b.communication = measure(comm);
    b.exposed_communication = minus(comm, compute);
    // Each dimension's exposed share: outside compute and the earlier dimensions' transfers.
    Spans covered = compute;
    for (ParallelDim d : kParallelDims) {
      const Spans spans = normalize(r.communication_by_dim[parallel_dim_index(d)], lo, hi);
      if (spans.empty()) continue;
      b.exposed_by_dim[parallel_dim_index(d)] = minus(spans, covered);
      covered = unite(covered, spans);
    }
    b.bubble = minus(bubble, busy);
    b.rendezvous_wait = minus(rendezvous, unite(busy, bubble));
    b.cpu_bound_idle = minus(starved, busy_or_waiting);
    b.other_idle = b.window - measure(accounted);
    b.collective_wait = measure(collective_wait);
    b.iteration_times.reserve(r.marks.size());
    for (size_t k = 0; k < r.marks.size(); ++k) {
      const Time next = k + 1 < r.marks.size() ? r.marks[k + 1] : max(r.last_end, r.marks[k]);
      b.iteration_times.push_back(next - r.marks[k]);
    }
    b.kernels = r.kernels;
    b.collectives = r.collectives;
    out.predicted_iteration_time = max(out.predicted_iteration_time, b.iteration_time);
    out.ranks.push_back(std::move(b));
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    const LinkMeter& m = link_meters_[i];
    if (!(m.bytes > 0.0)) continue;
    LinkUsage usage = links_[i];
    usage.bytes = m.bytes;
    usage.busy = m.busy;
    out.links.push_back(std::move(usage));
  }
  std::sort(out.links.begin(), out.links.end(), [](const LinkUsage& a, const LinkUsage& b) {
    if (a.busy != b.busy) return a.busy > b.busy;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.name < b.name;
  });
  return out;
}

std::string format_run_summary(const RunSummary& s, size_t max_rank_rows) {
  std::string slowest;
  for (const RankBreakdown& r : s.ranks) {
    if (r.iteration_time == s.predicted_iteration_time) {
      slowest = r.name;
      break;
    }
  }
  const uint32_t measured = s.ranks.empty() ? 0 : s.ranks.front().measured_iterations;
  const std::string which =
      measured == 1 ? fmt::format("iteration {}", s.warmup_iterations + 1)
                    : fmt::format("mean over iterations {}..{}", s.warmup_iterations + 1,
                                  s.warmup_iterations + measured);
  std::string out = fmt::format("predicted iteration time: {} ms  ({} of {}; slowest: {})\n",
                                ms(s.predicted_iteration_time), which, s.iterations, slowest);
  size_t name_width = 10;
  for (const RankBreakdown& r : s.ranks)
    name_width = std::max(name_width, r.name.size());
  // Columns after the rank's name and iteration time: a header and the rank's total.
  struct Column {
    std::string header;
    Duration RankBreakdown::*total = nullptr;
    int dim = -1;  // >= 0: exposed_by_dim[dim] instead of `total`
  };
  std::vector<Column> columns{{"compute", &RankBreakdown::compute_busy},
                              {"comm", &RankBreakdown::communication},
                              {"exposed comm", &RankBreakdown::exposed_communication}};
  const bool by_dim = has_named_dims(s.parallel_dims);
  if (by_dim) {
    for (ParallelDim d : kParallelDims) {
      if ((s.parallel_dims & (1u << parallel_dim_index(d))) == 0) continue;
      columns.push_back(Column{fmt::format("exposed {}", parallel_dim_name(d)), nullptr,
                               static_cast<int>(parallel_dim_index(d))});
    }
    columns.push_back(Column{"bubble", &RankBreakdown::bubble});
  }
  columns.push_back(Column{"rendezvous wait", &RankBreakdown::rendezvous_wait});
  columns.push_back(Column{"CPU-bound idle", &RankBreakdown::cpu_bound_idle});
  columns.push_back(Column{"other idle", &RankBreakdown::other_idle});
  columns.push_back(Column{"collective wait", &RankBreakdown::collective_wait});
  out += fmt::format("{:<{}} {:>10}", "rank", name_width, "iter (ms)");
  for (const Column& c : columns)
    out += fmt::format(" {:>16}", c.header);
  out += '\n';
  // The rows shown: every rank, or the slowest max_rank_rows of them (ties: the lower rank).
  std::vector<size_t> shown(s.ranks.size());
  for (size_t i = 0; i < shown.size(); ++i)
    shown[i] = i;
  if (shown.size() > max_rank_rows) {
    std::stable_sort(shown.begin(), shown.end(), [&](size_t a, size_t b) {
      return s.ranks[a].iteration_time > s.ranks[b].iteration_time;
    });
    shown.resize(max_rank_rows);
    std::sort(shown.begin(), shown.end());
  }
  for (const size_t index : shown) {
    const RankBreakdown& r = s.ranks[index];
    out += fmt::format("{:<{}} {:>10}", r.name, name_width, ms(r.iteration_time));
    // Each cell: per-iteration mean, and its share of the rank's window.
    for (const Column& c : columns) {
      const Duration total = c.dim >= 0 ? r.exposed_by_dim[static_cast<size_t>(c.dim)] : r.*c.total;
      out += fmt::format(" {:>16}", fmt::format("{} {:>6}", ms(total / r.measured_iterations),
                                                pct(total, r.window)));
    }
    out += '\n';
  }
  if (shown.size() < s.ranks.size()) {
    Duration fastest = s.ranks.front().iteration_time;
    Duration slowest_hidden = Duration::zero();
    std::vector<bool> is_shown(s.ranks.size(), false);
    for (const size_t index : shown)
      is_shown[index] = true;
    for (size_t i = 0; i < s.ranks.size(); ++i) {
      fastest = std::min(fastest, s.ranks[i].iteration_time);
      if (!is_shown[i]) slowest_hidden = std::max(slowest_hidden, s.ranks[i].iteration_time);
    }
    out += fmt::format("... {} more ranks, iteration {} to {} ms (summary.txt lists every rank)\n",
                       s.ranks.size() - shown.size(), ms(fastest), ms(slowest_hidden));
  }
  if (by_dim) {
    out +=
        "(per-iteration means in ms; % of the rank's iteration time; comm overlaps compute, so "
        "compute + exposed comm + bubble + rendezvous wait + CPU-bound idle + other idle = "
        "iteration; exposed comm splits by the collectives' parallel dimension, tp before cp, "
        "ep, pp, dp, other where they overlap; bubble = rendezvous wait on pp collectives; "
        "collective wait = all time a collective other than pp had arrived and waited for its "
        "peers, also while other work ran (the trace's wait: slices), of which rendezvous wait "
        "is the part with nothing else running)\n";
  } else {
    out +=
        "(per-iteration means in ms; % of the rank's iteration time; comm overlaps compute, so "
        "compute + exposed comm + rendezvous wait + CPU-bound idle + other idle = iteration; "
        "collective wait = all time a collective had arrived and waited for its peers, also "
        "while other work ran (the trace's wait: slices), of which rendezvous wait is the part "
        "with nothing else running)\n";
  }
  if (!s.links.empty()) {
    constexpr size_t kShown = 8;
    const int64_t iterations = std::max<int64_t>(1, s.iterations);
    out +=
        fmt::format("busiest links ({} of {} used; per-iteration means over all {} iterations):\n",
                    std::min(kShown, s.links.size()), s.links.size(), s.iterations);
    for (size_t i = 0; i < s.links.size() && i < kShown; ++i) {
      const LinkUsage& l = s.links[i];
      out += fmt::format("  {:<44} {:>10.3f} MB {:>9} ms busy  (capacity {:.1f} GB/s)\n", l.name,
                         l.bytes / static_cast<double>(iterations) * 1e-6, ms(l.busy / iterations),
                         l.capacity.gigabytes_per_second());
    }
  }
  return out;
}

}  // namespace upsim

#include "workloads/trace/trace_graph.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/formats/parse_error.h"
#include "workloads/trace/cross_rank_collectives.h"
#include "workloads/trace/kineto_names.h"
#include "workloads/trace/rank_builder.h"
#include "workloads/trace/rank_dependencies.h"
#include "workloads/trace/rank_timeline.h"

namespace upsim {

namespace {

using namespace trace_build;

/// The traces on one clock: rank r's local ps + offset[r] = ps since the earliest base, and the
/// origin (the earliest activity of any rank on that clock). Traces that do not overlap in time
/// are not of one run: an error naming both.
struct ClockAlignment {
  std::vector<int64_t> offset;
  int64_t origin = INT64_MAX;
};

ClockAlignment align_clocks(const std::vector<RankTrace>& traces,
                            const std::vector<RankTimeline>& timelines) {
  ClockAlignment out;
  std::vector<int64_t>& offset = out.offset;
  int64_t base = INT64_MAX;
  for (const RankTrace& t : traces)
    base = std::min(base, t.kineto.base_us);
  offset.assign(traces.size(), 0);
  for (size_t r = 0; r < traces.size(); ++r)
    offset[r] = (traces[r].kineto.base_us - base) * 1'000'000;
  if (traces.size() > 1) {
    // The ranks of one job overlap in time; traces of different runs (or machines with
    // unrelated clocks) do not.
    int64_t latest_first = INT64_MIN;
    int64_t earliest_last = INT64_MAX;
    size_t late = 0;
    size_t early = 0;
    for (size_t r = 0; r < traces.size(); ++r) {
      if (timelines[r].first_ps + offset[r] > latest_first) {
        latest_first = timelines[r].first_ps + offset[r];
        late = r;
      }
      if (timelines[r].last_ps + offset[r] < earliest_last) {
        earliest_last = timelines[r].last_ps + offset[r];
        early = r;
      }
    }
    if (latest_first > earliest_last) {
      throw ParseError(traces[late].kineto.file,
                       "this trace starts after " + file_name(traces[early].kineto.file) +
                           " ends: the traces are not of the same run (or their clocks differ)");
    }
  }
  for (size_t r = 0; r < traces.size(); ++r)
    out.origin = std::min(out.origin, timelines[r].first_ps + offset[r]);
  return out;
}

}  // namespace

TraceGraphInfo build_replay_graph(const std::vector<RankTrace>& traces, TaskGraph& graph,
                                  const TraceGraphOptions& options) {
  if (traces.empty()) throw ParseError("(no file)", "no trace to build a graph from");
  std::vector<RankTimeline> timelines;
  timelines.reserve(traces.size());
  for (const RankTrace& t : traces)
    timelines.push_back(TimelineRecovery(t, options).recover());
  const ClockAlignment clock = align_clocks(traces, timelines);
  const std::vector<int64_t>& offset = clock.offset;
  const int64_t origin = clock.origin;

  // The GPU each trace runs on: its global rank for one trace of a larger job (model mode), else
  // its position.
  const bool partial_job =
      options.mode == TraceMode::kModel && timelines.size() == 1 && options.job_world_size > 1;
  std::vector<RankId> device(timelines.size());
  for (size_t r = 0; r < timelines.size(); ++r)
    device[r] = static_cast<RankId>(r);
  if (partial_job) {
    const int32_t global = traces[0].kineto.distributed.rank;
    if (global < 0 || static_cast<uint32_t>(global) >= options.job_world_size) {
      throw ParseError(traces[0].kineto.file, "distributedInfo.rank " + std::to_string(global) +
                                                  " is not a rank of the job's " +
                                                  std::to_string(options.job_world_size) +
                                                  " (world_size)");
    }
    device[0] = static_cast<RankId>(global);
  }
  const RankCollectives collectives =
      add_cross_rank_collectives(traces, timelines, device, partial_job, options, graph);
  TraceGraphInfo info;
  info.collective_groups = collectives.groups;
  for (size_t r = 0; r < timelines.size(); ++r) {
    const RankDependencies deps = DependencyInference(traces[r], timelines[r], options).infer();
    info.ranks.push_back(RankBuilder(traces[r], timelines[r], deps, options)
                             .emit(graph, collectives.of[r], collectives.ps[r],
                                   collectives.alone[r], origin - offset[r],
                                   partial_job ? device[r] : kNoDevice));
    info.ranks.back().collectives_over_job = collectives.over_job[r];
    info.ranks.back().collectives_world_assumed = collectives.world_assumed[r];
  }
  return info;
}

}  // namespace upsim

// ChromeTraceWriter: the predicted timeline as Chrome Trace Event Format JSON, for Perfetto
// (ui.perfetto.dev) and chrome://tracing.
//
// Contract:
//  - Layout: one process per rank (pid = rank + 1, named by RankInfo::name, sorted by rank). In
//    it one thread track per CPU thread ("CPU thread N") and then one per stream
//    ("stream N: <RankInfo::stream_names[N]>"), sorted in that order. tids are unique across the
//    whole file (tid = pid * stride + track index, stride a power of ten >= 1000), because
//    trace viewers key threads by tid.
//  - Every task becomes one "X" slice on its track, "cat" = task_kind_name(kind), "args" holding
//    the task id, its op and kind-specific details, except:
//      IterationMark -> a process-scoped instant ("ph":"i","s":"p") named "iteration N";
//      CpuOp of phase kMarker that took no time (micro-batch marks such as "forward mb 3")
//                    -> a thread-scoped instant ("ph":"i","s":"t", cat "marker") named by the
//                       task, on its CPU thread;
//      Collective    -> "wait: <group name>" (cat "rendezvous") from the rank's arrival to
//                       on_collective_begin, then "<group name>" from there to its end. For a
//                       pipeline collective (CollectiveDesc::parallel_dim kPipeline,
//                       sim/parallel_dim.h) the wait is the pipeline bubble:
//                       "bubble: <group name>", cat "bubble".
//                       Collectives of a named parallel dimension carry "parallel_dim" ("tp",
//                       "cp", "ep", "pp", "dp") in their args.
//  - Each Launch gets a flow arrow to the GPU task it enqueues: "ph":"s" at the midpoint of the
//    launch slice, "ph":"f","bp":"e" at the GPU task's start, both with "id" = the GPU task id,
//    "cat" and "name" "launch". The midpoint (not the start) keeps the binding unambiguous when
//    slices on a CPU thread touch.
//  - Times are microseconds printed with exactly six decimals from the integer picosecond count
//    (1'500'000 ps -> 1.500000): no floating point, no locale.
//  - Event order: metadata, then events as their callbacks arrive (a slice when its task ends).
//    The output is a function of the callback sequence only: the same sequence gives the same
//    bytes.
//  - Files: events stream to "<path>.tmp" in chunks, so memory is 8 bytes per task plus one
//    chunk; a path ending in ".gz" (or ChromeTraceOptions::gzip) is written gzip-compressed (zlib,
//    which Perfetto and chrome://tracing open as is); finish() (called by on_run_end) closes the
//    JSON and renames the file to `path`. A writer destroyed before finish() removes the .tmp file.
//    Any I/O failure throws std::runtime_error naming `path` (from on_run_begin, any callback, or
//    finish()).
//  - A run that failed (no on_run_end) can still be written by calling finish(): tasks that
//    began and never ended are drawn up to the latest time seen, with "args":{"unfinished":true}.
//  - One writer records one run at a time; on_run_begin starts over. No shared state: writers
//    for different runs are independent.
//  - Rank filter (ChromeTraceOptions::ranks): only the chosen ranks' processes are written
//    (metadata, slices, instants); the events of other ranks are dropped at their callback, before
//    any formatting. A launch flow is written only when both its launch and its GPU task are on
//    drawn ranks. pids and tids stay those of the full trace (pid = rank + 1), the "fabric links"
//    process is unchanged, and "otherData" gains "ranks_drawn" ("0-3,8 of 64"). Without a filter
//    the file is exactly as before.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/observer.h"
#include "sim/time.h"

namespace upsim {

struct ChromeTraceOptions {
  /// Graph ranks whose processes are drawn (any order, duplicates allowed); nullopt: every rank.
  /// With ranks, the link counters are those of the drawn ranks' nodes (LinkInfo::node) and of
  /// the links between nodes.
  /// on_run_begin throws std::invalid_argument for a rank the graph does not have.
  std::optional<std::vector<RankId>> ranks;
  /// Iterations drawn, first and last (1-based: iteration k runs from a rank's k-th iteration
  /// mark to its next, as the run summary counts them); nullopt: every task. A task is drawn
  /// when it begins inside the range on its rank; link counters are not filtered.
  std::optional<std::pair<uint32_t, uint32_t>> iterations;
  /// Link counters decimated to at most about two samples per link per interval (zero: every
  /// rate change). Within the interval after a written sample, changes wait as one pending
  /// sample, written before the next sample after the interval (or at the end), so every
  /// level a link held for an interval or more is shown; shorter spikes may not be.
  Duration link_sample_interval = Duration::zero();
  /// gzip-compressed output; nullopt: when the path ends in ".gz" (a writer whose path is a
  /// staging name, such as "trace.json.gz.tmp", says so here).
  std::optional<bool> gzip;
};

/// "0-3,8,10-11": sorted, distinct ranks with consecutive runs as ranges.
std::string format_rank_list(std::vector<RankId> ranks);

class ChromeTraceWriter final : public Observer {
 public:
  /// Writes to `path` (created or replaced by finish()). Nothing is opened until on_run_begin.
  explicit ChromeTraceWriter(std::filesystem::path path, ChromeTraceOptions options = {});
  ~ChromeTraceWriter() override;
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  const std::filesystem::path& path() const;

  /// Adds `"key":"value"` to the file's "otherData" object (after "generator" and
  /// "format_version", in call order), e.g. the scenario name. Call before finish().
  void add_metadata(std::string key, std::string value);

  void on_run_begin(const TaskGraph& graph) override;
  void on_task_begin(TaskId task, Time at) override;
  void on_task_end(TaskId task, Time at) override;
  void on_collective_begin(CollectiveId collective, Time at) override;
  void on_links_declared(std::span<const LinkInfo> links) override;
  void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) override;
  /// Calls finish().
  void on_run_end(Time at) override;

  /// Completes the JSON and moves it to path(). Idempotent once it has succeeded.
  /// Throws std::logic_error before on_run_begin, std::runtime_error on I/O failure.
  void finish();
  /// True once finish() has written path() for the current run.
  bool finished() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace upsim

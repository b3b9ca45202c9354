// KinetoTraceWriter: the predicted timeline as PyTorch profiler (Kineto) traces, one file per
// rank, in the format torch.profiler writes (libkineto's output_json.cpp), so that Holistic
// Trace Analysis (HTA) reads a run's folder as the trace folder of a training job, and upsim
// reads it back as a trace workload (workloads/trace/kineto_trace.h, trace_replay.h).
//
// Contract:
//  - Files: one per listed rank (KinetoRankFile), nothing else. Each is a JSON object with, in
//    this order, "schemaVersion" 1; "deviceProperties": the rank's GPU from
//    KinetoTraceOptions::devices (id = the rank's GPU, name, totalGlobalMem, numSms,
//    computeMajor / computeMinor when the profile states a compute capability), [] without;
//    "distributedInfo" {"backend": "nccl", "rank": the rank's GPU (TaskGraph::device_of, the
//    global rank collective members name), "world_size": the largest GPU index of any rank or
//    collective member + 1}, on a line of its own with a space after each colon (HTA finds a
//    file's rank with the regular expression `"rank":\s+(\d+)`); "otherData" (generator,
//    format_version, then add_metadata's pairs); "displayTimeUnit" "ms"; "baseTimeNanoseconds"
//    0 (a time is simulated time since the run's start: there is no wall clock); and
//    "traceEvents", one event a line, then "]}".
//  - Processes and threads (what Kineto records on Linux): the host process has pid 1'000'000 +
//    the rank's GPU, CPU thread t has tid pid + t (thread 0 is the main thread, whose tid is the
//    pid); GPU work has pid = the rank's GPU and tid = its CUDA stream id, 7 + the stream's
//    index (the default stream is 7 in CUPTI's numbering); "Stream Sync" records sit on tid
//    stream id + 1'000'000, beside the stream, as Kineto places them. process_name and
//    thread_name metadata events ("ph":"M") name them (RankInfo::name, "stream 7 <name>").
//  - Events per task ("ph":"X" unless said; categories as Kineto writes them):
//      host op (CpuOp kOpBegin .. kOpEnd of one op on a thread; kOpBody alone) -> cat "cpu_op"
//        named by the op, "External id" = its first task id + 1; ops nest as their tasks do;
//      CpuOp kMarker -> cat "user_annotation" (record_function labels);
//      Launch -> cat "cuda_runtime" named by the task (cudaLaunchKernel, cudaMemcpyAsync,
//        cudaLaunchKernelExC, cudaEventRecord, cudaStreamWaitEvent, cudaGraphLaunch), "External
//        id" = its op's, "correlation" = the launch's task id + 1; a collective's launch inside a
//        "record_param_comms" cpu_op of the same span holding the collective's metadata;
//      HostSync -> cat "cuda_runtime" cudaStreamSynchronize (one stream) or
//        cudaDeviceSynchronize (all streams), and for one stream a "cuda_sync" "Stream Sync"
//        record naming it (what Kineto records with enable_cuda_sync_events);
//      a runtime call outside any op is wrapped in a cpu_op named by its task's op;
//      IterationMark of iteration N -> cat "user_annotation" "ProfilerStep#N" on its thread,
//        from the mark to the rank's next mark, the last to the rank's last task end (as the
//        run summary counts iterations, sim/export/run_summary.h);
//      Kernel -> cat "kernel" named by the task; Memcpy -> cat "gpu_memcpy" named by CUPTI's
//        words for its direction ("Memcpy HtoD (Pinned -> Device)", DtoH, DtoD) with "bytes";
//        both with "External id", "queued", "device", "context", "stream", "correlation";
//      Collective -> cat "kernel" named as NCCL >= 2.19 names its kernels
//        ("ncclDevKernel_AllReduce_Sum_u8_RING_LL", "ncclDevKernel_SendRecv" for all-to-all and
//        send / receive) from the rank's arrival to the end (the kernel waits on the GPU for its
//        peers), with the metadata Kineto copies from record_param_comms: "Collective name"
//        (c10d's), "In msg nelems", "Out msg nelems", "Group size", "dtype" "Byte" (a
//        CollectiveDesc states bytes, not an element type: one element per byte, "u8" in the
//        kernel name, so nelems x element size is the bytes exactly), "In split size" / "Out
//        split size" (all-to-all with uneven sizes), "Process Group Name" (the ordinal of the
//        member set among the graph's groups in CollectiveId order), "Process Group
//        Description", "Process Group Ranks" (sorted), "Seq" (the group's ordinal among the
//        collectives of its process group, in CollectiveId order: the same on every member,
//        which is how readers match a collective across ranks), "Src Rank" / "Dst Rank" for a
//        send / receive. Algorithm and protocol in the name (RING_LL) are nominal: an observer
//        does not see the network model's choice;
//      StreamWait -> cat "cuda_sync" "Stream Wait Event" on its stream with "wait_on_stream"
//        and "wait_on_cuda_event_record_corr_id" (its EventRecord's stream and launch);
//      EventRecord -> nothing on the GPU (its cudaEventRecord call is the Launch's event).
//    Each launch that enqueues a kernel, copy or collective gets an "ac2g" flow: "ph":"s" at the
//    call's start on its thread, "ph":"f","bp":"e" at the GPU event's start, "id" = the
//    correlation (a graph launch: to its first GPU task).
//  - Times: "ts" and "dur" in microseconds with exactly six decimals from the integer picosecond
//    counts (sim/export/json_members.h): no floating point, exact to the picosecond.
//  - Determinism: the bytes are a function of the graph, the options and the callback sequence.
//    Host events are written when their op closes, the op before what it encloses, so that
//    readers that nest events of equal span by file order see the op as the parent.
//  - Filters: only the listed ranks get files (events of other ranks are dropped at their
//    callback); KinetoTraceOptions::iterations keeps the tasks that begin inside the range on
//    their rank, as the Chrome trace's filter does (sim/export/chrome_trace_writer.h), and the
//    ProfilerStep markers of those iterations.
//  - Files: each rank's events are buffered and appended to "<path>.tmp" in chunks
//    (sim/export/chunked_file.h: no descriptor held between chunks; memory stays near
//    kKinetoBufferBudget plus 8 bytes per task); a path ending in ".gz" (or
//    KinetoTraceOptions::gzip) is written gzip-compressed, one gzip member per chunk. finish()
//    (called by on_run_end) renames every file to its path. A writer destroyed before finish()
//    removes its .tmp files. I/O failures throw std::runtime_error naming the file.
//  - A run that failed (no on_run_end) can still be written by calling finish(): tasks that
//    began and never ended end at the latest time seen, with "args":{"unfinished":true}.
//  - One writer records one run at a time; on_run_begin starts over.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost_models.h"
#include "sim/observer.h"

namespace upsim {

/// The buffered bytes of all ranks together above which a rank's buffer goes to its file.
inline constexpr size_t kKinetoBufferBudget = size_t{32} << 20;

/// One file: graph rank `rank`'s events go to `path`.
struct KinetoRankFile {
  RankId rank = 0;
  std::filesystem::path path;
};

struct KinetoTraceOptions {
  /// Iterations written, first and last (1-based, as ChromeTraceOptions::iterations); nullopt:
  /// every task.
  std::optional<std::pair<uint32_t, uint32_t>> iterations;
  /// The GPU of each graph rank (index: the graph rank, as ModelSet::devices, which may list
  /// more), or one for every rank; empty: "deviceProperties" is [].
  std::vector<DeviceProfile> devices;
  /// gzip-compressed output; nullopt: per file, when its path ends in ".gz".
  std::optional<bool> gzip;
};

/// "rank_<global rank>.json" (or ".json.gz"): a rank's file name in a trace folder.
std::string kineto_trace_file_name(uint32_t global_rank, bool gzip);

class KinetoTraceWriter final : public Observer {
 public:
  /// Writes each listed rank's file. Nothing is opened until on_run_begin, which throws
  /// std::invalid_argument for a rank the graph does not have, a rank listed twice, or a device
  /// list of more than one profile and fewer than the graph's ranks.
  explicit KinetoTraceWriter(std::vector<KinetoRankFile> files, KinetoTraceOptions options = {});
  ~KinetoTraceWriter() override;
  KinetoTraceWriter(const KinetoTraceWriter&) = delete;
  KinetoTraceWriter& operator=(const KinetoTraceWriter&) = delete;

  /// Adds `"key":"value"` to every file's "otherData" (after "generator" and "format_version",
  /// in call order). Call before on_run_begin.
  void add_metadata(std::string key, std::string value);

  void on_run_begin(const TaskGraph& graph) override;
  void on_task_begin(TaskId task, Time at) override;
  void on_task_end(TaskId task, Time at) override;
  /// Calls finish().
  void on_run_end(Time at) override;

  /// Completes every file and moves it to its path. Idempotent once it has succeeded.
  /// Throws std::logic_error before on_run_begin, std::runtime_error on I/O failure.
  void finish();
  bool finished() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace upsim

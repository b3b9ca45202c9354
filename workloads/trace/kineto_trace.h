// PyTorch Kineto traces (the Chrome-trace JSON that torch.profiler writes) as an in-memory event
// model.
//
// What is read (everything else is skipped, validated as JSON but not interpreted):
//  - traceEvents with ph "X" of the categories in KinetoCategory (cpu_op, user_annotation,
//    cuda_runtime, cuda_driver, kernel, gpu_memcpy, gpu_memset, cuda_sync, python_function);
//    their args "External id", "correlation", "Record function id", "Ev Idx", "stream",
//    "device", "bytes", and for cpu ops, annotations and cuda_sync events the whole args object
//    kept as raw text (input dims and types, collective metadata, wait_on_stream) for readers
//    that need it;
//  - flow events of category ac2g (launch -> GPU work), kept to link GPU work whose args carry no
//    correlation id;
//  - deviceProperties (GPU name, memory, SM count), distributedInfo (backend, rank, world size).
//
// Contract:
//  - Times are integer picoseconds relative to `base_us` (the first timestamp of the file, in
//    whole microseconds of the trace's clock): ts = (trace ts - base_us) * 1e6 ps. Fractional
//    microseconds in the file are kept to the picosecond; epoch-sized timestamps stay exact.
//  - `events` are in file order; `names[e.name]` is the event's name (names are interned).
//  - GPU events have device = args.device (or pid) and stream = args.stream (or tid); host events
//    have numeric pid/tid. Events whose pid or tid is not a number (profiler spans) are dropped.
//  - A file that is not a Kineto trace (no traceEvents array), malformed JSON or a truncated file
//    throws ParseError naming the file, line and column.
//  - Durations: a read event with a negative `dur` throws ParseError naming the file, line, column,
//    category and event name: no profiler clock writes one, so the file is corrupt or edited, and
//    clamping it to 0 would replay the event as taking no time. A `dur` of 0 is read as it is and
//    counted per category in `zero_duration` (whole-microsecond Kineto clocks write anything
//    shorter than 1 us as 0: the DLRM traces of test/data/param-et-replay hold 130-260 such cpu
//    ops and runtime calls per rank, the ResNet trace 89 memsets and 22 copies); the trace set's
//    readers report the GPU work among them (trace_replay.h). A ts + dur beyond the int64
//    picosecond range is an error, as for `ts`.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace upsim {

enum class KinetoCategory : uint8_t {
  kCpuOp,           ///< "cpu_op" (older: "Operator"): an ATen op or record_function range
  kUserAnnotation,  ///< "user_annotation": record_function labels, ProfilerStep#N
  kCudaRuntime,     ///< "cuda_runtime" (older: "Runtime"): cudaLaunchKernel, cudaMemcpyAsync ...
  kCudaDriver,      ///< "cuda_driver": cuLaunchKernel ...
  kKernel,          ///< "kernel" (older: "Kernel")
  kGpuMemcpy,       ///< "gpu_memcpy" (older: "Memcpy")
  kGpuMemset,       ///< "gpu_memset" (older: "Memset")
  kCudaSync,        ///< "cuda_sync": stream/event waits recorded by newer Kineto versions
  kPythonFunction,  ///< "python_function" (with_stack=True)
};
inline constexpr size_t kKinetoCategoryCount = 9;
std::string_view kineto_category_name(KinetoCategory category);

constexpr bool is_gpu_category(KinetoCategory c) {
  return c == KinetoCategory::kKernel || c == KinetoCategory::kGpuMemcpy ||
         c == KinetoCategory::kGpuMemset;
}
constexpr bool is_host_category(KinetoCategory c) {
  return !is_gpu_category(c) && c != KinetoCategory::kCudaSync;
}

struct KinetoEvent {
  int64_t ts_ps = 0;   ///< start, relative to KinetoTrace::base_us
  int64_t dur_ps = 0;  ///< >= 0 (a negative `dur` is an error)
  int64_t pid = -1;
  int64_t tid = -1;
  int64_t external_id = -1;
  int64_t correlation = -1;
  int64_t record_function_id = -1;  ///< "Record function id" (PyTorch >= 2.1), links to ET rf_id
  int64_t ev_idx = -1;
  int64_t stream = -1;         ///< GPU events (and cuda_sync): CUDA stream id
  int64_t bytes = -1;          ///< memcpy / memset: bytes moved
  int32_t device = -1;         ///< GPU events: device index
  uint32_t name = 0;           ///< index into KinetoTrace::names
  uint32_t args = UINT32_MAX;  ///< index into KinetoTrace::raw_args, or UINT32_MAX
  KinetoCategory category = KinetoCategory::kCpuOp;

  int64_t end_ps() const { return ts_ps + dur_ps; }
};

/// One end of an ac2g flow arrow: "s" at the runtime call, "f" at the GPU work it launched.
struct KinetoFlow {
  int64_t id = 0;
  int64_t ts_ps = 0;
  int64_t pid = -1;
  int64_t tid = -1;
  bool start = false;
};

struct KinetoDevice {
  int32_t id = 0;
  std::string name;
  int64_t total_memory_bytes = 0;
  int32_t sm_count = 0;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
};

struct KinetoDistributedInfo {
  bool present = false;
  std::string backend;
  int32_t rank = -1;
  int32_t world_size = -1;
};

struct KinetoTrace {
  std::string file;  ///< as given to the reader, for messages
  int64_t base_us = 0;
  std::vector<KinetoEvent> events;
  std::vector<KinetoFlow> flows;
  std::deque<std::string> names;
  /// Raw JSON text of the args objects of cpu ops, user annotations and cuda_sync events (parse
  /// with JsonCursor): args_of() slices it.
  std::string args_arena;
  struct ArgsSpan {
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  std::vector<ArgsSpan> raw_args;
  std::vector<KinetoDevice> devices;
  KinetoDistributedInfo distributed;
  std::string trace_name;
  /// Read events whose `dur` is 0, by category (index: the KinetoCategory value).
  std::array<uint64_t, kKinetoCategoryCount> zero_duration{};

  std::string_view name_of(const KinetoEvent& e) const { return names[e.name]; }
  /// The raw args text of `e`, or "" when none was kept.
  std::string_view args_of(const KinetoEvent& e) const {
    if (e.args == UINT32_MAX) return {};
    return std::string_view(args_arena).substr(raw_args[e.args].offset, raw_args[e.args].size);
  }
};

/// Parses a Kineto trace held in memory; `file` names it in errors.
KinetoTrace parse_kineto_trace(std::string_view text, const std::string& file);
/// Reads `path` (.json or .json.gz).
KinetoTrace read_kineto_trace(const std::filesystem::path& path);

/// The process that recorded most cpu_op events (the training process); -1 if there is none.
int64_t kineto_process_id(const KinetoTrace& kineto);

/// The dimensions and element type names of a cpu op's inputs ("Input Dims", "Input type"), read
/// from its raw args; empty when the trace was recorded without record_shapes.
struct KinetoOpInputs {
  std::vector<std::vector<int64_t>> dims;
  std::vector<std::string> types;
};
KinetoOpInputs kineto_op_inputs(const KinetoTrace& trace, const KinetoEvent& event);

}  // namespace upsim

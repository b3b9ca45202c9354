// The workload seam (ARCHITECTURE.md "Workloads"): one interface every model family implements, and
// the value types it hands back to the composition root. tools/ looks a workload up by the
// scenario's `workload.model` in the registry (workloads/workload_registry.h) and never branches
// on which family it got.
//
// Life of a workload in `upsim run`:
//  1. the registry's factory parses and validates the `workload:` section (ConfigError naming
//     the key for any bad value; a trace workload also reads its files here);
//  2. tools/ reads the platform: GPU count (platform.gpus, else implied_gpus(), else the
//     fabric's), hardware profile, models (the host model from host_overheads() when the
//     workload measured its own); `simulation:` when simulates_iterations();
//  3. prepare() reads the workload keys whose check needs the platform (DLRM: the global batch
//     against the GPU count); then tools/ rejects any key nobody asked for;
//  4. build() adds the ranks and tasks of the whole run to the graph (not sealed) and reports
//     what it built: the summary's description lines, the iterations the summary measures, the
//     per-GPU memory footprint, warnings;
//  5. tools/ checks the footprint against the GPU's memory (platform.memory_check), seals the
//     graph and prints the description.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/cost_models.h"
#include "sim/task_graph.h"
#include "sim/time.h"

namespace upsim {

/// What the scenario decided about the platform, as a workload needs it.
struct WorkloadPlatform {
  /// GPUs of the run (platform.gpus, implied_gpus() or the fabric's count).
  uint32_t gpus = 1;
  /// The GPU every rank runs on.
  DeviceProfile device;
  /// The node (server) of each GPU of the run, numbered from 0 in order of first appearance;
  /// empty when the platform has no fabric (then nothing says where nodes end).
  std::vector<uint32_t> node_of_gpu;
  /// Share of each GPU's memory that a workload may plan embedding tables into
  /// (platform.table_memory_fraction; Lin et al., TPDS 2024).
  double table_memory_fraction = 0.8;
  /// `simulation:` (only for workloads that simulates_iterations()).
  uint32_t iterations = 3;
  uint32_t warmup_iterations = 1;
};

/// Per-GPU memory of one rank, by part, in bytes (the summary prints it; tools/ checks it
/// against the GPU's capacity).
struct MemoryFootprint {
  struct Part {
    std::string name;  ///< "weights", "gradients", "optimizer state", "activations", "buffers", ...
    int64_t bytes = 0;
  };
  /// The graph rank (or GPU) the footprint is of: the most loaded one.
  std::string owner;
  std::vector<Part> parts;

  /// The part a caching allocator reserves above what it allocates (transformer_memory.h): given
  /// back when an allocation fails, so it counts against the GPU's memory only as a warning.
  static constexpr std::string_view kAllocatorReserve = "allocator reserve";

  int64_t total_bytes() const {
    int64_t t = 0;
    for (const Part& p : parts)
      t += p.bytes;
    return t;
  }
  /// total_bytes() less the allocator's reserve: what the step allocates at its peak.
  int64_t allocated_bytes() const {
    int64_t t = 0;
    for (const Part& p : parts)
      if (p.name != kAllocatorReserve) t += p.bytes;
    return t;
  }
};

/// Graph ranks that make a representative Chrome trace of a large run, and why ("one rank per
/// pipeline stage ..."). tools/ draws only these when the graph is too large to open whole.
struct TraceRankSuggestion {
  std::vector<RankId> ranks;  ///< graph rank ids, ascending
  std::string reason;         ///< one line, no trailing newline
};

/// What a workload read from measurements says about them, so that tools/ can tell whether the
/// prediction may be compared with them as an error (the platform is the measured one), only as
/// a what-if change, or not at all (ScenarioComparison in tools/scenario.h).
struct MeasuredRun {
  /// The GPU names the measurements recorded (Kineto deviceProperties), distinct, in rank order;
  /// empty when they record none (Chakra traces).
  std::vector<std::string> gpus;
  /// Whether the platform's GPU, kernel or interconnect models price any work (trace mode:
  /// model); false: every GPU task keeps its measured duration.
  bool prices_gpu_work = false;
  /// Whether platform.host's model prices host work (trace host: platform); false: host time is
  /// the measured timeline or the measurements' own T1-T5.
  bool prices_host = false;
  /// Non-empty: why the measured times are not iteration times (one clause, no trailing period);
  /// then no error or change is printed.
  std::string not_an_iteration;
};

/// What a workload built, for the summary and the run.
/// What one iteration processes, for the throughput and utilisation metrics the tools print.
struct IterationWork {
  /// What `units` counts: "tokens" (transformers) or "samples" (DLRM).
  std::string unit;
  /// Units of one iteration over all GPUs (the global batch's tokens or samples).
  double units = 0.0;
  /// Model FLOPs of one iteration over all GPUs, as the framework counts them for its reported
  /// TFLOP/s (transformers: model_flops.h); 0 = not counted for this workload.
  double model_flops = 0.0;
  /// The dtype whose dense peak the utilisations (MFU, HFU) are relative to.
  DType peak_dtype = DType::kBf16;
};

struct WorkloadBuild {
  /// Summary lines after the platform line ("workload: ..."), without trailing newlines.
  std::vector<std::string> description;
  /// Shown as "warning: ..." lines (e.g. a trace's mismatched execution trace).
  std::vector<std::string> warnings;
  /// Iterations in the graph, the leading ones left out of the reported mean, and how many are
  /// measured after them (nullopt: all that follow).
  uint32_t iterations = 1;
  uint32_t warmup_iterations = 0;
  std::optional<uint32_t> measured_iterations;
  /// Workloads read from measurements: each graph rank's measured time of the measured
  /// iterations (mean); empty for generated workloads.
  std::vector<Duration> measured_iteration;
  /// With measured_iteration, when more than one iteration is measured: each measured
  /// iteration's label ("ProfilerStep#10") and each rank's measured time of it
  /// (measured_step_times[rank][step]; zero where the rank's trace lacks the step), in order.
  std::vector<std::string> measured_step_labels;
  std::vector<std::vector<Duration>> measured_step_times;
  /// With measured_iteration: what was measured, and on what.
  MeasuredRun measured_run;
  /// The largest per-GPU footprint; nullopt when the workload does not model memory.
  std::optional<MemoryFootprint> memory;
  /// GPUs the graph stands for: more than its ranks when symmetric ranks are mirrored rather
  /// than simulated (CollectiveDesc::simulated_members). 0 = the graph's rank count.
  uint32_t represented_gpus = 0;
  /// The ranks a trace of a large run should show; nullopt: no suggestion (every rank is drawn).
  std::optional<TraceRankSuggestion> trace_ranks;
  /// 1, or P when iterations differ by design and repeat every P: 2 for torchtitan's per-op
  /// checkpointing, which alternates what it saves (op_recompute.h); a DLRM 2D parallel run's
  /// sync interval (two_d_parallel.h). The steady-state check then compares the last P
  /// iterations with the P before them, and the search measures one whole period
  /// (tools/steady_state.h).
  uint32_t iteration_period = 1;
  /// One iteration's work for throughput and utilisation; nullopt: not defined (traces).
  std::optional<IterationWork> work;
};

class Workload {
 public:
  virtual ~Workload() = default;

  /// The GPU count the workload itself fixes (a trace set: one per rank), or nullopt: the
  /// platform decides (platform.gpus, else the fabric's GPU count).
  virtual std::optional<uint32_t> implied_gpus() const { return std::nullopt; }

  /// Why implied_gpus() fixes the count, for the error when platform.gpus disagrees ("the
  /// traces in DIR have 8 ranks, one per GPU").
  virtual std::string implied_gpus_reason() const { return "the workload fixes the GPU count"; }

  /// Whether the scenario's `simulation:` section (iterations, warmup_iterations) applies;
  /// workloads that replay recorded iterations choose their own and refuse the section.
  /// Generated workloads (true) also plan memory: platform.table_memory_fraction and
  /// platform.memory_check are read for them only.
  virtual bool simulates_iterations() const { return true; }

  /// The host overheads T1-T5 the workload measured itself (a trace set with `host: modelled`),
  /// which tools/ then prices host work with instead of platform.host's model; nullopt: the
  /// platform's host model.
  virtual std::optional<HostOverheads> host_overheads() const { return std::nullopt; }

  /// Peak memory a simulation of this workload needs per task of its graph, graph and executor
  /// state together; the composition root sizes the task limit with it (the machine's memory over
  /// this).
  /// Default: 128 B, twice the 65 B measured on a generated transformer graph at 16 M tasks;
  /// a workload that measured its own peak states it.
  virtual size_t peak_bytes_per_task() const { return 128; }

  /// Reads the workload keys whose check needs the platform (ConfigError at the key). Called
  /// once, before the scenario is checked for unknown keys and before build(). Default: nothing.
  virtual void prepare(const WorkloadPlatform& platform) { (void)platform; }

  /// Adds the whole run to `graph` (ranks, tasks; not sealed). Throws ConfigError at the
  /// workload's keys when the platform cannot run it (too few GPUs, tables that do not fit).
  virtual WorkloadBuild build(const WorkloadPlatform& platform, TaskGraph& graph) = 0;
};

}  // namespace upsim

// A scenario file -> everything one run needs: the sealed task graph and the models, built from
// the scenario's sections. This is the composition root's wiring; it owns what it builds.
//
// Scenario schema (configs/dlrm_4gpu.yaml is the reference example):
//   name: dlrm_4gpu                 # optional; default: the file's stem
//   description: "..."              # optional, printed in the summary
//   platform:
//     gpus: 4                       # ranks, one per GPU
//     gpu: hardware/a100_sxm4_40gb.yaml   # hardware profile (path relative to this file)
//     table_memory_fraction: 0.8    # share of HBM embedding tables may use (Lin et al., TPDS 2024)
//     memory_check: error           # a per-GPU memory footprint above the GPU's memory: error
//                                   #   (default) or warn (a warning line). These two keys are
//                                   #   for workloads that simulate iterations only.
//     kernels: {model: roofline}                    # calibration/model_registry.h
//     host: {model: host_overheads, overheads: host/v100_pytorch_kineto.yaml}
//     interconnect: {model: alpha_beta, link: nvlink3}
//     # or, over a fabric: the flow-level network with NCCL-like collective algorithms
//     topology: topologies/a100x4_nvlink.yaml     # topology/fabric_loader.h; rank r -> GPU r
//     interconnect: {model: flow, tuning: collectives/nccl_like.yaml}   # tuning optional
//     partial_fabric: false         # with a topology: true runs on its first `gpus` GPUs
//   kernels, host and interconnect are required, except that a trace workload may leave out
//   those its replay prices nothing with (replay mode: kernels and interconnect; host: measured
//   or host overheads from the traces: host); the platform line then says "none (replayed)",
//   and a scenario that would price work with a section it left out is refused, naming it.
//   Keys that change nothing are warned about by name (ConfigDocument::unused_key_warnings):
//   the fabric's link capacities under an interconnect model other than `flow`, profile and
//   calibration values the kernel or collective model does not read once --set changes them
//   (model_registry.h), the platform's models and the GPU's facts when a trace workload replays
//   what they would price, and a --set pcie_generation that no PCIe link at the GPUs follows
//   (the GPU's PCIe rate caps those links, topology/fabric_loader.h).
//   With a topology, `gpus` defaults to the fabric's GPU count and may not exceed it; fewer
//   GPUs than the fabric has is an error unless partial_fabric is true (a run on part of a
//   fabric crosses fewer links; the summary's platform line then says so).
//   workload:                       # `model` names a family in workloads/workload_registry.h;
//     model: dlrm                   #   its other keys are the family's schema, in its header:
//     ...                           #   dlrm: workloads/dlrm/dlrm_config.h; trace (replay or
//                                   #   re-cost measured PyTorch traces; gpus = their ranks):
//                                   #   workloads/trace/trace_workload.h
//   simulation:                     # only for workloads that simulate iterations (not trace)
//     iterations: 3                 # optional: training steps simulated, exactly
//     warmup_iterations: 1          # leading steps left out of the reported mean (only with
//                                   #   iterations; default 1, 0 when iterations is 1)
//   Default (no `iterations`): steady state. upsim simulates 2 iterations, then 4, 8, 16, 32
//   (each a fresh run of a graph with that many iterations) until the last two agree within
//   0.1% on every rank and the ranks that share collectives agree within 0.1%
//   (tools/steady_state.h); all iterations before the last two are warm-up, and the summary
//   says "steady state after N iterations (warm-up N - 2)". At 32 without convergence it
//   reports the last two and warns with the difference seen. With `iterations` the run is
//   that long, and a warning says so when its measured iterations are not in steady state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/executor.h"
#include "sim/network_model.h"
#include "sim/task_graph.h"
#include "topology/fabric.h"
#include "workloads/workload_registry.h"

namespace upsim::cli {

/// The memory model's largest held-out underestimate, as a fraction: the most negative error of
/// `upsim validate memory`'s bounded rows (hf-bert-large, fp16 AMP batch 4: -8.45%;
/// MemoryValidation.TheLargestUnderestimateIsTheMarginRunsWarnWith keeps the two equal). A
/// footprint within it of the GPU's memory warns of cudaMalloc retries (build_scenario).
inline constexpr double kMemoryModelLargestUnderestimate = 0.0845;

struct ScenarioModels {
  /// The platform's fabric when the scenario names a topology (the flow network refers to it).
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<KernelCostModel> kernels;
  std::unique_ptr<CpuCostModel> cpu;
  std::unique_ptr<CollectiveCostModel> collectives;
  std::unique_ptr<NetworkModel> network;
  /// Points into the members above (heap objects, so moving ScenarioModels keeps it valid).
  ModelSet set;
};

/// How the summary sets a trace workload's measured times against the prediction.
///  - kError: the platform is the measured one: "error" = predicted / measured - 1, an accuracy.
///  - kWhatIf: the platform differs from the measured one (`reason` says how): the same ratio is
///    printed as a "change" under a "what-if:" line, never as an error.
///  - kNone: the measured times are not iteration times (`reason` says why): no ratio printed.
/// The measured platform: the GPU the traces recorded (Kineto deviceProperties; a match is
/// gpu_names_match, or the recorded name is listed in platform.gpu_recorded_as, the names the
/// scenario says platform.gpu's profile stands for), else, when they record none, platform.gpu
/// as the scenario file declares it; every other platform key as the scenario file declares it
/// (so any `--set platform...` but gpu_recorded_as is a what-if); host time measured or from the
/// traces' own T1-T5 (host: platform prices it with another host's model: a what-if).
struct MeasuredComparison {
  enum class Kind : uint8_t { kError, kWhatIf, kNone };
  Kind kind = Kind::kError;
  std::string reason;  ///< one clause, no trailing period; empty for kError
};

/// Whether the GPU name a trace recorded (CUDA's device name: "Tesla V100-SXM2-32GB", "NVIDIA
/// GeForce RTX 2080 Ti") names the GPU of the hardware profile `profile_name` ("V100-SXM2-32GB",
/// "RTX-2080-Ti"): lower-cased, split at every character that is not a letter or digit, the
/// brand words nvidia, tesla, geforce and quadro dropped, one set of words holds the other.
/// Conservative: an unrecognised spelling ("NVIDIA H100 80GB HBM3" vs "H100-SXM5-80GB") does not
/// match, which makes the comparison a what-if rather than a claimed accuracy.
bool gpu_names_match(std::string_view recorded, std::string_view profile_name);

/// What each key the composition root reads itself means, one line each (sim/config/
/// key_meaning.h): the scenario's top level, platform and simulation keys above.
std::span<const KeyMeaning> scenario_key_meanings();

/// What the scenario runs on, as machine-readable results state it (summary.json).
struct ScenarioPlatform {
  uint32_t gpus = 0;  ///< GPUs of the run (the graph may simulate fewer: represented)
  std::string gpu;    ///< the hardware profile's name ("A100-SXM4-40GB")
  int64_t gpu_memory_bytes = 0;
  std::string kernel_model;  ///< platform.kernels.model
  std::string host_model;    ///< platform.host.model
  std::string interconnect;  ///< platform.interconnect.model, with the fabric's name for flow
  std::string fabric;        ///< the fabric's name; empty without platform.topology
};

struct Scenario {
  std::string name;
  /// The scenario's own `description:` (as written; empty when it has none).
  std::string description_text;
  ScenarioPlatform platform;
  /// The workload's largest per-GPU footprint (WorkloadBuild::memory); nullopt when it does
  /// not model memory.
  std::optional<MemoryFootprint> memory;
  /// One iteration's work (WorkloadBuild::work); nullopt: no throughput metrics.
  std::optional<IterationWork> work;
  /// With `work`: the arithmetic of every kernel of the graph, all ranks and iterations (each
  /// kernel's from its shape, roofline_work); counted once when the graph is built.
  double kernel_flops = 0.0;
  /// What is simulated, in a few lines for the summary (platform, workload, placement), then
  /// one "warning: ..." line per warning (summary.txt keeps both).
  std::string description;
  /// The description without its warning lines (the console prints warnings on stderr).
  std::string header;
  TaskGraph graph;  ///< sealed
  ScenarioModels models;
  uint32_t iterations = 0;
  uint32_t warmup_iterations = 0;
  /// The workload simulates iterations (Workload::simulates_iterations; not a measured trace).
  bool simulates_iterations = false;
  /// `simulation.iterations` was not given: `iterations` is the chosen count of this attempt of
  /// the steady-state search (tools/steady_state.h), which may build the scenario again.
  bool iterations_chosen = false;
  /// Iterations the summary measures after the warm-up (nullopt: all that follow).
  std::optional<uint32_t> measured_iterations;
  /// Trace workloads: each rank's measured time of the measured iterations (mean); empty
  /// for generated workloads.
  std::vector<Duration> measured_iteration;
  /// Trace workloads measuring several iterations: per step its label and each rank's measured
  /// time (WorkloadBuild::measured_step_labels / measured_step_times).
  std::vector<std::string> measured_step_labels;
  std::vector<std::vector<Duration>> measured_step_times;
  /// Trace workloads: whether and how measured_iteration may be compared with the prediction.
  MeasuredComparison comparison;
  /// GPUs the graph stands for (WorkloadBuild::represented_gpus; never 0 here).
  uint32_t represented_gpus = 0;
  /// The workload's warnings, the memory check's, borrowed calibrations and keys that change
  /// nothing (also in `description`, as "warning: ...").
  std::vector<std::string> warnings;
  /// The ranks the workload suggests for the Chrome trace of a large run (WorkloadBuild).
  std::optional<TraceRankSuggestion> trace_ranks;
  /// WorkloadBuild::iteration_period: 1, or 2 when iterations alternate by design.
  uint32_t iteration_period = 1;
};

/// The scenario needs more memory than this process may use (its task graph would pass
/// machine_task_limit(), or building it ran out of memory): a ConfigError at `workload` like any
/// other, which callers that run many scenarios can tell apart (`upsim validate workloads` lists
/// such rows as skipped, with the reason, rather than as failed).
class MachineLimitError : public ConfigError {
 public:
  explicit MachineLimitError(const ConfigError& error) : ConfigError(error) {}
};

/// A MachineLimitError of a run that had only a share of the process's memory
/// (ScenarioLimits::memory_shares > 1, parallel jobs): alone it may fit. Callers that run jobs in
/// parallel run it again alone (tools/memory_shared_jobs.h).
class SharedMemoryLimitError : public MachineLimitError {
 public:
  using MachineLimitError::MachineLimitError;
};

/// What one run may use of the machine.
struct ScenarioLimits {
  /// The most tasks the graph may hold; 0: machine_task_limit() at the workload's bytes a task.
  size_t max_tasks = 0;
  /// Runs that share that limit at once (parallel jobs in one process): the graph may hold
  /// 1 / memory_shares of it, and a graph past its share throws SharedMemoryLimitError.
  size_t memory_shares = 1;
  /// Stop once every key has been read and checked (ConfigDocument::check_all_keys_used),
  /// before the workload builds its graph: the returned Scenario has its models and header
  /// only (`upsim schema` reads the document's keys this way).
  bool keys_only = false;
};

/// The tasks this process's memory holds at `bytes_per_task` (a workload's
/// Workload::peak_bytes_per_task): the least of physical memory, RLIMIT_AS / RLIMIT_DATA and the
/// cgroup limit (tools/memory_limit.h), over that.
size_t machine_task_limit(size_t bytes_per_task);

/// Iterations of the first attempt of the steady-state search (tools/steady_state.h).
inline constexpr uint32_t kFirstChosenIterations = 2;

/// What the steady-state search chooses for a scenario without `simulation.iterations`: the
/// iterations of this attempt (at least 2) and how many of the last ones the summary measures
/// (2, or the workload's iteration period when that is longer: a whole period; at most
/// `iterations`); the rest are warm-up.
struct ChosenIterations {
  uint32_t iterations = kFirstChosenIterations;
  uint32_t measured = 2;
  // Implicit: a bare count measures the last two.
  constexpr ChosenIterations(uint32_t count = kFirstChosenIterations, uint32_t last = 2)  // NOLINT
      : iterations(count), measured(last) {}
};

/// Reads the whole document (overrides must already be applied), checks that every key was
/// understood, and builds the graph and models. The workload is looked up in `workloads`
/// (default_workload_registry() for the first form). A workload that simulates iterations
/// without `simulation.iterations` gets `chosen.iterations`, of which the last
/// `chosen.measured` are measured. Throws ConfigError for any bad value, and at `workload` when its
/// graph would exceed limits.max_tasks. Building again from the same document gives the same
/// scenario (run_to_steady_state does so with more iterations). The scenario file with its --set
/// overrides applied in order (ConfigDocument::apply_override).
ConfigDocument load_scenario(const std::filesystem::path& file,
                             std::span<const std::string> overrides);

Scenario build_scenario(ConfigDocument& doc, ChosenIterations chosen = {});
Scenario build_scenario(ConfigDocument& doc, const WorkloadRegistry& workloads,
                        ChosenIterations chosen = {}, const ScenarioLimits& limits = {});

}  // namespace upsim::cli

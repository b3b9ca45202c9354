// `upsim plan`'s search: which parallel layout trains a transformer scenario fastest, by
// simulation (Calculon searches layouts analytically; this searches them event by event, with
// the contention, host overheads and pipeline schedules of `upsim run`).
//
// Contract:
//  - The space (Megatron-Core's layout knobs): tensor parallel t in {1, 2, 4, 8} within one node
//    of the fabric (the GPUs of its first node; 8 without a fabric) dividing the GPUs, the heads
//    and the key/value heads, with sequence parallel whenever t > 1 (unless the scenario states
//    parallelism.sequence: then as it says; LayoutPlan::sequence_parallel); pipeline stages p
//    dividing the layers, or else, for a decoder-only model, dividing them with the embedding
//    and the loss each counted as a layer (Megatron-Core's account_for_embedding / _loss_in_
//    pipeline_split, "E+L" in the label; pipeline_split.h), where a scenario that states a
//    pipeline layout or first / last stage layers keeps its own pipeline and virtual stages
//    (an encoder-decoder model's: each split of its stacks, the first es
//    stages the encoder's, that divides both stacks' layers, parallelism.encoder_stages, "ES"
//    in the label; no interleaving); context parallel c in {1, the scenario's} and those of
//    {2, 4, 8, 16} that leave each rank at least 4096 tokens (so from 8K tokens on) where 2c
//    divides the sequence
//    (NeMo's Llama 3 recipes: 4K to 16K tokens per rank); data parallel d = GPUs / (t x p x c),
//    which must be whole; expert parallel e = 1 for a dense model, else the powers of two that
//    divide the experts and d x c (t x d x c when a scenario under tensor parallel states
//    parallelism.expert_tensor 1), and the scenario's; virtual stages v in {1} and those from 2
//    to 10 where p x v divides the (counted) layers when p > 1 and the micro-batches divide by p
//    (Megatron's interleaved schedule); micro-batch sizes the powers of two up to twice the
//    scenario's (at least 4) that divide the global batch per data-parallel rank.
//  - Framework options: the PlanOptions::refine fastest simulated layouts (the scenario's own
//    among them) are each tried again with the options their keys leave open: the
//    data-parallel sharding (with memory savers allowed, where the layout replicates its state
//    over data x context > 1 ranks: Megatron-Core's distributed optimizer, zero 1 with
//    overlap_param_gather where the gradients overlap; FSDP full_shard (zero 3's sharding),
//    under pipeline parallel with FSDP2's gradient sync on the last micro-batch as
//    torch.distributed.pipelining sets it; under FSDP with torchao's tensorwise float8, its
//    float8 weight all-gather), and Transformer Engine's TP communication overlap
//    (tp_comm_overlap, where the layout has sequence parallel without it; with layer_kernels
//    torchtitan, compile and no per-op recomputation, torchtitan's async TP instead), and for
//    Megatron-Core MoE layers over expert parallel with the all-to-all dispatcher at tensor 1,
//    its flex dispatcher on DeepEP ("deepep", where DeepEP's tables have the group size), and
//    for Megatron-Core MoE layers over expert parallel with either dispatcher, its EP all-to-all
//    overlap ("ep a2a overlap", moe.a2a_overlap with moe.delay_wgrad as Megatron-Bridge's
//    moe_a2a_overlap sets them: one stage or virtual stages, no full
//    recomputation, no shared-expert overlap, no CUDA graphs, no MTP layers); each alone and
//    with each other.
//    A variant is checked for validity and memory as a layout is, is named after its layout
//    ("... with tp overlap + fsdp"; FSDP takes the place of a zero 1 memory saver, which its
//    label then drops), and is simulated outside
//    --max-simulations; the rest of the scenario's options stay as they are.
//  - Memory savers (unless PlanOptions::memory_savers is false): a layout whose memory estimate
//    exceeds the GPU's memory with the scenario's
//    own ZeRO and recompute settings is tried with the first of these that fits, in order of
//    cost: Megatron's distributed optimizer (zero: 1, when the scenario has zero 0 and no FSDP),
//    then with it selective recompute (Megatron-Core's core_attn; when the scenario has recompute:
//    none), then full recompute (unless the scenario's is full or op). Recompute only adds
//    work, so a layout that fits
//    without it is not tried with it; the savers a layout needed are part of its label.
//  - Each layout is the scenario with these keys set. One that the workload refuses (its config
//    error) is left out with the reason; one whose memory estimate (transformer_memory.h) exceeds
//    the GPU's memory is refused before anything is simulated.
//  - A lower bound prunes: the iteration cannot beat the model FLOPs per GPU at the GPU's dense
//    peak, stretched by the ideal pipeline bubble, (1 + (p - 1) / (v m)) for m micro-batches,
//    and under full recompute by 4 / 3 (one more forward: a third of a step's FLOPs).
//    Layouts are simulated best bound first in fixed batches of PlanOptions::batch (kPlanBatch
//    unless set; so the set simulated and the ranking do not depend on --jobs or the MPI ranks);
//    a layout whose bound is not below the best simulated time so far is pruned. The scenario's
//    own layout is always simulated.
//  - Each layout of a batch is a job (layout_job: its keys), simulated by simulate_layout_job
//    into the text of format_layout_result (tools/layout_records.h), on PlanOptions::jobs
//    threads or by PlanOptions::run_jobs (under mpirun, on every rank: tools/mpi_jobs.h); the
//    ranking is the same wherever a layout ran.
//  - Each simulated layout runs to steady state as `upsim run` does; the ranking is by predicted
//    iteration time, ties by label. With PlanOptions::records_dir each layout's results are
//    kept there as they finish; with resume, a layout whose record matches its inputs now (the
//    same upsim version and scenario content) takes the record's results instead of running
//    (the scenario's own layout always runs), so an interrupted plan goes on where it stopped
//    and gives the ranking it would have given.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/time.h"

namespace upsim::cli {

/// Layouts simulated together by default; fixed, so that pruning does not depend on --jobs.
inline constexpr size_t kPlanBatch = 4;

/// Runs a batch's layout jobs and calls done(index, result) on this thread for each.
using RunLayoutJobs =
    std::function<void(const std::vector<std::string>& jobs,
                       const std::function<void(size_t index, const std::string& result)>& done)>;

struct PlanOptions {
  std::string scenario;
  std::vector<std::string> overrides;  ///< --set, applied before each layout's keys
  /// The GPU count to lay out (0: the scenario's).
  uint32_t gpus = 0;
  int jobs = 1;
  /// The fastest layouts tried with the framework options (see the contract); 0: none.
  size_t refine = 3;
  /// Layouts simulated between two pruning decisions.
  size_t batch = kPlanBatch;
  /// Runs each batch's jobs (each through simulate_layout_job); empty: on `jobs` threads here.
  RunLayoutJobs run_jobs;
  /// The most layouts simulated (the scenario's own included).
  int max_simulations = 64;
  /// Where each simulated layout's record is kept (tools/layout_records.h); empty: nowhere.
  std::filesystem::path records_dir;
  /// Take a layout's results from its record in records_dir when its inputs are unchanged.
  bool resume = false;
  /// Try the memory savers on layouts that do not fit (false: the scenario's ZeRO and recompute
  /// settings for every layout, e.g. to search as a framework without them would).
  bool memory_savers = true;
  /// Called after each batch: layouts simulated so far, at most how many more may be, and the
  /// seconds since the search began (a progress line); may be empty.
  std::function<void(size_t simulated, size_t remaining, double elapsed_s)> progress;
};

/// One layout and what became of it.
struct PlannedLayout {
  /// An encoder-decoder model's stages holding its encoder (parallelism.encoder_stages; 0 on
  /// one stage or with one stack).
  int64_t encoder_stages = 0;
  int64_t tensor = 1, pipeline = 1, virtual_stages = 1, context = 1, expert = 1, data = 1,
          micro_batch = 1;
  /// The embedding and the loss each counted as a layer of the pipeline split (Megatron-Core's
  /// account_for_embedding / _loss_in_pipeline_split): how a layout whose stages do not divide
  /// the layers splits them (pipeline_split.h).
  bool embedding_counted = false, loss_counted = false;
  /// The memory savers the layout needed ("zero 1 + full recompute"), empty for none.
  std::string memory_savers;
  /// The framework options of a variant ("tp overlap + distributed optimizer"), empty for none.
  std::string framework_options;
  std::string label;                   ///< "TP8 PP4 VP5 CP2 EP8 DP2 mb1"
  std::vector<std::string> overrides;  ///< the keys that make the scenario this layout
  bool own = false;                    ///< the scenario's own layout
  enum class Outcome {
    kSimulated,
    kPruned,
    kNoMemory,
    kInvalid,
    /// Its task graph needs more memory than this machine lends a run (MachineLimitError):
    /// not the layout's fault, a larger machine simulates it.
    kMachineLimit,
    kNotReached
  } outcome = Outcome::kNotReached;
  std::string reason;  ///< why not simulated
  Duration lower_bound;
  int64_t memory_bytes = 0;  ///< the estimate per GPU
  // Simulated:
  Duration iteration_time;
  double tokens_per_s = 0.0;
  std::optional<double> model_tflops_per_gpu;
  std::optional<double> mfu;
  /// The slowest rank's exposed communication per iteration by dimension, and its bubble.
  Duration exposed_tp, exposed_pp, exposed_dp, exposed_other, bubble;
  /// The simulated layout's fully resolved scenario (ConfigDocument::resolved_yaml).
  std::string resolved_yaml;
};

struct LayoutPlan {
  std::string scenario_name;
  uint32_t gpus = 0;
  std::string gpu;
  int64_t gpu_memory_bytes = 0;
  int64_t node_gpus = 0;  ///< the tensor-parallel limit
  /// Whether layouts with tensor parallel run sequence parallel, and whether the scenario
  /// stated it (parallelism.sequence) or the search chose it.
  bool sequence_parallel = true;
  bool sequence_parallel_stated = false;
  /// Every layout considered: simulated ones first by time, then pruned, refused, invalid.
  std::vector<PlannedLayout> layouts;
  size_t simulated = 0;
  /// Of the simulated: taken from their records (PlanOptions::resume), and the records found
  /// but refused (another upsim version, changed inputs, damaged), whose layouts ran again.
  size_t resumed = 0;
  size_t stale_records = 0;
  double wall_s = 0.0;

  const PlannedLayout* own() const;
  const PlannedLayout* best() const;
};

/// A layout as a job: its keys, one per line.
std::string layout_job(const std::vector<std::string>& overrides);

/// Simulates a layout job with `options`' scenario, --set and --gpus: format_layout_result's
/// text (the reason, for a layout the workload refuses).
/// `memory_shares`: the runs sharing this process's memory at once (ScenarioLimits); a layout
/// past its share throws SharedMemoryLimitError, to be run again alone
/// (tools/memory_shared_jobs.h).
std::string simulate_layout_job(const PlanOptions& options, const std::string& job,
                                size_t memory_shares = 1);

/// Searches (see the contract). Throws ConfigError for a bad or non-transformer scenario.
LayoutPlan plan_layouts(const PlanOptions& options);

}  // namespace upsim::cli

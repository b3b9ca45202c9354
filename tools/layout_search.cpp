#include "tools/layout_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "sim/parallel_dim.h"
#include "tools/layout_records.h"
#include "tools/memory_shared_jobs.h"
#include "tools/output_folder.h"
#include "tools/point_source.h"
#include "tools/run_metrics.h"
#include "tools/scenario.h"
#include "tools/steady_state.h"
#include "topology/fabric_loader.h"
#include "workloads/transformer/deepep.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/transformer_config.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

/// The scenario with the command's overrides, then `extra`.
ConfigDocument load_with(const PlanOptions& options, const std::vector<std::string>& extra) {
  ConfigDocument doc = load_scenario(options.scenario, options.overrides);
  if (options.gpus > 0) doc.apply_override(fmt::format("platform.gpus={}", options.gpus));
  for (const std::string& o : extra)
    doc.apply_override(o);
  return doc;
}

std::string label_of(const PlannedLayout& l) {
  std::string out = fmt::format("TP{} PP{}", l.tensor, l.pipeline);
  if (l.encoder_stages > 0) out += fmt::format(" ES{}", l.encoder_stages);
  if (l.virtual_stages > 1) out += fmt::format(" VP{}", l.virtual_stages);
  if (l.embedding_counted || l.loss_counted) {
    out += l.embedding_counted && l.loss_counted ? " E+L" : l.embedding_counted ? " E" : " L";
  }
  if (l.context > 1) out += fmt::format(" CP{}", l.context);
  if (l.expert > 1) out += fmt::format(" EP{}", l.expert);
  out += fmt::format(" DP{} mb{}", l.data, l.micro_batch);
  if (!l.memory_savers.empty()) out += " (" + l.memory_savers + ")";
  if (!l.framework_options.empty()) out += " with " + l.framework_options;
  return out;
}

/// One rung of the memory savers (see the contract): its name and keys.
struct MemorySaver {
  std::string name;
  std::vector<std::string> overrides;
  bool full_recompute = false;
};

/// The rungs the scenario leaves open, cheapest first; the first is none.
std::vector<MemorySaver> memory_saver_ladder(const TransformerConfig& base) {
  std::vector<MemorySaver> ladder{{}};
  const bool zero_open = base.parallelism.zero == 0 && base.parallelism.fsdp == FsdpMode::kNone;
  const std::vector<std::string> zero =
      zero_open ? std::vector<std::string>{"workload.parallelism.zero=1"}
                : std::vector<std::string>{};
  const std::string zero_name = zero_open ? "zero 1" : "";
  if (zero_open) ladder.push_back({zero_name, zero});
  if (base.recompute == Recompute::kFull || base.recompute == Recompute::kOp) return ladder;
  const auto with = [&](std::string_view name, std::string_view key, bool full) {
    MemorySaver m{zero_open ? fmt::format("{} + {}", zero_name, name) : std::string(name), zero,
                  full};
    m.overrides.push_back(std::string(key));
    ladder.push_back(std::move(m));
  };
  if (base.recompute == Recompute::kNone) {
    with("selective recompute", "workload.recompute=selective", false);
  }
  with("full recompute", "workload.recompute=full", true);
  return ladder;
}

/// `sequence`: whether the layout runs sequence parallel (only meaningful with tensor > 1).
/// `counted_split`: the scenario states account_for_embedding / _loss, which every layout then
/// sets to its own.
std::vector<std::string> overrides_of(const PlannedLayout& l, bool sequence, bool encoder_decoder,
                                      bool counted_split) {
  std::vector<std::string> keys = {
      fmt::format("workload.parallelism.tensor={}", l.tensor),
      fmt::format("workload.parallelism.sequence={}", l.tensor > 1 && sequence),
      fmt::format("workload.parallelism.pipeline={}", l.pipeline),
      fmt::format("workload.parallelism.virtual_stages={}", l.virtual_stages),
      fmt::format("workload.parallelism.context={}", l.context),
      fmt::format("workload.parallelism.expert={}", l.expert),
      fmt::format("workload.parallelism.data={}", l.data),
      fmt::format("workload.micro_batch={}", l.micro_batch)};
  // An encoder-decoder model's split (0 on one stage: none).
  if (encoder_decoder) {
    keys.push_back(fmt::format("workload.parallelism.encoder_stages={}", l.encoder_stages));
  }
  if (counted_split || l.embedding_counted || l.loss_counted) {
    keys.push_back(
        fmt::format("workload.parallelism.account_for_embedding={}", l.embedding_counted));
    keys.push_back(fmt::format("workload.parallelism.account_for_loss={}", l.loss_counted));
  }
  return keys;
}

/// Context-parallel degrees searched: 1 and the scenario's own, and 2 to 16 where each rank
/// keeps at least 4096 tokens of the sequence and the load-balanced ring attention can split it
/// (seq divisible by 2 x context). Megatron Core's parallelism guide gives context parallel for
/// "Long Sequences (8K+ Tokens)" (docs.nvidia.com/megatron/parallelism-guide); NeMo's Llama 3
/// recipes keep 4K to 16K tokens per context rank (nemo/collections/llm/recipes: llama3_70b,
/// seq 8192, CP 2; llama3_70b_16k CP 2; llama3_70b_64k CP 8; llama3_8b_64k CP 4).
std::vector<int64_t> context_degrees(const TransformerConfig& c) {
  constexpr int64_t kMinTokensPerContextRank = 4096;
  std::vector<int64_t> out{1};
  for (const int64_t cp : {2, 4, 8, 16}) {
    if (c.seq / cp >= kMinTokensPerContextRank && c.seq % (2 * cp) == 0) out.push_back(cp);
  }
  if (std::find(out.begin(), out.end(), c.parallelism.context) == out.end()) {
    out.push_back(c.parallelism.context);
  }
  return out;
}

/// Expert-parallel degrees searched for `data_context` = data x context ranks: 1 for a dense
/// model; for an MoE model every power of two that divides the experts and data x context
/// (Megatron-Core's expert data parallel is data x context / expert), and the scenario's own.
std::vector<int64_t> expert_degrees(const TransformerConfig& c, int64_t data_context) {
  std::vector<int64_t> out{1};
  for (int64_t e = 2; c.moe.experts > 0 && e <= c.moe.experts; e *= 2) {
    if (c.moe.experts % e == 0 && data_context % e == 0) out.push_back(e);
  }
  const int64_t own = c.parallelism.expert;
  if (own > 1 && data_context % own == 0 && std::find(out.begin(), out.end(), own) == out.end()) {
    out.push_back(own);
  }
  return out;
}

/// The GPUs of the fabric's first node (the tensor-parallel limit); 8 without a fabric.
int64_t node_gpus(ConfigDocument& doc, uint32_t gpus) {
  const ConfigNode platform = doc.root().child("platform");
  if (!platform.has("topology")) return 8;
  const std::vector<uint32_t> node =
      load_fabric(platform.load_reference("topology")).gpu_nodes(gpus);
  if (node.empty()) return 8;
  return static_cast<int64_t>(std::count(node.begin(), node.end(), node.front()));
}

/// Every layout of the space (see the contract) but the scenario's own (`own_label`), with the
/// keys that make the scenario it.
std::vector<PlannedLayout> layout_space(const TransformerConfig& base_config, uint32_t gpus,
                                        int64_t node_gpus, const std::string& own_label,
                                        bool sequence_parallel) {
  // Micro-batch sizes: powers of two up to twice the scenario's (at least 4).
  std::vector<int64_t> micro_batch_sizes;
  for (int64_t mb = 1; mb <= std::max<int64_t>(4, 2 * base_config.micro_batch); mb *= 2)
    micro_batch_sizes.push_back(mb);
  const std::vector<int64_t> contexts = context_degrees(base_config);
  std::vector<PlannedLayout> candidates;
  const PipelineSplit& split = base_config.parallelism.split;
  const bool own_split =
      !split.layout.empty() || split.first_stage_layers || split.last_stage_layers;
  const bool counted_keys = split.account_for_embedding || split.account_for_loss;
  for (const int64_t t : {1, 2, 4, 8}) {
    if (t > node_gpus || gpus % t != 0) continue;
    for (const int64_t c : contexts) {
      const int64_t all_layers = base_config.layers + base_config.decoder_layers;
      for (int64_t p = 1; p <= all_layers && t * p * c <= gpus; ++p) {
        if (gpus % (t * p * c) != 0) continue;
        // An encoder-decoder model's splits of its stacks over the stages (Megatron's split
        // rank: the stages of each stack divide its layers); one chunk of every p otherwise.
        // A scenario that states its own chunks' layers (a pipeline layout, first / last stage
        // layers) keeps its pipeline and virtual stages.
        if (own_split && p != base_config.parallelism.pipeline) continue;
        // Stages that do not divide the layers count the embedding and loss as layers
        // (Megatron-Core's account_for_*_in_pipeline_split), where that divides them.
        const bool counted =
            !own_split && !base_config.encoder_decoder() && p > 1 && base_config.layers % p != 0;
        std::vector<int64_t> splits;
        if (!base_config.encoder_decoder() || p == 1) {
          if (!own_split && base_config.layers % p != 0 &&
              !(counted && (base_config.layers + 2) % p == 0)) {
            continue;
          }
          splits.push_back(0);
        } else {
          for (int64_t es = 1; es < p; ++es) {
            if (base_config.layers % es == 0 && base_config.decoder_layers % (p - es) == 0) {
              splits.push_back(es);
            }
          }
          if (splits.empty()) continue;
        }
        const int64_t d = gpus / (t * p * c);
        std::vector<int64_t> virtuals = {1};
        // An encoder-decoder model's pipeline has no interleaving (check_encoder_decoder).
        for (int64_t v = 2; p > 1 && v <= 10 && !base_config.encoder_decoder(); ++v) {
          const int64_t split_layers = counted ? base_config.layers + 2 : base_config.layers;
          // At least one decoder layer in every chunk.
          if (split_layers % (p * v) == 0 && split_layers / (p * v) > (counted ? 1 : 0)) {
            virtuals.push_back(v);
          }
        }
        if (own_split) virtuals = {base_config.parallelism.virtual_stages};
        // With the routed experts whole on a rank (a scenario under tensor parallel stating
        // expert_tensor 1, which every layout keeps) the tensor ranks are expert-parallel
        // ranks too.
        const bool whole_experts =
            base_config.parallelism.tensor > 1 && base_config.parallelism.expert_tensor == 1;
        for (const int64_t e : expert_degrees(base_config, (whole_experts ? t : 1) * d * c)) {
          for (const int64_t mb : micro_batch_sizes) {
            if (base_config.global_batch % (mb * d) != 0) continue;
            const int64_t micro_batches = base_config.global_batch / (mb * d);
            for (const int64_t v : virtuals) {
              if (v > 1 && micro_batches % p != 0) continue;
              for (const int64_t es : splits) {
                PlannedLayout l;
                l.tensor = t;
                l.pipeline = p;
                l.encoder_stages = es;
                l.virtual_stages = v;
                l.embedding_counted = counted;
                l.loss_counted = counted;
                l.context = c;
                l.expert = e;
                l.data = d;
                l.micro_batch = mb;
                l.label = label_of(l);
                if (l.label == own_label) continue;
                l.overrides =
                    overrides_of(l, sequence_parallel, base_config.encoder_decoder(), counted_keys);
                candidates.push_back(std::move(l));
              }
            }
          }
        }
      }
    }
  }
  return candidates;
}

/// Checks layout `l` before any simulation: its validity, its memory with the first saver of
/// `ladder` that makes it fit (its keys and label then include that saver), and its lower bound
/// at `peak` FLOP/s. False, with the outcome and reason set, for a layout not to simulate.
bool fit_layout(const PlanOptions& options, const std::vector<MemorySaver>& ladder, double peak,
                const LayoutPlan& plan, PlannedLayout& l) {
  const std::vector<std::string> layout_keys = l.overrides;
  int64_t unsaved_bytes = 0;
  Duration unsaved_bound;
  try {
    for (const MemorySaver& saver : ladder) {
      std::vector<std::string> keys = layout_keys;
      keys.insert(keys.end(), saver.overrides.begin(), saver.overrides.end());
      std::optional<TransformerConfig> parsed;
      try {
        ConfigDocument doc = load_with(options, keys);
        parsed = parse_transformer_config(doc.root().child("workload"), plan.gpus);
      } catch (const ConfigError&) {
        if (saver.name.empty()) throw;  // the layout itself is invalid
        break;  // a saver the scenario cannot take (e.g. recompute with its attention)
      }
      const TransformerConfig& c = *parsed;
      l.memory_bytes = transformer_peak_memory(c).allocated_bytes();

      const double flops_per_gpu = transformer_model_flops(c) / static_cast<double>(plan.gpus);
      const double bubble = 1.0 + static_cast<double>(l.pipeline - 1) /
                                      static_cast<double>(l.virtual_stages * c.micro_batches());
      const double recompute = saver.full_recompute ? 4.0 / 3.0 : 1.0;
      l.lower_bound = peak > 0.0
                          ? Duration::from_seconds_f(flops_per_gpu / peak * bubble * recompute)
                          : Duration::zero();
      if (saver.name.empty()) {
        unsaved_bytes = l.memory_bytes;
        unsaved_bound = l.lower_bound;
      }
      l.memory_savers = saver.name;
      l.overrides = std::move(keys);
      if (l.memory_bytes <= plan.gpu_memory_bytes) break;
    }
    if (l.memory_bytes > plan.gpu_memory_bytes) {
      // Refused as the layout it is: the reason names what the savers could not save.
      const int64_t saved_bytes = l.memory_bytes;
      const std::string savers = l.memory_savers;
      l.memory_savers.clear();
      l.overrides = layout_keys;
      l.memory_bytes = unsaved_bytes;
      l.lower_bound = unsaved_bound;
      l.outcome = PlannedLayout::Outcome::kNoMemory;
      l.reason = !savers.empty()
                     ? fmt::format("needs {} per GPU ({} with {}), the GPU has {}",
                                   format_bytes(unsaved_bytes), format_bytes(saved_bytes), savers,
                                   format_bytes(plan.gpu_memory_bytes))
                     : fmt::format("needs {} per GPU, the GPU has {}", format_bytes(unsaved_bytes),
                                   format_bytes(plan.gpu_memory_bytes));
      return false;
    }
    l.label = label_of(l);
  } catch (const ConfigError& e) {
    l.outcome = PlannedLayout::Outcome::kInvalid;
    l.reason = e.message();
    return false;
  }
  return true;
}

/// The variants of simulated layout `l` with the framework options (see the contract), each
/// checked for validity and memory: kNotReached when it is to be simulated.
std::vector<PlannedLayout> option_variants(const PlanOptions& options, const PlannedLayout& l,
                                           uint32_t gpus, int64_t gpu_memory_bytes) {
  struct Option {
    std::string name;
    std::vector<std::string> keys;
  };
  ConfigDocument doc = load_with(options, l.overrides);
  const TransformerConfig c = parse_transformer_config(doc.root().child("workload"), gpus);
  const ParallelismConfig& p = c.parallelism;
  const bool replicated = p.data * p.context > 1 && p.fsdp == FsdpMode::kNone;
  std::vector<Option> sharding{{}};
  if (options.memory_savers && replicated && p.zero == 0) {
    sharding.push_back(
        {"distributed optimizer",
         {"workload.parallelism.zero=1",
          fmt::format("workload.parallelism.overlap_param_gather={}", p.overlap_grad_reduce)}});
  }
  if (options.memory_savers && replicated && p.zero < 3) {
    Option fsdp{"fsdp",
                {"workload.parallelism.zero=0", "workload.parallelism.fsdp=full_shard",
                 "workload.parallelism.overlap_param_gather=false"}};
    if (p.pipeline > 1) fsdp.keys.push_back("workload.parallelism.gradient_sync=last_micro_batch");
    sharding.push_back(std::move(fsdp));
  }
  // torchao tensorwise under FSDP: the weights' float8 all-gather (torchtitan's
  // enable_fsdp_float8_all_gather with precomputed scales).
  if (c.torchao_float8() && c.fp8_recipe == Fp8Recipe::kTensorwise && p.fsdp != FsdpMode::kNone &&
      !c.fp8_fsdp_all_gather) {
    sharding.push_back({"float8 all-gather", {"workload.fp8_fsdp_all_gather=true"}});
  }
  std::vector<Option> tensor{{}};
  if (p.tensor > 1 && p.sequence && c.layer_kernels == LayerKernelSet::kTorchtitan) {
    // torchtitan's own overlap: async TP, with compile, without per-op recomputation and
    // without float8 (transformer_config.cpp, check_async_tp).
    if (c.compile && c.recompute != Recompute::kOp && !p.async_tp && c.dtype != DType::kFp8) {
      tensor.push_back({"async tp", {"workload.parallelism.async_tp=true"}});
    }
  } else if (p.tensor > 1 && p.sequence && !p.tp_comm_overlap) {
    tensor.push_back({"tp overlap", {"workload.parallelism.tp_comm_overlap=true"}});
  }
  // Megatron-Core MoE layers over expert parallel with the all-to-all dispatcher: its flex
  // dispatcher on DeepEP instead, where DeepEP runs (tensor 1, a group size of its tables).
  std::vector<Option> dispatch{{}};
  if (c.moe.experts > 0 && p.expert > 1 && p.tensor == 1 &&
      c.layer_kernels != LayerKernelSet::kTorchtitan &&
      c.moe.dispatcher == MoeDispatcher::kAllToAll && !c.moe.pad_to_capacity &&
      deepep_supports_ranks(p.expert)) {
    dispatch.push_back({"deepep", {"workload.moe.dispatcher=flex"}});
  }
  // Megatron-Core's EP all-to-all overlap (the combined 1F1B schedule), with either dispatcher,
  // where Megatron-Core runs it (transformer_config.cpp, check_a2a_overlap: one stage or
  // virtual stages, no full recomputation, no shared-expert overlap).
  std::vector<Option> ep_overlap{{}};
  if (c.moe.experts > 0 && p.expert > 1 && c.layer_kernels != LayerKernelSet::kTorchtitan &&
      c.moe.dispatcher != MoeDispatcher::kAllGather && !c.moe.a2a_overlap &&
      !c.moe.shared_expert_overlap && !c.cuda_graphs && c.recompute != Recompute::kFull &&
      (p.pipeline == 1 || p.virtual_stages > 1)) {
    // With the experts' weight gradients deferred, as Megatron-Bridge's moe_a2a_overlap sets it
    // (scripts/performance/utils/overrides.py, _set_moe_a2a_overlap_overrides).
    ep_overlap.push_back(
        {"ep a2a overlap", {"workload.moe.a2a_overlap=true", "workload.moe.delay_wgrad=true"}});
  }
  std::vector<PlannedLayout> out;
  for (const Option& t : tensor) {
    for (const Option& d : sharding) {
      for (const Option& dispatcher : dispatch) {
        for (const Option& overlap : ep_overlap) {
          Option x = dispatcher;
          if (!overlap.name.empty()) {
            x.name += x.name.empty() ? overlap.name : " + " + overlap.name;
            x.keys.insert(x.keys.end(), overlap.keys.begin(), overlap.keys.end());
          }
          if (t.name.empty() && d.name.empty() && x.name.empty()) continue;
          PlannedLayout v;
          v.tensor = l.tensor;
          v.pipeline = l.pipeline;
          v.virtual_stages = l.virtual_stages;
          v.embedding_counted = l.embedding_counted;
          v.loss_counted = l.loss_counted;
          v.encoder_stages = l.encoder_stages;
          v.context = l.context;
          v.expert = l.expert;
          v.data = l.data;
          v.micro_batch = l.micro_batch;
          v.memory_savers = l.memory_savers;
          // FSDP replaces the distributed optimizer a memory saver may have brought.
          if (d.name == "fsdp" && v.memory_savers.starts_with("zero 1")) {
            v.memory_savers =
                v.memory_savers == "zero 1" ? std::string() : v.memory_savers.substr(9);
          }
          const std::array<const Option*, 3> chosen = {&t, &d, &x};
          for (const Option* o : chosen) {
            if (o->name.empty()) continue;
            if (!v.framework_options.empty()) v.framework_options += " + ";
            v.framework_options += o->name;
          }
          v.label = label_of(v);
          v.lower_bound = l.lower_bound;
          v.overrides = l.overrides;
          for (const Option* o : chosen)
            v.overrides.insert(v.overrides.end(), o->keys.begin(), o->keys.end());
          try {
            ConfigDocument vdoc = load_with(options, v.overrides);
            const TransformerConfig vc =
                parse_transformer_config(vdoc.root().child("workload"), gpus);
            v.memory_bytes = transformer_peak_memory(vc).allocated_bytes();
            if (v.memory_bytes > gpu_memory_bytes) {
              v.outcome = PlannedLayout::Outcome::kNoMemory;
              v.reason = fmt::format("needs {} per GPU, the GPU has {}",
                                     format_bytes(v.memory_bytes), format_bytes(gpu_memory_bytes));
            }
          } catch (const ConfigError& e) {
            v.outcome = PlannedLayout::Outcome::kInvalid;
            v.reason = e.message();
          }
          out.push_back(std::move(v));
        }
      }
    }
  }
  return out;
}

/// Fills `l` from a finished run.
void record_run(const SteadyRun& run, PlannedLayout& l) {
  const RunSummary& s = run.summary;
  l.outcome = PlannedLayout::Outcome::kSimulated;
  l.iteration_time = s.predicted_iteration_time;
  if (const std::optional<RunMetrics> m = run_metrics(run.scenario, s)) {
    l.tokens_per_s = m->units_per_s;
    l.model_tflops_per_gpu = m->model_tflops_per_gpu;
    l.mfu = m->mfu;
  }
  const RankBreakdown* slowest = &slowest_rank(s);
  const auto per_it = [&](Duration total) { return per_iteration(*slowest, total); };
  const auto dim = [&](ParallelDim d) {
    return per_it(slowest->exposed_by_dim[parallel_dim_index(d)]);
  };
  l.exposed_tp = dim(ParallelDim::kTensor);
  l.exposed_pp = dim(ParallelDim::kPipeline);
  l.exposed_dp = dim(ParallelDim::kData);
  l.exposed_other =
      per_it(slowest->exposed_communication) - l.exposed_tp - l.exposed_pp - l.exposed_dp;
  l.bubble = per_it(slowest->bubble);
}

bool before(const PlannedLayout& a, const PlannedLayout& b) {
  if (a.outcome != b.outcome) return a.outcome < b.outcome;
  if (a.outcome == PlannedLayout::Outcome::kSimulated && a.iteration_time != b.iteration_time) {
    return a.iteration_time < b.iteration_time;
  }
  if (a.lower_bound != b.lower_bound) return a.lower_bound < b.lower_bound;
  return a.label < b.label;
}

/// Simulates the plan's batches of layouts (or takes them from their records, with
/// PlanOptions::resume), keeps each simulated layout's record, reports progress and lowers the
/// best time simulated.
class BatchSimulator {
 public:
  BatchSimulator(const PlanOptions& options, LayoutPlan& plan, double& best_s,
                 std::chrono::steady_clock::time_point start)
      : options_(options),
        plan_(plan),
        best_s_(best_s),
        start_(start),
        records_(!options.records_dir.empty()) {}

  /// `left`: at most how many more layouts may follow (for the progress line).
  void simulate(const std::vector<PlannedLayout*>& batch, size_t left) {
    // Records first (one thread: PointSources), then the rest simulated in parallel.
    std::vector<PointSource> batch_sources;
    std::vector<size_t> to_run;
    for (size_t k = 0; k < batch.size(); ++k) {
      PlannedLayout& l = *batch[k];
      batch_sources.push_back(records_ ? source_of(l.overrides) : PointSource{});
      if (records_ && options_.resume) {
        std::string why;
        const fs::path path = layout_record_path(options_.records_dir, batch_sources.back());
        if (std::optional<PlannedLayout> kept =
                read_layout_record(path, batch_sources.back(), l, why)) {
          l = std::move(*kept);
          ++plan_.resumed;
          continue;
        }
        if (fs::exists(path)) ++plan_.stale_records;
      }
      to_run.push_back(k);
    }
    std::vector<std::string> jobs;
    for (const size_t k : to_run)
      jobs.push_back(layout_job(batch[k]->overrides));
    const auto done = [&](size_t r, const std::string& result) {
      PlannedLayout& l = *batch[to_run[r]];
      std::string why;
      std::optional<PlannedLayout> simulated = parse_layout_result(result, l, why);
      if (!simulated) {
        throw std::runtime_error(fmt::format("layout {}: a malformed result ({})", l.label, why));
      }
      l = std::move(*simulated);
    };
    if (options_.run_jobs) {
      options_.run_jobs(jobs, done);
    } else {
      std::vector<std::string> results(jobs.size());
      run_sharing_memory(jobs.size(), static_cast<size_t>(options_.jobs),
                         [&](size_t r, size_t shares) {
                           results[r] = simulate_layout_job(options_, jobs[r], shares);
                         });
      for (size_t r = 0; r < jobs.size(); ++r)
        done(r, results[r]);
    }
    for (const size_t k : to_run) {
      const PlannedLayout& l = *batch[k];
      if (!records_ || l.outcome != PlannedLayout::Outcome::kSimulated) continue;
      write_file_atomically(layout_record_path(options_.records_dir, batch_sources[k]),
                            format_layout_record(l, batch_sources[k]));
    }
    plan_.simulated += batch.size();
    if (options_.progress) {
      options_.progress(
          plan_.simulated, left,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    for (const PlannedLayout* l : batch) {
      if (l->outcome == PlannedLayout::Outcome::kSimulated) {
        best_s_ = std::min(best_s_, l->iteration_time.seconds());
      }
    }
  }

 private:
  /// A layout's inputs (for its record): the command's overrides as load_with applies them.
  PointSource source_of(const std::vector<std::string>& extra) {
    std::vector<std::string> all = options_.overrides;
    if (options_.gpus > 0) all.push_back(fmt::format("platform.gpus={}", options_.gpus));
    all.insert(all.end(), extra.begin(), extra.end());
    return sources_.of(options_.scenario, all);
  }

  const PlanOptions& options_;
  LayoutPlan& plan_;
  double& best_s_;
  const std::chrono::steady_clock::time_point start_;
  const bool records_;
  PointSources sources_;
};

}  // namespace

std::string layout_job(const std::vector<std::string>& overrides) {
  std::string job;
  for (const std::string& o : overrides)
    job += o + "\n";
  return job;
}

std::string simulate_layout_job(const PlanOptions& options, const std::string& job,
                                size_t memory_shares) {
  std::vector<std::string> overrides;
  for (size_t begin = 0; begin < job.size();) {
    const size_t end = job.find('\n', begin);
    if (end == std::string::npos)
      throw std::invalid_argument("a layout job without its last line end");
    overrides.push_back(job.substr(begin, end - begin));
    begin = end + 1;
  }
  PlannedLayout l;
  try {
    ConfigDocument doc = load_with(options, overrides);
    ScenarioLimits limits;
    limits.memory_shares = memory_shares;
    record_run(run_to_steady_state(doc, {}, limits), l);
    l.resolved_yaml = doc.resolved_yaml();
  } catch (const SharedMemoryLimitError&) {
    throw;
  } catch (const MachineLimitError& e) {
    l.outcome = PlannedLayout::Outcome::kMachineLimit;
    l.reason = e.message();
  } catch (const ConfigError& e) {
    l.outcome = PlannedLayout::Outcome::kInvalid;
    l.reason = e.message();
  }
  return format_layout_result(l);
}

const PlannedLayout* LayoutPlan::own() const {
  for (const PlannedLayout& l : layouts) {
    if (l.own) return &l;
  }
  return nullptr;
}

const PlannedLayout* LayoutPlan::best() const {
  return !layouts.empty() && layouts.front().outcome == PlannedLayout::Outcome::kSimulated
             ? &layouts.front()
             : nullptr;
}

LayoutPlan plan_layouts(const PlanOptions& options) {
  if (options.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (options.batch < 1) throw std::invalid_argument("--batch must be at least 1");
  if (options.max_simulations < 1) {
    throw std::invalid_argument("--max-simulations must be at least 1");
  }
  const auto start = std::chrono::steady_clock::now();
  LayoutPlan plan;
  // The scenario as written: its layout, platform and GPU (from a run, which reads and
  // defaults every key).
  ConfigDocument base_doc = load_with(options, {});
  {
    const ConfigNode workload = base_doc.root().child("workload");
    const std::string model = workload.get_string("model");
    if (model != "transformer") {
      workload.child("model").fail(fmt::format(
          "upsim plan lays out transformer training, but this scenario's workload is `{}` "
          "(workload.model: transformer; for DLRM table placement: upsim shard)",
          model));
    }
    // Whether the scenario states sequence parallel, before the run defaults every key.
    plan.sequence_parallel_stated =
        workload.has("parallelism") && workload.child("parallelism").has("sequence");
  }
  PlannedLayout own;
  own.own = true;
  // The scenario's own run: what the plan needs of it is taken out, and its task graph (as large
  // as any layout's) is freed before the layouts are simulated.
  std::optional<SteadyRun> base = run_to_steady_state(base_doc, {});
  plan.scenario_name = base->scenario.name;
  plan.gpus = base->scenario.platform.gpus;
  plan.node_gpus = node_gpus(base_doc, plan.gpus);
  const TransformerConfig base_config =
      parse_transformer_config(base_doc.root().child("workload"), plan.gpus);
  const double peak = [&] {
    const DeviceProfile& device = base->scenario.models.set.devices.front();
    plan.gpu = device.name;
    plan.gpu_memory_bytes = device.hbm_bytes;
    return device.peak(base_config.dtype).flops_per_second();
  }();
  const ParallelismConfig& bp = base_config.parallelism;
  own.tensor = bp.tensor;
  own.pipeline = bp.pipeline;
  own.virtual_stages = bp.virtual_stages;
  own.encoder_stages = bp.encoder_stages;
  own.embedding_counted = bp.split.account_for_embedding;
  own.loss_counted = bp.split.account_for_loss;
  own.context = bp.context;
  own.expert = bp.expert;
  own.data = bp.data;
  own.micro_batch = base_config.micro_batch;
  own.label = label_of(own);
  own.overrides = overrides_of(own, bp.sequence, base_config.encoder_decoder(),
                               bp.split.account_for_embedding || bp.split.account_for_loss);
  own.memory_bytes = base->scenario.memory ? base->scenario.memory->allocated_bytes() : 0;
  own.lower_bound = Duration::zero();
  record_run(*base, own);
  base.reset();
  own.resolved_yaml = base_doc.resolved_yaml();
  double best_s = own.iteration_time.seconds();
  plan.simulated = 1;
  plan.layouts.push_back(own);

  // Sequence parallel with tensor parallel: as the scenario states it, else on (Megatron-Core
  // recommends it with every TP > 1; a framework without it, e.g. 2021 Megatron-LM, states
  // sequence: false).
  plan.sequence_parallel = plan.sequence_parallel_stated ? bp.sequence : true;

  std::vector<PlannedLayout> candidates =
      layout_space(base_config, plan.gpus, plan.node_gpus, own.label, plan.sequence_parallel);
  // Validity, memory (with the savers the layout needs) and the bound, before any simulation.
  const std::vector<MemorySaver> ladder =
      options.memory_savers ? memory_saver_ladder(base_config) : std::vector<MemorySaver>{{}};
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (fit_layout(options, ladder, peak, plan, candidates[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (candidates[a].lower_bound != candidates[b].lower_bound) {
      return candidates[a].lower_bound < candidates[b].lower_bound;
    }
    return candidates[a].label < candidates[b].label;
  });

  BatchSimulator simulator(options, plan, best_s, start);

  // Best bound first, in fixed batches; prune what cannot beat the best so far.
  size_t next = 0;
  while (next < order.size()) {
    std::vector<PlannedLayout*> batch;
    while (next < order.size() && batch.size() < options.batch) {
      PlannedLayout& l = candidates[order[next++]];
      if (l.lower_bound.seconds() >= best_s) {
        l.outcome = PlannedLayout::Outcome::kPruned;
        l.reason = fmt::format("its bound {:.1f} ms is not below the best simulated {:.1f} ms",
                               l.lower_bound.ms(), best_s * 1e3);
        continue;
      }
      if (plan.simulated + batch.size() >= static_cast<size_t>(options.max_simulations)) {
        l.reason = "--max-simulations reached";
        continue;
      }
      batch.push_back(&l);
    }
    const size_t cap = static_cast<size_t>(options.max_simulations);
    const size_t simulated_after = plan.simulated + batch.size();
    simulator.simulate(
        batch, std::min(order.size() - next, cap > simulated_after ? cap - simulated_after : 0));
  }

  // The framework options on the fastest layouts.
  std::vector<PlannedLayout*> fastest;
  for (PlannedLayout& l : candidates) {
    if (l.outcome == PlannedLayout::Outcome::kSimulated) fastest.push_back(&l);
  }
  fastest.push_back(&plan.layouts.front());
  std::stable_sort(fastest.begin(), fastest.end(),
                   [](const PlannedLayout* a, const PlannedLayout* b) { return before(*a, *b); });
  fastest.resize(std::min(fastest.size(), options.refine));
  std::vector<PlannedLayout> variants;
  for (const PlannedLayout* l : fastest) {
    for (PlannedLayout& v : option_variants(options, *l, plan.gpus, plan.gpu_memory_bytes))
      variants.push_back(std::move(v));
  }
  for (size_t k = 0; k < variants.size();) {
    std::vector<PlannedLayout*> batch;
    for (; k < variants.size() && batch.size() < options.batch; ++k) {
      if (variants[k].outcome == PlannedLayout::Outcome::kNotReached) batch.push_back(&variants[k]);
    }
    size_t left = 0;
    for (size_t j = k; j < variants.size(); ++j)
      left += variants[j].outcome == PlannedLayout::Outcome::kNotReached;
    if (!batch.empty()) simulator.simulate(batch, left);
  }
  for (PlannedLayout& v : variants)
    candidates.push_back(std::move(v));
  for (PlannedLayout& l : candidates)
    plan.layouts.push_back(std::move(l));
  std::stable_sort(plan.layouts.begin(), plan.layouts.end(), before);
  plan.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace upsim::cli

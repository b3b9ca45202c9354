#include "tools/validation/row_plans.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace upsim::cli {

int64_t megatron_virtual_stages(int64_t layers, int64_t pipeline) {
  if (pipeline <= 1 || layers % pipeline != 0) return 1;
  const int64_t per_stage = layers / pipeline;
  for (int64_t v = 2; v <= per_stage; ++v) {
    if (per_stage % v == 0) return v;
  }
  return 1;
}

namespace {
/// Why `gpus` cannot run a layout of `model_parallel` GPUs per replica (`what` names it, e.g.
/// "TP x PP") and `data` replicas; empty when it can.
std::string layout_skip_reason(int64_t gpus, int64_t model_parallel, int64_t data,
                               std::string_view what) {
  if (gpus % kGpusPerNode != 0) {
    return fmt::format("{} GPUs is not a whole number of 8-GPU nodes", gpus);
  }
  if (data <= 0 || data * model_parallel != gpus) {
    return fmt::format("{} GPUs is not a multiple of {} = {}", gpus, what, model_parallel);
  }
  return {};
}

/// The overrides of a row whose model comes from a models file (validation/`models_file`): the
/// node count, the model's keys, then `layout`; a skip reason instead for a model the file does
/// not have or a layout that does not fit the GPUs.
void plan_model_row(RowPlan& plan, const std::string& model, const ModelOverrides& models,
                    std::string_view models_file, int64_t model_parallel, int64_t data,
                    std::string_view what, const std::vector<std::string>& layout) {
  const auto entry = models.find(model);
  if (entry == models.end()) {
    plan.skip_reason = fmt::format("model `{}` is not in validation/{}", model, models_file);
    return;
  }
  plan.skip_reason = layout_skip_reason(plan.gpus, model_parallel, data, what);
  if (!plan.skip_reason.empty()) return;
  plan.overrides_source = fmt::format("validation/{}, model {}", models_file, model);
  plan.overrides = {fmt::format("platform.topology.nodes={}", plan.gpus / kGpusPerNode)};
  plan.overrides.insert(plan.overrides.end(), entry->second.begin(), entry->second.end());
  plan.overrides.insert(plan.overrides.end(), layout.begin(), layout.end());
}
}  // namespace

RowPlan megatron_plan(const MegatronRow& row, const MegatronMapping& mapping) {
  RowPlan plan;
  plan.source = "megatron";
  plan.gpus = row.gpus;
  plan.measured_s = row.iteration_time_s;
  plan.template_file = "validation/megatron_gpt.yaml";
  const int64_t model_parallel = row.tensor * row.pipeline;
  const int64_t data = model_parallel > 0 ? row.gpus / model_parallel : 0;
  const int64_t virtual_stages =
      mapping.interleaved ? megatron_virtual_stages(row.layers, row.pipeline) : 1;
  plan.label = fmt::format("gpt-{}b {}gpu tp{} pp{} dp{}{} B{} mb{}", row.params_billion, row.gpus,
                           row.tensor, row.pipeline, data,
                           virtual_stages > 1 ? fmt::format(" v{}", virtual_stages) : "",
                           row.global_batch, mapping.micro_batch);
  plan.skip_reason = layout_skip_reason(row.gpus, model_parallel, data, "TP x PP");
  if (!plan.skip_reason.empty()) return plan;
  if (row.global_batch % (mapping.micro_batch * data) != 0) {
    plan.skip_reason = fmt::format("batch {} is not a multiple of micro-batch {} x DP {}",
                                   row.global_batch, mapping.micro_batch, data);
    return plan;
  }
  plan.overrides = {
      fmt::format("platform.topology.nodes={}", row.gpus / kGpusPerNode),
      fmt::format("workload.layers={}", row.layers),
      fmt::format("workload.hidden={}", row.hidden),
      fmt::format("workload.heads={}", row.heads),
      fmt::format("workload.seq={}", kMegatronSeq),
      fmt::format("workload.vocab={}", kMegatronVocab),
      fmt::format("workload.micro_batch={}", mapping.micro_batch),
      fmt::format("workload.global_batch={}", row.global_batch),
      fmt::format("workload.parallelism.tensor={}", row.tensor),
      fmt::format("workload.parallelism.pipeline={}", row.pipeline),
      fmt::format("workload.parallelism.data={}", data),
      fmt::format("workload.parallelism.virtual_stages={}", virtual_stages),
  };
  return plan;
}

RowPlan nemo_plan(const NemoRow& row, const ModelOverrides& models) {
  RowPlan plan;
  plan.source = "nemo";
  plan.gpus = row.gpus;
  plan.measured_s = row.step_time_s;
  plan.template_file = "validation/nemo_h100.yaml";
  const int64_t model_parallel = row.tensor * row.pipeline * row.context;
  const int64_t data = model_parallel > 0 ? row.gpus / model_parallel : 0;
  plan.label = fmt::format("{} {}gpu tp{} pp{} cp{} vp{} dp{} B{} mb{} s{}", row.model, row.gpus,
                           row.tensor, row.pipeline, row.context, row.virtual_stages, data,
                           row.global_batch, row.micro_batch, row.seq);
  const std::vector<std::string> layout = {
      fmt::format("workload.seq={}", row.seq),
      fmt::format("workload.micro_batch={}", row.micro_batch),
      fmt::format("workload.global_batch={}", row.global_batch),
      fmt::format("workload.parallelism.tensor={}", row.tensor),
      fmt::format("workload.parallelism.sequence={}", row.tensor > 1),
      fmt::format("workload.parallelism.pipeline={}", row.pipeline),
      fmt::format("workload.parallelism.virtual_stages={}", row.virtual_stages),
      fmt::format("workload.parallelism.context={}", row.context),
      fmt::format("workload.parallelism.data={}", data),
  };
  plan_model_row(plan, row.model, models, "nemo_models.yaml", model_parallel, data, "TP x PP x CP",
                 layout);
  return plan;
}

RowPlan nemo_t5_plan(const NemoT5Row& row, const ModelOverrides& models) {
  RowPlan plan;
  plan.source = "nemo-t5";
  plan.gpus = row.gpus;
  plan.measured_s = row.step_time_s;
  plan.template_file = "validation/nemo_t5_a100.yaml";
  const int64_t model_parallel = row.tensor * row.pipeline;
  const int64_t data = model_parallel > 0 ? row.gpus / model_parallel : 0;
  plan.label = fmt::format("{} {}gpu tp{} pp{} dp{} B{} mb{} s{}", row.model, row.gpus, row.tensor,
                           row.pipeline, data, row.global_batch, row.micro_batch, row.seq);
  const std::vector<std::string> layout = {
      fmt::format("workload.seq={}", row.seq),
      fmt::format("workload.micro_batch={}", row.micro_batch),
      fmt::format("workload.global_batch={}", row.global_batch),
      fmt::format("workload.parallelism.tensor={}", row.tensor),
      fmt::format("workload.parallelism.pipeline={}", row.pipeline),
      fmt::format("workload.parallelism.data={}", data),
  };
  plan_model_row(plan, row.model, models, "nemo_t5_models.yaml", model_parallel, data, "TP x PP",
                 layout);
  return plan;
}

RowPlan nemotron_plan(const NemotronRow& row, const ModelOverrides& models) {
  RowPlan plan;
  plan.source = "nemotron-4";
  plan.gpus = row.gpus;
  plan.measured_s = row.step_time_s;
  plan.template_file = "validation/nemotron4_h100.yaml";
  plan.label = fmt::format("{} {}gpu tp{} pp{} dp{} B{} s{}", row.model, row.gpus, row.tensor,
                           row.pipeline, row.data, row.global_batch, row.seq);
  const std::vector<std::string> layout = {
      fmt::format("workload.seq={}", row.seq),
      fmt::format("workload.global_batch={}", row.global_batch),
      fmt::format("workload.parallelism.tensor={}", row.tensor),
      fmt::format("workload.parallelism.sequence={}", row.tensor > 1),
      fmt::format("workload.parallelism.pipeline={}", row.pipeline),
      fmt::format("workload.parallelism.data={}", row.data),
  };
  plan_model_row(plan, row.model, models, "nemotron4_models.yaml", row.tensor * row.pipeline,
                 row.data, "TP x PP", layout);
  return plan;
}

RowPlan foundry_plan(const FoundryRow& row, const std::map<std::string, MptModel>& models) {
  RowPlan plan;
  plan.source = "llm-foundry";
  plan.gpus = row.gpus;
  plan.measured_s = row.step_time_s;
  const bool h100 = row.gpu == "h100_80gb";
  plan.template_file = h100 ? "validation/mpt_fsdp_h100.yaml" : "validation/mpt_fsdp.yaml";
  std::string sharding = row.sharding;
  std::transform(sharding.begin(), sharding.end(), sharding.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  plan.label = fmt::format("mpt-{} {} {}gpu s{} {} mb{} ga{} B{}{}{}", row.model, row.gpu, row.gpus,
                           row.seq, sharding, row.micro_batch, row.grad_accum, row.global_batch,
                           row.activation_checkpointing ? " ckpt" : "",
                           row.precision == "amp_fp8" ? " fp8" : "");
  if (row.gpu != "h100_80gb" && row.gpu != "a100_80gb" && row.gpu != "a100_40gb") {
    plan.skip_reason =
        fmt::format("GPU `{}`: only A100 40/80GB (RoCE cluster) and H100 80GB rows", row.gpu);
    return plan;
  }
  // The 40GB rows ran on the same RoCE cluster design (the README's section title).
  if (row.gpu == "a100_40gb") plan.gpu_profile = "hardware/a100_sxm4_40gb.yaml";
  if (row.precision != "amp_bf16" && row.precision != "bf16" && row.precision != "amp_fp8") {
    plan.skip_reason = fmt::format("precision `{}` is not BF16", row.precision);
    return plan;
  }
  if (row.activation_cpu_offload) {
    plan.skip_reason = "activation CPU offload is not modelled";
    return plan;
  }
  if (sharding != "full_shard" && sharding != "shard_grad_op") {
    plan.skip_reason = fmt::format("sharding strategy `{}` is not modelled", row.sharding);
    return plan;
  }
  const auto model = models.find(row.model);
  if (model == models.end()) {
    plan.skip_reason = fmt::format("MPT size `{}` is not in validation/mpt_models.yaml", row.model);
    return plan;
  }
  if (row.gpus % kGpusPerNode != 0) {
    plan.skip_reason = fmt::format("{} GPUs is not a whole number of 8-GPU nodes", row.gpus);
    return plan;
  }
  const MptModel& m = model->second;
  plan.overrides = {
      fmt::format("platform.topology.nodes={}", row.gpus / kGpusPerNode),
      fmt::format("workload.layers={}", m.layers),
      fmt::format("workload.hidden={}", m.hidden),
      fmt::format("workload.heads={}", m.heads),
      fmt::format("workload.ffn={}", m.expansion_ratio * m.hidden),
      fmt::format("workload.vocab={}", m.vocab),
      fmt::format("workload.seq={}", row.seq),
      fmt::format("workload.micro_batch={}", row.micro_batch),
      fmt::format("workload.global_batch={}", row.global_batch),
      fmt::format("workload.parallelism.data={}", row.gpus),
      fmt::format("workload.parallelism.fsdp={}", sharding),
      fmt::format("workload.recompute={}", row.activation_checkpointing ? "full" : "none"),
      // Composer's FSDP mixed precision: DEFAULT reduces gradients in fp32, PURE in bf16.
      fmt::format("workload.grad_reduce_dtype={}", row.mp_mode == "PURE" ? "bf16" : "fp32"),
  };
  // Composer's amp_fp8: Transformer Engine's fp8_autocast with its DelayedScaling recipe
  // (fp8_recipe delayed, the default) around te.Linear layers; the tied output layer stays bf16.
  if (row.precision == "amp_fp8") plan.overrides.emplace_back("workload.dtype=fp8");
  // The ">= 128 GPUs" H100 tables (llm-foundry PR #838) ran `--attn_impl flash` with the
  // gpu-flash2 extra (scripts/train/benchmarking/sweep.py there): FlashAttention-2. The others
  // ran the templates' Triton FlashAttention (configs/validation/mpt_fsdp*.yaml).
  if (row.section.find("Large Scale") != std::string::npos)
    plan.overrides.emplace_back("workload.attention=flash2");
  return plan;
}

namespace {

/// A system of the DLE tables: its GPU profile, the kernel calibration fitted on its GPU
/// generation and its fabric (relative to the configs folder).
struct DleSystem {
  const char* gpu_profile;
  const char* calibration;
  const char* topology;
  int64_t fabric_gpus;
};
/// [README] section titles: DGX A100 (8x A100 80GB), DGX-1 (8x V100 32GB), DGX-2 (16x V100
/// 32GB); the DGX-2's V100 SXM3 is priced with the SXM2 profile (dle_dlrm.yaml).
const std::map<std::string, DleSystem>& dle_systems() {
  static const std::map<std::string, DleSystem> kSystems = {
      {"dgx-a100",
       {"hardware/a100_sxm4_80gb.yaml", "calibration/a100_llmcompass.yaml",
        "topologies/dgx_a100.yaml", 8}},
      {"dgx-1",
       {"hardware/v100_sxm2_32gb.yaml", "calibration/v100_deepbench.yaml",
        "topologies/dgx1_v100.yaml", 8}},
      {"dgx-2",
       {"hardware/v100_sxm2_32gb.yaml", "calibration/v100_deepbench.yaml", "topologies/dgx2.yaml",
        16}},
  };
  return kSystems;
}

/// A --set value for workload.embeddings.tables: one-hot tables of these rows.
std::string dle_table_list(const std::vector<int64_t>& rows) {
  std::string list;
  for (const int64_t r : rows)
    list += fmt::format("{}{{rows: {}, pooling: 1}}", list.empty() ? "" : ", ", r);
  return fmt::format("[{}]", list);
}

}  // namespace

RowPlan dle_plan(const DleRow& row, bool amp, const DleTables& tables) {
  const std::map<std::string, DleSystem>& kSystems = dle_systems();
  RowPlan plan;
  const bool dcnv2 = row.model == "dcnv2";
  plan.source = dcnv2 ? "dle-dcnv2" : "dle-dlrm";
  plan.gpus = row.gpus;
  const double records_per_s = amp ? row.amp_records_per_s : row.full_precision_records_per_s;
  plan.measured_s = static_cast<double>(kDleGlobalBatch) / records_per_s;
  plan.template_file = dcnv2 ? "validation/dle_dcnv2.yaml" : "validation/dle_dlrm.yaml";
  const std::string precision = amp ? "amp" : row.full_precision;
  plan.label = fmt::format("{}-{} {} {}gpu {} B{}", row.model, row.model_size, row.system, row.gpus,
                           precision, kDleGlobalBatch);
  const auto system = kSystems.find(row.system);
  if (system == kSystems.end()) {
    plan.skip_reason = fmt::format("system `{}` has no fabric", row.system);
    return plan;
  }
  if (row.gpus > system->second.fabric_gpus) {
    plan.skip_reason =
        fmt::format("{} GPUs, but the {} has {}", row.gpus, row.system, system->second.fabric_gpus);
    return plan;
  }
  const auto set = tables.find(row.model_size);
  if (set == tables.end()) {
    plan.skip_reason =
        fmt::format("model size `{}` is not in validation/dle_criteo_tables.yaml", row.model_size);
    return plan;
  }
  plan.gpu_profile = system->second.gpu_profile;
  plan.calibration = system->second.calibration;
  plan.topology = system->second.topology;
  plan.overrides = {
      fmt::format("platform.gpus={}", row.gpus),
      fmt::format("platform.partial_fabric={}", row.gpus < system->second.fabric_gpus),
      fmt::format("workload.global_batch={}", kDleGlobalBatch),
      fmt::format("workload.dtype={}", amp ? "fp16" : row.full_precision),
      "workload.embeddings.tables=" + dle_table_list(set->second),
  };
  if (amp) {
    // dle_dlrm.yaml [MAIN] 588: torch.autocast over fp32 parameters (GradScaler, apex FusedSGD
    // on the fp32 weights); dle_dcnv2.yaml: Keras' mixed_float16 policy, fp32 variables.
    plan.overrides.push_back("workload.master_weights=true");
  }
  if (amp && !dcnv2) {
    // dle_dlrm.yaml [README] 747, [SPARSE]: fp32 tables, lookups and gradients; [PARTS]: the
    // looked-up vectors are cast to fp16 before the all-to-all. (dle_dcnv2.yaml [SPARSE]: the
    // DCNv2 exchange stays fp32 under amp, as the template says.)
    plan.overrides.push_back("workload.embeddings.dtype=fp32");
    plan.overrides.push_back("workload.all_to_all_dtype=fp16");
    // dle_dlrm.yaml [README]: the mixed-precision rows ran `main.py --amp --cuda_graphs`
    // (CudaGraphWrapper: forward and backward replayed as one graph, the optimizer eager).
    plan.overrides.push_back("workload.cuda_graphs=true");
  }
  return plan;
}

RowPlan dle_inference_plan(const DleInferenceRow& row, bool amp, bool graphs,
                           const DleTables& tables) {
  const std::map<std::string, DleSystem>& kSystems = dle_systems();
  RowPlan plan;
  plan.source = graphs ? "dle-dlrm-inference-graphs" : "dle-dlrm-inference";
  plan.gpus = 1;
  const double records_per_s =
      graphs ? (amp ? row.amp_graphs_records_per_s : row.full_precision_graphs_records_per_s)
             : (amp ? row.amp_records_per_s : row.full_precision_records_per_s);
  plan.measured_s = records_per_s > 0.0 ? static_cast<double>(row.batch) / records_per_s : 0.0;
  plan.template_file = "validation/dle_dlrm_inference.yaml";
  plan.label = fmt::format("dlrm-small {} 1gpu {} B{}{}", row.system,
                           amp ? "amp" : row.full_precision, row.batch, graphs ? " graphs" : "");
  if (!(records_per_s > 0.0)) {
    plan.skip_reason = "the table has no CUDA-graphs-on throughput column";
    return plan;
  }
  const auto system = kSystems.find(row.system);
  const auto set = tables.find("small");
  if (system == kSystems.end()) {
    plan.skip_reason = fmt::format("system `{}` has no fabric", row.system);
    return plan;
  }
  if (set == tables.end()) {
    plan.skip_reason = "model size `small` is not in validation/dle_criteo_tables.yaml";
    return plan;
  }
  plan.gpu_profile = system->second.gpu_profile;
  plan.calibration = system->second.calibration;
  plan.topology = system->second.topology;
  // dle_dlrm_inference.yaml [MAIN] 520-522: mixed precision is model.half(), tables included.
  plan.overrides = {
      fmt::format("workload.global_batch={}", row.batch),
      fmt::format("workload.dtype={}", amp ? "fp16" : row.full_precision),
      fmt::format("workload.embeddings.dtype={}", amp ? "fp16" : "fp32"),
      "workload.embeddings.tables=" + dle_table_list(set->second),
  };
  if (graphs) plan.overrides.push_back("workload.cuda_graphs=true");
  return plan;
}

}  // namespace upsim::cli

// What each measured row of a published table becomes: a template of configs/validation/ and
// the `--set` overrides that make it the measured run, or the reason it is not simulated. Pure
// functions of the rows (tools/validation/published_tables.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/validation/published_tables.h"

namespace upsim::cli {

inline constexpr int64_t kGpusPerNode = 8;

/// Megatron rows: how the paper's unstated choices are filled in.
struct MegatronMapping {
  int64_t micro_batch = 1;  ///< not stated for Table 1; Table 2's PTD-P rows use 1
  bool interleaved = true;  ///< §5.1: "we use the interleaved pipeline schedule"
};

/// What one measured row becomes: a template and the overrides that make it the measured run,
/// or the reason it is not simulated.
struct RowPlan {
  std::string source;  ///< "megatron" | "llm-foundry" | "nemo" | "dle-dlrm" | ...
  std::string label;   ///< the row's identity, matched by --rows
  int64_t gpus = 0;
  double measured_s = 0.0;
  std::string template_file;  ///< relative to the configs folder, e.g. validation/mpt_fsdp.yaml
  std::vector<std::string> overrides;  ///< "key=value", applied in order
  /// Non-empty: the hardware profile (relative to the configs folder) that replaces the
  /// template's platform.gpu.
  std::string gpu_profile;
  /// Non-empty: the fabric (relative to the configs folder) that replaces platform.topology.
  std::string topology;
  /// Non-empty: the kernel calibration (relative to the configs folder) that replaces
  /// platform.kernels.calibration: the one fitted on the row's GPU generation.
  std::string calibration;
  std::string skip_reason;  ///< non-empty: not simulated
  /// Non-empty: the file (and entry) some overrides were read from, named in the row's error
  /// when the run refuses one of them.
  std::string overrides_source;
};

/// Interleaved schedule: the number of model chunks per pipeline rank that the paper does not
/// state. ASSUMPTION: the smallest divisor >= 2 of layers / pipeline (1 when pipeline == 1 or
/// each stage holds one layer).
int64_t megatron_virtual_stages(int64_t layers, int64_t pipeline);

/// Pure: a Megatron Table 1 row -> overrides of configs/validation/megatron_gpt.yaml.
RowPlan megatron_plan(const MegatronRow& row, const MegatronMapping& mapping);
/// Pure: an llm-foundry row -> overrides of configs/validation/mpt_fsdp.yaml (A100 80GB and,
/// with the 40GB profile, A100 40GB; RoCE) or mpt_fsdp_h100.yaml (DGX H100), or a skip reason
/// (FP8, CPU offload, unknown size).
RowPlan foundry_plan(const FoundryRow& row, const std::map<std::string, MptModel>& models);

/// Pure: a NeMo 24.07 row -> overrides of configs/validation/nemo_h100.yaml: the model's keys
/// (nemo_models.yaml, TE's TP overlap among them), sequence, batches, TP (with sequence parallel
/// when TP > 1), PP, VP, CP, DP and the node count; a skip reason for an unknown model or a layout
/// that does not divide the GPUs.
RowPlan nemo_plan(const NemoRow& row, const ModelOverrides& models);
/// Pure: a NeMo T5 row -> overrides of configs/validation/nemo_t5_a100.yaml: the model's keys
/// (nemo_t5_models.yaml), micro-batch, global batch, TP (no sequence parallel: NeMo's T5
/// configs have none), PP, DP and the node count; a skip reason for an unknown model or a layout
/// that does not divide the GPUs.
RowPlan nemo_t5_plan(const NemoT5Row& row, const ModelOverrides& models);
/// Pure: a Nemotron-4 report row -> overrides of configs/validation/nemotron4_h100.yaml: the
/// model's keys (nemotron4_models.yaml: its micro-batch, virtual stages, TP overlap, ...), then
/// sequence, global batch, TP (with sequence parallel when TP > 1), PP, DP and the node count; a
/// skip reason for an unknown model.
RowPlan nemotron_plan(const NemotronRow& row, const ModelOverrides& models);
/// Pure: one measurement of a DLE row (mixed precision when `amp`) -> overrides of
/// configs/validation/dle_dlrm.yaml: the system's GPU profile, kernel calibration and fabric
/// (partial when the row uses fewer GPUs than it has), the dtypes, the table set; a skip reason for
/// an unknown model size.
RowPlan dle_plan(const DleRow& row, bool amp, const DleTables& tables);
/// Pure: one measurement of a DLE inference row -> overrides of
/// configs/validation/dle_dlrm_inference.yaml: the GPU profile, calibration and fabric, the batch,
/// the dtypes (mixed precision: the whole model in fp16, tables included), the `small` table set;
/// with `graphs`, the CUDA-graphs-on measurement (source dle-dlrm-inference-graphs) and
/// workload.cuda_graphs.
RowPlan dle_inference_plan(const DleInferenceRow& row, bool amp, bool graphs,
                           const DleTables& tables);

}  // namespace upsim::cli

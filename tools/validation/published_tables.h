// The published step-time tables `upsim validate workloads` checks upsim against, read strictly
// (test/data/*/SOURCES.md says where each comes from):
//   Megatron-LM SC'21 Table 1 (GPT 1.7B-1T on Selene, DGX A100 80GB, 8x HDR IB per node): the
//     iteration time derived from the achieved TFLOP/s with the paper's Eq. 3;
//   llm-foundry's MPT benchmarks (FSDP on A100 80GB over RoCE and on DGX H100): the step time
//     GlobalBatchSize(T) / Throughput(T/s);
//   NVIDIA DeepLearningExamples' PyTorch DLRM and TF2 DCNv2 training tables and the DLRM
//     inference tables: step time 65536 / records per second, latency batch / records per second;
// and the model and table-set files of configs/validation/ the rows refer to.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace upsim::cli {

/// Megatron SC'21 facts shared by every Table 1 row (paper section 5.1).
inline constexpr int64_t kMegatronSeq = 2048;
inline constexpr int64_t kMegatronVocab = 51200;

/// A measurement table that cannot be read: the message names file:line and the column.
class WorkloadTableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One row of Megatron-LM SC'21 Table 1 (megatron_sc21_table1_weak_scaling.csv).
struct MegatronRow {
  int line = 0;  ///< 1-based line in the file
  double params_billion = 0.0;
  int64_t heads = 0;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t tensor = 0;
  int64_t pipeline = 0;
  int64_t gpus = 0;
  int64_t global_batch = 0;
  double achieved_tflops_per_gpu = 0.0;
  double iteration_time_s = 0.0;  ///< derived_iter_time_s (paper Eq. 3 / achieved FLOP/s)
};

/// One row of llm-foundry's MPT benchmark tables (mpt_training_throughput.csv).
struct FoundryRow {
  int line = 0;
  std::string section;  ///< e.g. "H100 80GB BF16"
  std::string model;    ///< size tag: 125m ... 70b
  int64_t seq = 0;
  int64_t gpus = 0;
  std::string gpu;  ///< h100_80gb | a100_80gb | a100_40gb
  int64_t micro_batch = 0;
  int64_t grad_accum = 0;
  int64_t global_batch = 0;  ///< sequences
  std::string precision;     ///< amp_bf16 | bf16 | amp_fp8
  std::string mp_mode;       ///< FSDP mixed precision: DEFAULT | PURE
  std::string sharding;      ///< FULL_SHARD | SHARD_GRAD_OP
  bool activation_checkpointing = false;
  bool activation_cpu_offload = false;
  int64_t num_params = 0;
  double step_time_s = 0.0;  ///< derived_step_time_s
};

/// One row of NeMo 24.07's DGX-H100 FP8 pre-training table (nemo_24.07_dgx_h100_fp8_pretrain.csv).
struct NemoRow {
  int line = 0;
  std::string model;  ///< as published: GPT3-5B, LLAMA2-70B, Nemotron-340B, ...
  int64_t gpus = 0;
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int64_t seq = 0;
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t context = 1;
  int64_t virtual_stages = 1;  ///< NeMo's VP: model chunks per pipeline rank
  double tokens_per_s_per_gpu = 0.0;
  double step_time_s = 0.0;  ///< derived_step_time_s
};

/// One row of NeMo's T5 pre-training tables on DGX A100 (nemo_t5_a100_pretrain.csv): the
/// published tokens/s, the layout of the launcher config of its model.
struct NemoT5Row {
  int line = 0;
  std::string model;  ///< T5-220M | T5-3B
  std::string table;  ///< which of the page's tables, e.g. "3B T5 training performance (1 node)"
  int64_t gpus = 0;
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int64_t seq = 0;  ///< the encoder's
  int64_t tensor = 1;
  int64_t pipeline = 1;
  double tokens_per_s = 0.0;  ///< as published, all GPUs together
  double step_time_s = 0.0;   ///< derived_step_time_s
};

/// One row of the Nemotron-4 reports' batch-size ramps (nemotron4_h100_pretrain.csv).
struct NemotronRow {
  int line = 0;
  std::string model;  ///< Nemotron-4-15B | Nemotron-4-340B
  std::string paper;  ///< where the row was published, e.g. "arXiv 2402.16819 Table 2"
  int64_t data = 0;
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t gpus = 0;
  double step_time_s = 0.0;  ///< Iteration time (secs), as published
  int64_t global_batch = 0;
  int64_t seq = 0;
};

/// One row of a DeepLearningExamples PyTorch DLRM training-performance table
/// (pytorch_dlrm_training_perf_*.csv): two measurements, full precision and mixed precision.
struct DleRow {
  int line = 0;
  /// "dlrm" (the PyTorch DLRM tables, source dle-dlrm) | "dcnv2" (the TensorFlow2 DCNv2 table,
  /// source dle-dcnv2): which template the row runs.
  std::string model = "dlrm";
  std::string section;  ///< README headings, e.g. "... NVIDIA DGX-2 (16x V100 32GB)"
  std::string system;   ///< from the section: "dgx-a100" | "dgx-1" | "dgx-2"
  int64_t gpus = 0;
  std::string model_size;     ///< "small" | "large" (dle_criteo_tables.yaml)
  int64_t batch_per_gpu = 0;  ///< "8k" -> 8192; gpus x batch_per_gpu = kDleGlobalBatch
  /// The full-precision column's precision: "tf32" (`Throughput - TF32`, A100) or "fp32"
  /// (`Throughput - FP32`, V100).
  std::string full_precision;
  double full_precision_records_per_s = 0.0;
  double amp_records_per_s = 0.0;  ///< `Throughput - mixed precision`
};

/// One row of a DeepLearningExamples PyTorch DLRM inference table
/// (pytorch_dlrm_inference_perf_*.csv): one GPU, one batch size, the throughput of mixed
/// precision and of full precision with CUDA graphs off and on.
struct DleInferenceRow {
  int line = 0;
  std::string section;  ///< README headings, e.g. "... NVIDIA DGX-1 (1x V100 32GB)"
  std::string system;   ///< from the section: "dgx-a100" | "dgx-1"
  int64_t batch = 0;
  std::string full_precision;  ///< "tf32" (A100 table) | "fp32" (V100 table)
  double full_precision_records_per_s = 0.0;
  double amp_records_per_s = 0.0;
  /// The same with CUDA graphs on (`... - CUDA Graphs ON`).
  double full_precision_graphs_records_per_s = 0.0;
  double amp_graphs_records_per_s = 0.0;
};

/// DLE main.py's --batch_size default, which the README's benchmark commands leave unchanged.
inline constexpr int64_t kDleGlobalBatch = 65536;

/// Strict readers: header-named columns (any order, extra columns ignored), '#' comment lines,
/// double-quoted fields (commas inside; "" is a quote). A missing column, a short row or an
/// unparsable number throws WorkloadTableError "FILE:LINE: column `NAME`: ...".
std::vector<MegatronRow> read_megatron_table(const std::filesystem::path& path);
std::vector<FoundryRow> read_foundry_table(const std::filesystem::path& path);
/// The derived step time must agree with GBS x seq / (tokens/s/GPU x GPUs) within 1%.
std::vector<NemoRow> read_nemo_table(const std::filesystem::path& path);
/// GPUs must equal data x TP x PP.
std::vector<NemotronRow> read_nemotron_table(const std::filesystem::path& path);
/// derived_step_time_s must be GBS x Sequence Length / Tokens / sec within 1%.
std::vector<NemoT5Row> read_nemo_t5_table(const std::filesystem::path& path);
/// Throughputs may hold thousands separators ("11,400,000"); batch per GPU is "<n>k" or "<n>";
/// a section naming no known DGX system, or gpus x batch per GPU != kDleGlobalBatch, throws.
std::vector<DleRow> read_dle_table(const std::filesystem::path& path,
                                   std::string_view model = "dlrm");
/// The inference tables: the `Throughput Avg - ... - CUDA Graphs OFF` and `... ON` columns
/// (records/s, thousands separators allowed) of mixed precision and of TF32 (A100) or FP32
/// (V100); a section naming neither a DGX A100 / A100 nor a DGX-1 throws.
std::vector<DleInferenceRow> read_dle_inference_table(const std::filesystem::path& path);

/// An MPT size from configs/validation/mpt_models.yaml (llm-foundry's yamls).
struct MptModel {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t vocab = 0;
  int64_t expansion_ratio = 4;
};
/// Reads `models: {125m: {d_model, n_heads, n_layers, expansion_ratio, vocab_size}, ...}`;
/// throws ConfigError for a bad file.
std::map<std::string, MptModel> read_mpt_models(const std::filesystem::path& path);

/// A models file of configs/validation/ (nemo_models.yaml, nemotron4_models.yaml): model name ->
/// the workload keys that make the model, as `workload.KEY=VALUE` overrides in the file's order.
using ModelOverrides = std::map<std::string, std::vector<std::string>>;
/// Reads `models: {GPT3-5B: {layers: 24, ...}, ...}` (scalar values only); throws ConfigError
/// for a bad file.
ModelOverrides read_model_overrides(const std::filesystem::path& path);

/// The DLE DLRM table sets of configs/validation/dle_criteo_tables.yaml: model size -> each
/// table's rows, in feature order.
using DleTables = std::map<std::string, std::vector<int64_t>>;
/// Reads `models: {small: {frequency_threshold, rows: [...]}, ...}`; throws ConfigError for a bad
/// file.
DleTables read_dle_tables(const std::filesystem::path& path);

}  // namespace upsim::cli

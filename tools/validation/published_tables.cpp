#include "tools/validation/published_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "sim/config/config_node.h"
#include "tools/validation/measurement_table.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

/// Throws WorkloadTableError naming the file, line and column of the first value that is not
/// positive.
void require_positive(const MeasurementTable& t, int line,
                      std::initializer_list<std::pair<int64_t, const char*>> values) {
  for (const auto& [value, column] : values) {
    if (value <= 0) {
      throw WorkloadTableError(fmt::format("{}:{}: column `{}`: must be positive, got {}", t.file(),
                                           line, column, value));
    }
  }
}

/// Paper Eq. 3: FLOPs per iteration with activation recomputation.
double megatron_flops(const MegatronRow& r) {
  const double b = static_cast<double>(r.global_batch);
  const double s = kMegatronSeq;
  const double l = static_cast<double>(r.layers);
  const double h = static_cast<double>(r.hidden);
  const double v = kMegatronVocab;
  return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

}  // namespace

// ---- Readers --------------------------------------------------------------------------------

std::vector<MegatronRow> read_megatron_table(const fs::path& path) {
  const MeasurementTable t(path);
  std::vector<MegatronRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    MegatronRow r;
    r.line = t.line(i);
    r.params_billion = t.number(i, "params_billion");
    r.heads = t.integer(i, "attention_heads");
    r.hidden = t.integer(i, "hidden_size");
    r.layers = t.integer(i, "num_layers");
    r.tensor = t.integer(i, "tensor_parallel");
    r.pipeline = t.integer(i, "pipeline_parallel");
    r.gpus = t.integer(i, "num_gpus");
    r.global_batch = t.integer(i, "global_batch_size");
    r.achieved_tflops_per_gpu = t.number(i, "achieved_tflops_per_gpu");
    r.iteration_time_s = t.number(i, "derived_iter_time_s");
    require_positive(t, r.line,
                     {{r.heads, "attention_heads"},
                      {r.hidden, "hidden_size"},
                      {r.layers, "num_layers"},
                      {r.tensor, "tensor_parallel"},
                      {r.pipeline, "pipeline_parallel"},
                      {r.gpus, "num_gpus"},
                      {r.global_batch, "global_batch_size"}});
    if (r.achieved_tflops_per_gpu <= 0.0 || r.iteration_time_s <= 0.0) {
      throw WorkloadTableError(fmt::format(
          "{}:{}: column `achieved_tflops_per_gpu` / `derived_iter_time_s`: must be positive",
          t.file(), r.line));
    }
    // The derived column must be what SOURCES.md says it is: Eq. 3 / achieved FLOP/s.
    const double eq3 =
        megatron_flops(r) / (r.achieved_tflops_per_gpu * 1e12 * static_cast<double>(r.gpus));
    if (std::abs(eq3 / r.iteration_time_s - 1.0) > 5e-3) {
      throw WorkloadTableError(fmt::format(
          "{}:{}: column `derived_iter_time_s`: {} s disagrees with the paper's Eq. 3 / "
          "achieved TFLOP/s = {:.4f} s",
          t.file(), r.line, r.iteration_time_s, eq3));
    }
    rows.push_back(r);
  }
  return rows;
}

std::vector<FoundryRow> read_foundry_table(const fs::path& path) {
  const MeasurementTable t(path);
  std::vector<FoundryRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    FoundryRow r;
    r.line = t.line(i);
    r.section = t.field(i, "section");
    r.model = t.field(i, "Model");
    r.seq = t.integer(i, "SeqLen (T)");
    r.gpus = t.integer(i, "# GPUs");
    r.gpu = t.field(i, "GPU");
    r.micro_batch = t.integer(i, "MicroBatchSize");
    r.grad_accum = t.integer(i, "GradAccum");
    r.global_batch = t.integer(i, "GlobalBatchSize");
    r.precision = t.field(i, "Precision");
    r.mp_mode = t.field(i, "MP Mode");
    r.sharding = t.field(i, "Sharding Strategy");
    r.activation_checkpointing = t.boolean(i, "Activation Checkpointing");
    r.activation_cpu_offload = t.boolean(i, "Activation CPUOffload");
    r.num_params = t.integer(i, "NumParams");
    r.step_time_s = t.number(i, "derived_step_time_s");
    require_positive(t, r.line,
                     {{r.seq, "SeqLen (T)"},
                      {r.gpus, "# GPUs"},
                      {r.micro_batch, "MicroBatchSize"},
                      {r.grad_accum, "GradAccum"},
                      {r.global_batch, "GlobalBatchSize"}});
    if (r.step_time_s <= 0.0) {
      throw WorkloadTableError(
          fmt::format("{}:{}: column `derived_step_time_s`: must be positive", t.file(), r.line));
    }
    if (r.micro_batch * r.grad_accum * r.gpus != r.global_batch) {
      throw WorkloadTableError(fmt::format(
          "{}:{}: column `GlobalBatchSize`: {} != MicroBatchSize x GradAccum x # GPUs = {}",
          t.file(), r.line, r.global_batch, r.micro_batch * r.grad_accum * r.gpus));
    }
    rows.push_back(r);
  }
  return rows;
}

namespace {

/// A model file's `source:` (repository, commit, files): provenance, read so that the document
/// accepts it.
void read_source(const ConfigNode& root) {
  const ConfigNode source = root.child("source");
  source.get_string("repository");
  source.get_string("commit");
  source.get_string("files");
}

/// A row's `derived_step_time_s` must be what its published throughput implies (`implied_s()`,
/// computed as `formula` says, called once both are positive) within 1%, and both its
/// throughput and it positive.
template <class Implied>
void require_derived_step_time(const MeasurementTable& t, int line, std::string_view throughput,
                               double throughput_value, double step_time_s, Implied implied_s,
                               std::string_view formula) {
  if (!(throughput_value > 0.0) || !(step_time_s > 0.0)) {
    throw WorkloadTableError(
        fmt::format("{}:{}: columns `{}` and `derived_step_time_s` must be positive", t.file(),
                    line, throughput));
  }
  const double implied = implied_s();
  if (std::abs(implied / step_time_s - 1.0) > 0.01) {
    throw WorkloadTableError(
        fmt::format("{}:{}: column `derived_step_time_s`: {} s, but {} = {:.4g} s", t.file(), line,
                    step_time_s, formula, implied));
  }
}

}  // namespace

std::vector<NemoRow> read_nemo_table(const fs::path& path) {
  const MeasurementTable t(path);
  std::vector<NemoRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    NemoRow r;
    r.line = t.line(i);
    r.model = t.field(i, "Model");
    r.gpus = t.integer(i, "#-GPUs");
    r.global_batch = t.integer(i, "GBS");
    r.micro_batch = t.integer(i, "MBS");
    r.seq = t.integer(i, "Sequence Length");
    r.tensor = t.integer(i, "TP");
    r.pipeline = t.integer(i, "PP");
    r.context = t.integer(i, "CP");
    r.virtual_stages = t.integer(i, "VP");
    r.tokens_per_s_per_gpu = t.number(i, "Tokens / sec / GPU");
    r.step_time_s = t.number(i, "derived_step_time_s");
    require_positive(t, r.line,
                     {{r.gpus, "#-GPUs"},
                      {r.global_batch, "GBS"},
                      {r.micro_batch, "MBS"},
                      {r.seq, "Sequence Length"},
                      {r.tensor, "TP"},
                      {r.pipeline, "PP"},
                      {r.context, "CP"},
                      {r.virtual_stages, "VP"}});
    require_derived_step_time(
        t, r.line, "Tokens / sec / GPU", r.tokens_per_s_per_gpu, r.step_time_s,
        [&] {
          return static_cast<double>(r.global_batch * r.seq) /
                 (r.tokens_per_s_per_gpu * static_cast<double>(r.gpus));
        },
        "GBS x seq / (tokens/s/GPU x GPUs)");
    rows.push_back(r);
  }
  return rows;
}

std::vector<NemoT5Row> read_nemo_t5_table(const fs::path& path) {
  const MeasurementTable t(path);
  std::vector<NemoT5Row> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    NemoT5Row r;
    r.line = t.line(i);
    r.model = t.field(i, "Model");
    r.table = t.field(i, "Table");
    r.gpus = t.integer(i, "#-GPUs");
    r.global_batch = t.integer(i, "GBS");
    r.micro_batch = t.integer(i, "MBS");
    r.seq = t.integer(i, "Sequence Length");
    r.tensor = t.integer(i, "TP");
    r.pipeline = t.integer(i, "PP");
    r.tokens_per_s = t.number(i, "Tokens / sec");
    r.step_time_s = t.number(i, "derived_step_time_s");
    require_positive(t, r.line,
                     {{r.gpus, "#-GPUs"},
                      {r.global_batch, "GBS"},
                      {r.micro_batch, "MBS"},
                      {r.seq, "Sequence Length"},
                      {r.tensor, "TP"},
                      {r.pipeline, "PP"}});
    require_derived_step_time(
        t, r.line, "Tokens / sec", r.tokens_per_s, r.step_time_s,
        [&] { return static_cast<double>(r.global_batch * r.seq) / r.tokens_per_s; },
        "GBS x seq / tokens/s");
    rows.push_back(r);
  }
  return rows;
}

std::vector<NemotronRow> read_nemotron_table(const fs::path& path) {
  const MeasurementTable t(path);
  std::vector<NemotronRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    NemotronRow r;
    r.line = t.line(i);
    r.model = t.field(i, "Model");
    r.paper = t.field(i, "Paper");
    r.data = t.integer(i, "Data-parallel size");
    r.tensor = t.integer(i, "TP");
    r.pipeline = t.integer(i, "PP");
    r.gpus = t.integer(i, "GPUs");
    r.step_time_s = t.number(i, "Iteration time (secs)");
    r.global_batch = t.integer(i, "Batch size");
    r.seq = t.integer(i, "Sequence Length");
    require_positive(t, r.line,
                     {{r.data, "Data-parallel size"},
                      {r.tensor, "TP"},
                      {r.pipeline, "PP"},
                      {r.gpus, "GPUs"},
                      {r.global_batch, "Batch size"},
                      {r.seq, "Sequence Length"}});
    if (!(r.step_time_s > 0.0)) {
      throw WorkloadTableError(
          fmt::format("{}:{}: column `Iteration time (secs)` must be positive", t.file(), r.line));
    }
    if (r.data * r.tensor * r.pipeline != r.gpus) {
      throw WorkloadTableError(fmt::format(
          "{}:{}: column `GPUs`: {}, but data-parallel size x TP x PP = {} x {} x {} = {}",
          t.file(), r.line, r.gpus, r.data, r.tensor, r.pipeline, r.data * r.tensor * r.pipeline));
    }
    rows.push_back(r);
  }
  return rows;
}

ModelOverrides read_model_overrides(const fs::path& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  const ConfigNode root = doc.root();
  read_source(root);
  ModelOverrides models;
  for (const auto& [name, node] : root.child("models").map_entries()) {
    node.expect_map("workload keys of the model, e.g. {layers: 32, hidden: 4096}");
    std::vector<std::string>& overrides = models[name];
    for (const auto& [key, value] : node.map_entries())
      overrides.push_back(fmt::format("workload.{}={}", key, value.as_string()));
    if (overrides.empty()) node.fail("names no workload key");
  }
  doc.check_all_keys_used();
  return models;
}

std::map<std::string, MptModel> read_mpt_models(const fs::path& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  const ConfigNode root = doc.root();
  read_source(root);
  std::map<std::string, MptModel> models;
  for (const auto& [name, node] : root.child("models").map_entries()) {
    MptModel m;
    m.hidden = node.get_positive_int("d_model");
    m.heads = node.get_positive_int("n_heads");
    m.layers = node.get_positive_int("n_layers");
    m.expansion_ratio = node.get_positive_int("expansion_ratio");
    m.vocab = node.get_positive_int("vocab_size");
    if (m.hidden % m.heads != 0) node.child("n_heads").fail("must divide d_model");
    models.emplace(name, m);
  }
  doc.check_all_keys_used();
  return models;
}

namespace {

/// "11,400,000" -> 11400000 (digits with optional thousands separators); "3.81M" -> 3810000
/// (DCNv2.md's millions). Positive.
double dle_throughput(const MeasurementTable& t, size_t row, const std::string& column) {
  std::string digits;
  for (char c : t.field(row, column)) {
    if (c != ',') digits += c;
  }
  double scale = 1.0;
  if (!digits.empty() && digits.back() == 'M') {
    scale = 1e6;
    digits.pop_back();
  }
  double value = 0.0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
      !(value > 0.0) || (scale == 1.0 && value != std::floor(value))) {
    throw t.bad_value(row, column, t.field(row, column),
                      "a positive records/s count (11,400,000 or 3.81M)");
  }
  return value * scale;
}

/// "8k" -> 8192, "512" -> 512.
int64_t dle_batch(const MeasurementTable& t, size_t row, const std::string& column) {
  std::string text = t.field(row, column);
  int64_t scale = 1;
  if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) {
    scale = 1024;
    text.pop_back();
  }
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || value <= 0 ||
      value > kDleGlobalBatch) {
    throw t.bad_value(row, column, t.field(row, column), "a batch such as 8k or 512");
  }
  return value * scale;
}

}  // namespace

std::vector<DleRow> read_dle_table(const fs::path& path, std::string_view model) {
  const MeasurementTable t(path);
  // The full-precision column is TF32 on the A100 table, FP32 on the V100 one.
  const bool tf32 = t.has("Throughput - TF32");
  const std::string full_column = tf32 ? "Throughput - TF32" : "Throughput - FP32";
  std::vector<DleRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    DleRow r;
    r.model = std::string(model);
    r.line = t.line(i);
    r.section = t.field(i, "section");
    r.gpus = t.integer(i, "GPUs");
    r.model_size = t.field(i, "Model size");
    r.batch_per_gpu = dle_batch(t, i, "Batch size / GPU");
    r.full_precision = tf32 ? "tf32" : "fp32";
    r.full_precision_records_per_s = dle_throughput(t, i, full_column);
    r.amp_records_per_s = dle_throughput(t, i, "Throughput - mixed precision");
    require_positive(t, r.line, {{r.gpus, "GPUs"}});
    if (r.section.find("DGX A100") != std::string::npos) {
      r.system = "dgx-a100";
    } else if (r.section.find("DGX-1") != std::string::npos) {
      r.system = "dgx-1";
    } else if (r.section.find("DGX-2") != std::string::npos) {
      r.system = "dgx-2";
    } else {
      throw t.bad_value(i, "section", r.section, "a DGX A100, DGX-1 or DGX-2 section");
    }
    if (r.gpus * r.batch_per_gpu != kDleGlobalBatch) {
      throw WorkloadTableError(fmt::format(
          "{}:{}: column `Batch size / GPU`: {} GPUs x {} != the global batch {} (main.py's "
          "--batch_size default, which the README's commands keep)",
          t.file(), r.line, r.gpus, r.batch_per_gpu, kDleGlobalBatch));
    }
    rows.push_back(r);
  }
  return rows;
}

std::vector<DleInferenceRow> read_dle_inference_table(const fs::path& path) {
  const MeasurementTable t(path);
  const bool tf32 = t.has("Throughput Avg - TF32 - CUDA Graphs OFF");
  const std::string full_column =
      tf32 ? "Throughput Avg - TF32 - CUDA Graphs OFF" : "Throughput Avg - FP32 - CUDA Graphs OFF";
  const std::string full_graphs_column =
      tf32 ? "Throughput Avg - TF32 - CUDA Graphs ON" : "Throughput Avg - FP32 - CUDA Graphs ON";
  std::vector<DleInferenceRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    DleInferenceRow r;
    r.line = t.line(i);
    r.section = t.field(i, "section");
    r.batch = t.integer(i, "Batch size");
    r.full_precision = tf32 ? "tf32" : "fp32";
    r.full_precision_records_per_s = dle_throughput(t, i, full_column);
    r.amp_records_per_s =
        dle_throughput(t, i, "Throughput Avg - mixed precision - CUDA Graphs OFF");
    // The CUDA-graphs-on columns are optional: without them the graphs rows are skipped.
    if (t.has(full_graphs_column)) {
      r.full_precision_graphs_records_per_s = dle_throughput(t, i, full_graphs_column);
    }
    if (t.has("Throughput Avg - mixed precision - CUDA Graphs ON")) {
      r.amp_graphs_records_per_s =
          dle_throughput(t, i, "Throughput Avg - mixed precision - CUDA Graphs ON");
    }
    require_positive(t, r.line, {{r.batch, "Batch size"}});
    if (r.section.find("A100") != std::string::npos) {
      r.system = "dgx-a100";
    } else if (r.section.find("DGX-1") != std::string::npos) {
      r.system = "dgx-1";
    } else {
      throw t.bad_value(i, "section", r.section, "an A100 or DGX-1 section");
    }
    rows.push_back(r);
  }
  return rows;
}

DleTables read_dle_tables(const fs::path& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  const ConfigNode root = doc.root();
  read_source(root);
  DleTables tables;
  for (const auto& [name, node] : root.child("models").map_entries()) {
    node.get_positive_int("frequency_threshold");
    std::vector<int64_t> rows = node.get_int_list("rows");
    if (rows.empty()) node.child("rows").fail("needs at least one table");
    for (const ConfigNode& item : node.child("rows").items()) {
      if (item.as_int() <= 0) item.fail("a table needs at least one row");
    }
    tables.emplace(name, std::move(rows));
  }
  doc.check_all_keys_used();
  return tables;
}

}  // namespace upsim::cli

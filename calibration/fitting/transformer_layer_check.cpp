#include "calibration/fitting/transformer_layer_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "calibration/fitting/kernel_validation.h"

namespace upsim {
namespace {

// GPT-3 175B (Brown et al., arXiv 2005.14165, Table 2.1) as LLMCompass runs it
// (ae/figure5/ijkl/test_transformer.py): batch 8, prefill sequence 2048, decode after 1024
// generated tokens, TP 4.
constexpr int64_t kBatch = 8;
constexpr int64_t kPrefillSequence = 2048;
constexpr int64_t kOutputTokens = 1024;
constexpr int64_t kDModel = 12288;
constexpr int64_t kHeads = 96;
constexpr int64_t kTensorParallel = 4;
constexpr int64_t kHeadDim = kDModel / kHeads;
constexpr int64_t kHeadsPerGpu = kHeads / kTensorParallel;
/// Keys the decode step attends over: the cache of s + output_token_length tokens plus the new
/// one (transformer.py concatenates k_T to K_cache before Q_mul_K).
constexpr int64_t kDecodeKeys = kPrefillSequence + kOutputTokens + 1;
constexpr size_t kRows = 12;

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

/// Appends one kernel op's row to `check`, with its error, and adds it to the sums and the max.
void add_kernel_row(LayerCheck& check, std::string name, double measured, double predicted) {
  LayerCheckRow row;
  row.name = std::move(name);
  row.measured_seconds = measured;
  row.predicted_seconds = predicted;
  row.error = predicted / measured - 1.0;
  check.kernel_measured_seconds += measured;
  check.kernel_predicted_seconds += predicted;
  check.kernel_max_abs_error = std::max(check.kernel_max_abs_error, std::abs(row.error));
  check.kernel_rows.push_back(std::move(row));
}

/// The geomean |error| of the kernel rows (0 without rows).
void finish_kernel_rows(LayerCheck& check) {
  std::vector<double> errors;
  for (const LayerCheckRow& row : check.kernel_rows)
    errors.push_back(row.error);
  if (!errors.empty()) check.kernel_geomean_abs_error = geomean_abs_error(errors);
}

}  // namespace

std::string_view layer_phase_name(LayerPhase phase) {
  return phase == LayerPhase::kPrefill ? "prefill" : "decode";
}

std::vector<LayerKernelOp> llmcompass_gpt3_layer_ops(LayerPhase phase) {
  const DType f16 = DType::kFp16;
  const bool prefill = phase == LayerPhase::kPrefill;
  const int64_t tokens = prefill ? kBatch * kPrefillSequence : kBatch;  // rows of X per GPU
  const int64_t queries = prefill ? kPrefillSequence : 1;               // per sequence and head
  const int64_t keys = prefill ? kPrefillSequence : kDecodeKeys;
  const int64_t bh = kBatch * kHeadsPerGpu;
  const int64_t d = kDModel;
  const int64_t tp = kTensorParallel;
  std::vector<LayerKernelOp> ops;
  ops.push_back({"Q_K_V", "gemm", gemm_kernel(f16, 1, tokens, d / tp, d), 3.0});
  ops.push_back({"Q_mul_K", "gemm", gemm_kernel(f16, bh, queries, keys, kHeadDim)});
  ops.push_back({"A_mul_V", "gemm", gemm_kernel(f16, bh, queries, kHeadDim, keys)});
  ops.push_back({"Wo_proj", "gemm", gemm_kernel(f16, 1, tokens, d, d / tp)});
  ops.push_back({"W1_proj", "gemm", gemm_kernel(f16, 1, tokens, 4 * d / tp, d)});
  ops.push_back({"W2_proj", "gemm", gemm_kernel(f16, 1, tokens, d, 4 * d / tp)});
  ops.push_back(
      {"Softmax", "softmax", memory_op_kernel(MemoryOp::kSoftmax, f16, bh * queries, keys)});
  const KernelDesc ln = memory_op_kernel(MemoryOp::kLayerNorm, f16, tokens, d);
  ops.push_back({"LayerNorm_MHA", "layernorm", ln});
  ops.push_back({"LayerNorm_FFN", "layernorm", ln});
  ops.push_back({"GeLU", "gelu", memory_op_kernel(MemoryOp::kGelu, f16, 1, tokens * 4 * d / tp)});
  return ops;
}

int64_t llmcompass_gpt3_all_reduce_bytes(LayerPhase phase) {
  const int64_t tokens = phase == LayerPhase::kPrefill ? kBatch * kPrefillSequence : kBatch;
  return tokens * kDModel * dtype_bytes(DType::kFp16);
}

std::vector<double> read_llmcompass_layer_latencies(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw CalibrationDataError(fmt::format("{}: cannot read the file", path.string()));
  std::vector<double> out;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    const std::string text = trim(line);
    if (text.empty()) continue;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    const bool whole = end == text.c_str() + text.size();
    if (!whole || errno != 0 || !(v > 0.0) || !std::isfinite(v)) {
      throw CalibrationDataError(fmt::format(
          "{}:{}: expected one positive latency in seconds per line, got `{}`{}", path.string(),
          number, text,
          end != text.c_str() && !whole ? " (two numbers run together? the file has one per line)"
                                        : ""));
    }
    out.push_back(v);
  }
  if (out.size() != kRows) {
    throw CalibrationDataError(
        fmt::format("{}: expected {} latencies (10 kernel ops and 2 all-reduces), got {}",
                    path.string(), kRows, out.size()));
  }
  return out;
}

double predicted_layer_op_seconds(const CalibratedKernelCost& model, const DeviceProfile& device,
                                  const LayerKernelOp& op) {
  KernelMeasurement m;
  m.op = op.harness_op;
  m.kernel = op.kernel;
  return predicted_measurement_seconds(model, m, device) * op.calls;
}

LayerCheck check_llmcompass_gpt3_layer(LayerPhase phase, const std::vector<double>& measured,
                                       const CalibratedKernelCost& model,
                                       const DeviceProfile& device) {
  const std::vector<LayerKernelOp> ops = llmcompass_gpt3_layer_ops(phase);
  if (measured.size() < ops.size()) {
    throw CalibrationDataError(
        fmt::format("layer check: {} latencies for {} ops", measured.size(), ops.size()));
  }
  LayerCheck check;
  check.phase = phase;
  for (size_t i = 0; i < ops.size(); ++i) {
    add_kernel_row(check, ops[i].name, measured[i],
                   predicted_layer_op_seconds(model, device, ops[i]));
  }
  finish_kernel_rows(check);
  return check;
}

std::string format_layer_check(const LayerCheck& c) {
  const auto line = [](std::string_view name, double measured, double predicted) {
    return fmt::format("  {:<16} {:>13.1f} {:>13.1f} {:>8.2f}%\n", name, measured * 1e6,
                       predicted * 1e6, 100.0 * (predicted / measured - 1.0));
  };
  std::string out =
      fmt::format("  {:<16} {:>13} {:>13} {:>9}\n", "op", "measured us", "predicted us", "error");
  for (const LayerCheckRow& r : c.kernel_rows)
    out += line(r.name, r.measured_seconds, r.predicted_seconds);
  out += line("kernels sum", c.kernel_measured_seconds, c.kernel_predicted_seconds);
  out += fmt::format("  kernels: geomean |e| {:.2f}%, max |e| {:.2f}% over {} ops\n",
                     100.0 * c.kernel_geomean_abs_error, 100.0 * c.kernel_max_abs_error,
                     c.kernel_rows.size());
  if (c.collective_rows.empty()) return out;
  double measured = c.kernel_measured_seconds;
  double predicted = c.kernel_predicted_seconds;
  for (const LayerCheckRow& r : c.collective_rows) {
    out += line(r.name, r.measured_seconds, r.predicted_seconds);
    measured += r.measured_seconds;
    predicted += r.predicted_seconds;
  }
  out += line("layer sum", measured, predicted);
  return out;
}

bool same_layer_kernel(const KernelMeasurement& m, const LayerKernelOp& op) {
  const KernelDesc& a = m.kernel;
  const KernelDesc& b = op.kernel;
  return m.op == op.harness_op && a.cls == b.cls && a.dtype == b.dtype && a.batch == b.batch &&
         a.m == b.m && a.n == b.n && a.k == b.k && a.bytes_read == b.bytes_read &&
         a.bytes_written == b.bytes_written && a.row_elements == b.row_elements;
}

LayerCheck check_gpt3_layer_against_tables(LayerPhase phase,
                                           const std::vector<KernelMeasurement>& rows,
                                           const CalibratedKernelCost& model,
                                           const DeviceProfile& device,
                                           std::vector<std::string>& missing) {
  LayerCheck check;
  check.phase = phase;
  for (const LayerKernelOp& op : llmcompass_gpt3_layer_ops(phase)) {
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const KernelMeasurement& m) {
      return same_layer_kernel(m, op);
    });
    if (row == rows.end()) {
      missing.push_back(op.name);
      continue;
    }
    add_kernel_row(check, row->held_out ? op.name : op.name + " [train]", row->seconds * op.calls,
                   predicted_measurement_seconds(model, *row, device) * op.calls);
  }
  finish_kernel_rows(check);
  return check;
}

std::vector<std::string> layer_shapes_in_sweeps(const std::vector<KernelMeasurement>& sweeps) {
  std::vector<std::string> out;
  for (LayerPhase phase : {LayerPhase::kPrefill, LayerPhase::kDecode}) {
    for (const LayerKernelOp& op : llmcompass_gpt3_layer_ops(phase)) {
      for (const KernelMeasurement& m : sweeps) {
        if (!same_layer_kernel(m, op)) continue;
        out.push_back(fmt::format("{} ({}) = {} ({})", op.name, layer_phase_name(phase), m.origin,
                                  m.held_out ? "held out" : "training"));
      }
    }
  }
  return out;
}

}  // namespace upsim

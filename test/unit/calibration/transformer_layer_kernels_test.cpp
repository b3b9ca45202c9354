// The calibrated kernel model on the kernels of a real transformer layer: LLMCompass' measured
// per-op times of one GPT-3 175B layer on A100, prefill (test/data/llmcompass/
// transformer_A100.csv) and one decode step (transformerAR_A100.csv), see their SOURCES.md and
// calibration/fitting/transformer_layer_check.h for the shapes and how each op was timed, priced
// with the shipped A100 calibration. Held out: the fit reads the matmul / softmax / layernorm /
// gelu sweeps only; the one layer shape that coincides with a sweep row is checked below. (The two
// all-reduce rows are collectives, priced by `upsim validate kernels --layer` on the 4x A100 NVLink
// fabric and checked in test/unit/tools/cli_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/kernel_measurements.h"
#include "calibration/fitting/kernel_validation.h"
#include "calibration/fitting/transformer_layer_check.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;
const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

// Bounds: the target is every op within 15% and the sum of the ten kernel ops within 5%. Where
// the model does not reach it, the bound pins the measured gap (a change that widens it fails)
// and the reason is stated:
//  - Q_mul_K prefill (192 x [2048 x 128] x [128 x 2048]): k = 128 and a 2048 x 2048 fp16
//    output per batch (1.6 GB written). Each 128 x 128 tile runs two 64-deep K steps and then
//    writes its 32 KiB: the mainloop cannot hide the epilogue and the write traffic, which the
//    roofline max(compute, memory) overlaps fully. No sweep GEMM is write-dominated (the matmul
//    sweeps are N = K), so nothing fitted says how much of the two adds up.
//  - A_mul_V prefill / decode (the 1.6 GB / 151 MB score or value matrix streamed once): the
//    memory term at the GEMM's fitted streaming rate (memory_scale, identified by large
//    weight-streaming GEMVs: the decode projections W1 / W2 at +1%) is too fast for a bmm whose
//    compute is 70% of its memory time (prefill) or whose 192 CTAs are fewer than two per SM
//    (decode). Same reason: compute / memory overlap is not identified by the sweeps.
//  - Softmax prefill (+18%): 786432 rows of 4 KiB, 6x the traffic of the largest softmax sweep
//    point. The sweep's own largest points are over-predicted too (rows of 8 KiB: +3.3%, +6.0%,
//    +16.8% at 8192, 16384, 32768 rows): the measured softmax keeps getting more efficient with
//    size where the fitted curve has saturated, and the layer lies beyond the sweep.
//  - W1 / W2 and Q_mul_K decode (+17%): the weight-streaming GEMVs' rate is the fit's
//    memory_scale, now set by Vidur's in-model A100 GEMVs (kernel times, 1.46-1.64 TB/s:
//    test/data/vidur), 0.78 of the SXM part's HBM. LLMCompass' decode projections, less the
//    fitted harness offset of its sweeps, imply about 1.9 TB/s, above the 1.75 TB/s of
//    BabelStream's read-only dot kernel on the SXM part (test/data/azure-ai-benchmarking): the
//    sweep harness's per-call offset at these sizes is what the wall-clock times do not pin.
// The LayerNorm rows are the harness as it stands (why:
// calibration/fitting/transformer_layer_check.h); decode LayerNorm is the harness floor, +9.5%.
// With the all-reduces (`upsim validate kernels --layer`) the prefill layer is -3.6% and the
// decode layer -0.8%; the decode all-reduces of 192 KiB are +36% (LLMCompass' own all-reduce
// sweep, allreduce_A100x4_nvlink_measured.csv, interpolates to about 32 us at that size,
// against 26.04 us in the layer file).
constexpr double kPerOpTarget = 0.15;
constexpr double kSumTarget = 0.05;
const std::map<std::string, double> kPinnedPrefill{
    {"Q_mul_K", 0.33}, {"A_mul_V", 0.17}, {"Softmax", 0.19}};
const std::map<std::string, double> kPinnedDecode{
    {"A_mul_V", 0.23}, {"Q_mul_K", 0.18}, {"W1_proj", 0.18}, {"W2_proj", 0.18}};
// The decode layer's sum, pinned with its GEMVs (+9.3%).
constexpr double kDecodeSumTarget = 0.10;

CalibratedKernelCost shipped_a100(const HardwareProfile& hw) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  return CalibratedKernelCost(load_kernel_calibration(doc.root()), hw.achievable);
}

HardwareProfile a100_profile() {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_80gb.yaml");
  return load_hardware_profile(doc.root());
}

void check_phase(LayerPhase phase, const std::filesystem::path& file,
                 const std::map<std::string, double>& pinned, double sum_bound) {
  const HardwareProfile a100 = a100_profile();
  const CalibratedKernelCost model = shipped_a100(a100);
  const std::vector<double> measured = read_llmcompass_layer_latencies(file);
  const LayerCheck check = check_llmcompass_gpt3_layer(phase, measured, model, a100.device);
  std::printf("GPT-3 175B layer, %s, A100 TP 4 (LLMCompass %s), held out\n%s",
              std::string(layer_phase_name(phase)).c_str(), file.filename().c_str(),
              format_layer_check(check).c_str());
  for (const LayerCheckRow& row : check.kernel_rows) {
    const auto it = pinned.find(row.name);
    const double bound = it == pinned.end() ? kPerOpTarget : it->second;
    EXPECT_LT(std::abs(row.error), bound) << row.name;
  }
  const double sum_error = check.kernel_predicted_seconds / check.kernel_measured_seconds - 1.0;
  EXPECT_LT(std::abs(sum_error), sum_bound);
}

TEST(TransformerLayerKernels, A100Gpt3LayerPrefillPerOp) {
  check_phase(LayerPhase::kPrefill, kData / "llmcompass" / "transformer_A100.csv", kPinnedPrefill,
              kSumTarget);
}

TEST(TransformerLayerKernels, A100Gpt3LayerDecodePerOp) {
  check_phase(LayerPhase::kDecode, kData / "llmcompass" / "transformerAR_A100.csv", kPinnedDecode,
              kDecodeSumTarget);
}

TEST(TransformerLayerKernels, DecodeShapesFollowLlmCompassDriver) {
  // The decode step attends over s + output_token_length + 1 = 3073 keys; its all-reduces move
  // 8 x 12288 fp16 per GPU, the prefill's 8 x 2048 x 12288.
  const std::vector<LayerKernelOp> ops = llmcompass_gpt3_layer_ops(LayerPhase::kDecode);
  ASSERT_EQ(ops.size(), 10u);
  EXPECT_EQ(ops[1].name, "Q_mul_K");
  EXPECT_EQ(ops[1].kernel.batch, 192);
  EXPECT_EQ(ops[1].kernel.m, 1);
  EXPECT_EQ(ops[1].kernel.n, 3073);
  EXPECT_EQ(ops[1].kernel.k, 128);
  EXPECT_EQ(ops[2].kernel.k, 3073);
  EXPECT_EQ(llmcompass_gpt3_all_reduce_bytes(LayerPhase::kDecode), 8 * 12288 * 2);
  EXPECT_EQ(llmcompass_gpt3_all_reduce_bytes(LayerPhase::kPrefill), 8 * 2048 * 12288 * 2);
}

// The composite check against per-kernel tables (bench/gpu's gemm.csv / memory.csv hold the
// layer's shapes): every op finds its row by op, dtype and shape, is predicted as that row, and
// an op without a row is reported missing and left out of the sums. Rows here are made from the
// layer's own kernels with times 25% above the model's, so every error is 1 / 1.25 - 1.
TEST(TransformerLayerKernels, CompositeAgainstMeasuredKernelTables) {
  const HardwareProfile a100 = a100_profile();
  const CalibratedKernelCost model = shipped_a100(a100);
  for (LayerPhase phase : {LayerPhase::kPrefill, LayerPhase::kDecode}) {
    std::vector<KernelMeasurement> rows;
    for (const LayerKernelOp& op : llmcompass_gpt3_layer_ops(phase)) {
      if (op.name == "LayerNorm_FFN") continue;  // the same kernel as LayerNorm_MHA
      KernelMeasurement m;
      m.op = op.harness_op;
      m.kernel = op.kernel;
      m.seconds = 1.0;
      m.seconds = 1.25 * predicted_measurement_seconds(model, m, a100.device);
      m.held_out = rows.size() % 2 == 1;
      rows.push_back(m);
    }
    std::vector<std::string> missing;
    LayerCheck check = check_gpt3_layer_against_tables(phase, rows, model, a100.device, missing);
    EXPECT_TRUE(missing.empty());
    ASSERT_EQ(check.kernel_rows.size(), 10u);
    for (const LayerCheckRow& row : check.kernel_rows)
      EXPECT_NEAR(row.error, 1.0 / 1.25 - 1.0, 1e-12) << row.name;
    EXPECT_EQ(check.kernel_rows[0].name, "Q_K_V [train]");  // training half: in-sample
    EXPECT_EQ(check.kernel_rows[1].name, "Q_mul_K");
    // Q_K_V is one projection timed and counted three times.
    EXPECT_DOUBLE_EQ(check.kernel_rows[0].measured_seconds, 3.0 * rows[0].seconds);
    rows.erase(rows.begin() + 1);  // no Q_mul_K row
    missing.clear();
    check = check_gpt3_layer_against_tables(phase, rows, model, a100.device, missing);
    EXPECT_EQ(missing, std::vector<std::string>{"Q_mul_K"});
    EXPECT_EQ(check.kernel_rows.size(), 9u);
  }
}

TEST(TransformerLayerKernels, LatencyFileReaderRejectsRunTogetherNumbers) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "upsim_layer_run_together.csv";
  {
    std::ofstream out(path);
    out << "0.1\n0.2\n0.3\n0.4\n0.5\n0.6\n0.7\n0.8\n0.9\n1.0e-05\n2.6e-052.6e-05\n";
  }
  try {
    (void)read_llmcompass_layer_latencies(path);
    ADD_FAILURE() << "expected a CalibrationDataError";
  } catch (const CalibrationDataError& e) {
    EXPECT_NE(std::string(e.what()).find(":11:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("run together"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// Held out: no layer shape but the prefill's W1 / W2 appears in the sweeps the fit reads; that
// shape (16384 x 12288 x 12288) is a matmul sweep row of the training half (a separate
// measurement of the same shape: 17.03 ms in the sweep, 17.46 ms in the layer).
TEST(TransformerLayerKernels, LayerShapesVersusFitSweeps) {
  const std::vector<KernelMeasurement> sweeps = read_llmcompass_dir(kData / "llmcompass", "A100");
  const std::vector<std::string> seen = layer_shapes_in_sweeps(sweeps);
  for (const std::string& line : seen)
    std::printf("%s\n", line.c_str());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].rfind("W1_proj (prefill) = ", 0), 0u) << seen[0];
  EXPECT_EQ(seen[1].rfind("W2_proj (prefill) = ", 0), 0u) << seen[1];
  for (const std::string& line : seen)
    EXPECT_NE(line.find("(training)"), std::string::npos) << line;
}

}  // namespace
}  // namespace upsim

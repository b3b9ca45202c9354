// Accuracy bounds of the calibrated kernel model:
//  - fitted on the training half of the LLMCompass A100 sweeps (test/data/llmcompass, copies of
//    test/data/llmcompass; split rule in calibration/fitting/kernel_measurements.h), every op stays
//    within 10% geomean |e| on the held-out half (the table is printed);
//  - the shipped configs/calibration/a100_llmcompass.yaml is exactly what that fit writes;
//  - the GEMM model's throughput at the mamf best shapes (test/data/hardware-specs, copy of
//    test/data/hardware-specs) is within 5% of the measured best achievable TFLOP/s on A100
//    and H100. The asymptote is the profile's achievable fraction, itself mamf / peak, so this
//    checks the fitted shape terms (tiles, waves, k_overhead) at those shapes; on H100 the
//    tile and k_overhead fitted on A100 data are used as they are.
//
// The GEMM model on a second GPU and a second dtype: XLA's measured matmul table for H100
// (test/data/xla-matmul: kernel-only times of 375 batched shapes in bf16 and in tf32; see its
// SOURCES.md). The model is meant to give GEMM models per dtype and for models that generalise to
// GPUs they were not fitted on:
//  - fitted on the training half of the H100 table, bf16 and tf32 each stay within the bound
//    on their held-out half (a row per dtype, printed), tf32 with its own compute_scale;
//  - fused attention on H100, fitted per implementation (FlashAttention-2, FlashAttention-3,
//    cuDNN) on the training half of the FlashAttention-3 paper's published figures
//    (test/data/flash-attention-3), stays within its bounds on the held-out half, per direction;
//  - the memory-bound kernels of Liger-Kernel's published H100 benchmarks
//    (test/data/liger-kernel: RMSNorm forward, ReLU squared forward and backward, Megatron's
//    SwiGLU and cross-entropy forward), fitted on their training halves, stay within their
//    bounds on the held-out halves, the two Megatron ops on curves of their own;
//  - configs/calibration/h100_xla.yaml is exactly what that fit writes;
//  - the A100 calibration (LLMCompass fp16 sweeps) prices the H100 kernels that take more than
//    50 us within the bounds: only the H100 profile (peaks, achievable fractions, SM count)
//    changes. Smaller kernels are left out of that check because the A100 sweep's harness
//    (wall-clock time per call) hid their kernel-only time from the A100 fit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/fit_kernel_calibration.h"
#include "calibration/fitting/kernel_measurements.h"
#include "calibration/fitting/kernel_validation.h"
#include "calibration/hardware_profile.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;
const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
// The source line the shipped file records (it cites the shared data, not the test copy).
constexpr const char* kSource =
    "LLMCompass A100 sweeps test/data/llmcompass/{matmul,softmax,layernorm,gelu}_A100.csv "
    "(BSD-3-Clause; copies in test/data/llmcompass); Liger-Kernel's A100 benchmark of PyTorch's "
    "cross-entropy forward, test/data/liger-kernel/a100_torch_cross_entropy_forward.csv; cuBLAS "
    "fp32 GEMMs on A100 80GB PCIe from a Triton issue, "
    "test/data/triton-matmul/a100_pcie_fp32_cublas.csv; Vidur's in-model fp16 GEMM kernel times "
    "of Llama-2 7B and 70B layers on A100 80GB PCIe, "
    "test/data/vidur/a100_llama2_{7b,70b}_gemm.csv; "
    "in-model tf32 GEMM kernel times of a recommendation model's training step on A100 SXM4 40GB "
    "from a HolisticTraceAnalysis trace, "
    "test/data/holistic-trace-analysis/a100_tf32_recsys_gemm.csv; FlashAttention-2 and v1 "
    "attention forward plus backward from the flash-attention repository's A100 figure, "
    "test/data/flash-attention-2/a100_attention_fwd_bwd_tflops.csv (see their SOURCES.md)";
// cuBLAS fp32 (SIMT) GEMMs measured on the A100 PCIe part (published, GPU time per call, 24
// square shapes; measured held-out 3.98%, 12 points), priced on its profile in the A100 fit.
constexpr const char* kA100Fp32Table = "a100_pcie_fp32_cublas.csv";
// PyTorch's CrossEntropyLoss forward on A100 (published, kernel time, 6 sizes; measured
// held-out 2.93%, 3 points), fitted with the LLMCompass sweeps into the shipped A100 file.
constexpr const char* kA100CrossEntropyTable = "a100_torch_cross_entropy_forward.csv";
// Vidur's in-model fp16 GEMM kernel times on A100 (published, kernel time, Llama-2 7B and 70B
// layers at 1-4096 tokens and TP 1-8; ASSUMPTION: the 80GB PCIe part, test/data/vidur/
// SOURCES.md), priced on the PCIe profile: they fit the fp16/bf16 rate (compute_scale) that the
// LLMCompass harness's compute_speedup is then relative to.
constexpr std::array<const char*, 2> kA100VidurTables = {"a100_llama2_7b_gemm.csv",
                                                         "a100_llama2_70b_gemm.csv"};
// tf32 GEMM kernel times inside a recommendation model's training step on A100 SXM4 40GB
// (published trace, kernel time, 117 shapes; calls that overlapped an NCCL kernel left out),
// priced on that part's profile: they fit the tf32 class's tile, k_overhead and memory_scale;
// no row is large enough to measure its rate, so compute_scale stays 1 (fit_kernel_calibration).
constexpr const char* kA100Tf32Table = "a100_tf32_recsys_gemm.csv";

// The source line the shipped B200 file records.
constexpr const char* kB200Source =
    "XLA matmul perf table for sm_100_B200, test/data/xla-matmul/b200_xla_matmul.csv; cuDNN and "
    "FlashAttention-2 attention from cuDNN-frontend's published B200 benchmark, "
    "test/data/cudnn-frontend/b200_sdpa_bf16.csv; Liger-Kernel's B200 benchmarks of PyTorch "
    "softmax, LayerNorm and cross-entropy and Liger's RoPE, test/data/liger-kernel/b200_*.csv; "
    "FlashInfer's fused add + RMSNorm kernel on B200 as published with hp_rms_norm, "
    "test/data/hp-rms-norm/b200_flashinfer_fused_add_rmsnorm.csv (see their SOURCES.md)";

// The source line the shipped V100 file records.
constexpr const char* kV100Source =
    "DeepBench's V100 (DGX-1) GEMM results, test/data/deepbench/v100_dgx1_gemm.csv; NeuSight's "
    "(ASPLOS'25) V100-PCIE-32GB memory-bound ops, test/data/neusight/v100_pcie_memory_ops.csv "
    "(see their SOURCES.md)";

// The source line the shipped H100 file records.
constexpr const char* kH100Source =
    "XLA matmul perf table for sm_90, test/data/xla-matmul/h100_xla_matmul.csv; H100 attention "
    "figures of the FlashAttention-3 paper, test/data/flash-attention-3/h100_attention_tflops.csv, "
    "and FlashAttention v1 (with FlashAttention-2, held out) from the flash-attention "
    "repository's H100 figure, test/data/flash-attention-2/h100_attention_fwd_bwd_tflops.csv; "
    "Liger-Kernel's H100 benchmarks of RMSNorm forward, ReLU squared, Megatron SwiGLU, "
    "Megatron cross-entropy forward and torch.nn.LayerNorm forward, "
    "test/data/liger-kernel/h100_*.csv; torch.softmax from a "
    "published H100 softmax benchmark, test/data/softmax-kernel-h100/h100_torch_softmax.csv; "
    "NeuSight's (ASPLOS'25) H100 fp32 GEMMs, test/data/neusight/h100_fp32_gemm.csv (see their "
    "SOURCES.md)";
// The source line configs/calibration/h100_cuda12_1.yaml records.
constexpr const char* kH100Cuda121Source =
    "XLA matmul perf table for sm_90, test/data/xla-matmul/h100_xla_matmul.csv (its harness) "
    "and the in-model GEMM kernel times of CUDA 12.1's cuBLAS in Vidur's H100 profiles of the "
    "Llama-2-7B and CodeLlama-34B layers (the GEMM rate; Llama-2-70B's profile held out), "
    "test/data/vidur/h100_*_gemm.csv; H100 attention figures of the FlashAttention-3 paper, "
    "test/data/flash-attention-3/h100_attention_tflops.csv, and FlashAttention v1 (with "
    "FlashAttention-2, held out) from the flash-attention repository's H100 figure, "
    "test/data/flash-attention-2/h100_attention_fwd_bwd_tflops.csv; Liger-Kernel's H100 "
    "benchmarks of RMSNorm forward, ReLU squared, Megatron SwiGLU, Megatron cross-entropy "
    "forward and torch.nn.LayerNorm forward, test/data/liger-kernel/h100_*.csv; torch.softmax "
    "from a published H100 softmax benchmark, "
    "test/data/softmax-kernel-h100/h100_torch_softmax.csv; NeuSight's (ASPLOS'25) H100 fp32 "
    "GEMMs, test/data/neusight/h100_fp32_gemm.csv (see their SOURCES.md)";
// The H100 attention table as the shipped file's fit reads it: relative to the repository root,
// so that the sections' source names the file as the README's command does.
constexpr const char* kH100AttentionTable = "test/data/flash-attention-3/h100_attention_tflops.csv";
// The flash-attention repository's forward-plus-backward figures (FlashAttention-2 and v1), read
// the same way.
constexpr const char* kH100AttentionPairTable =
    "test/data/flash-attention-2/h100_attention_fwd_bwd_tflops.csv";
constexpr const char* kA100AttentionPairTable =
    "test/data/flash-attention-2/a100_attention_fwd_bwd_tflops.csv";
// The H100 RMSNorm forward table (one fused kernel per call, published by Liger-Kernel), read
// the same way.
constexpr const char* kH100RmsNormTable = "test/data/liger-kernel/h100_rms_norm_forward.csv";
// Bound for its held-out error (measured: 1.51% geomean, 2.47% at most, 3 points).
constexpr double kRmsNormHeldOutBound = 0.08;
// The other Liger-Kernel H100 tables (published, one op each), in the order the shipped file's
// fit reads them, with bounds for their held-out geomean error. Measured: relu 1.62% (8 points:
// one Triton kernel, forward and backward), swiglu 8.91% (3: Megatron's jit-fused forward, whose
// smallest size runs faster than its trend), cross_entropy 1.88% (3: Megatron's fused forward),
// softmax 21.9% (3: torch.softmax, whose 4096-element rows run slower than longer ones),
// layernorm 2.55% (2: torch.nn.LayerNorm forward, fp32, on a curve of its own).
struct H100MemoryTable {
  const char* path;
  const char* op;
  size_t rows;
  double held_out_bound;
};
constexpr std::array<H100MemoryTable, 5> kH100MemoryTables{{
    {"test/data/liger-kernel/h100_relu_squared.csv", "relu", 16, 0.05},
    {"test/data/liger-kernel/h100_megatron_swiglu_forward.csv", "swiglu", 6, 0.15},
    {"test/data/liger-kernel/h100_megatron_cross_entropy_forward.csv", "cross_entropy", 6, 0.05},
    {"test/data/softmax-kernel-h100/h100_torch_softmax.csv", "softmax", 7, 0.30},
    {"test/data/liger-kernel/h100_torch_layer_norm_forward.csv", "layernorm", 5, 0.08},
}};
// NeuSight's published H100 fp32 GEMMs (PyTorch's FFMA cuBLAS kernels, 285 rows of at least 1
// ms; measured held out 3.26% over 142 points), read after the memory tables.
constexpr const char* kH100Fp32Table = "test/data/neusight/h100_fp32_gemm.csv";
// Bounds for held-out attention error per implementation and direction (measured: geomean
// 0.87% .. 3.85%, largest single point 17.9%, cuDNN forward at head_dim 256, sequence 1k).
constexpr double kAttentionHeldOutBound = 0.06;
constexpr double kAttentionHeldOutMaxBound = 0.20;

// Bound for held-out GEMM error (measured: bf16 2.64%, tf32 9.12%).
constexpr double kH100HeldOutBound = 0.10;
// The A100 calibration on H100 kernels longer than kMinSeconds. bf16 measured 9.24% (bound:
// the same-GPU bound of 10%). tf32 measured 13.3% with the A100 tf32 class fitted on in-model
// A100 GEMMs (24.2% with the default class it replaced): its rate is the profile's
// (compute_scale 1), while H100's own tf32 rows fit compute_scale 0.774.
constexpr double kCrossGpuBf16Bound = 0.10;
constexpr double kCrossGpuTf32Bound = 0.16;
constexpr double kMinSeconds = 50e-6;

HardwareProfile profile(const std::string& file) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / file);
  return load_hardware_profile(doc.root());
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// A table under test/data, read by the path the README's command gives (relative to the
/// repository root), so that the rows' origins name it as the shipped file does.
std::vector<KernelMeasurement> rows_from_root(const char* table) {
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(kData.parent_path().parent_path());
  std::vector<KernelMeasurement> rows = read_measurement_csv(table);
  std::filesystem::current_path(previous);
  return rows;
}

/// The shipped calibration file `calibration` (configs/calibration/) on `hw`'s achievable
/// fractions.
CalibratedKernelCost shipped_file_model(const char* calibration, const HardwareProfile& hw) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / calibration);
  return CalibratedKernelCost(load_kernel_calibration(doc.root()), hw.achievable);
}

/// Appends the rows of `table`, measured on the GPU of `measured_on` (`--measured-on`), to
/// `data`; returns how many.
size_t append_measured_on(std::vector<KernelMeasurement>& data, const std::filesystem::path& table,
                          const std::shared_ptr<const HardwareProfile>& measured_on) {
  std::vector<KernelMeasurement> rows = read_measurement_csv(table);
  for (KernelMeasurement& row : rows)
    row.measured_on = measured_on;
  data.insert(data.end(), rows.begin(), rows.end());
  return rows.size();
}

CalibratedKernelCost shipped_model(const HardwareProfile& hw) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  return CalibratedKernelCost(load_kernel_calibration(doc.root()), hw.achievable);
}

TEST(KernelFitAccuracy, HeldOutErrorPerOpWithinTenPercentAndShippedFileIsTheFit) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  std::vector<KernelMeasurement> data = read_llmcompass_dir(kData / "llmcompass", "A100");
  const std::vector<KernelMeasurement> ce =
      read_measurement_csv(kData / "liger-kernel" / kA100CrossEntropyTable);
  ASSERT_EQ(ce.size(), 6u);
  data.insert(data.end(), ce.begin(), ce.end());
  const auto pcie = std::make_shared<const HardwareProfile>(profile("a100_pcie_80gb.yaml"));
  EXPECT_EQ(append_measured_on(data, kData / "triton-matmul" / kA100Fp32Table, pcie), 24u);
  for (const char* table : kA100VidurTables)
    EXPECT_EQ(append_measured_on(data, kData / "vidur" / table, pcie), 304u) << table;
  const auto sxm40 = std::make_shared<const HardwareProfile>(profile("a100_sxm4_40gb.yaml"));
  EXPECT_EQ(append_measured_on(data, kData / "holistic-trace-analysis" / kA100Tf32Table, sxm40),
            117u);
  const std::vector<KernelMeasurement> attention = rows_from_root(kA100AttentionPairTable);
  ASSERT_EQ(attention.size(), 48u);
  data.insert(data.end(), attention.begin(), attention.end());
  const CalibrationResult result = fit_kernel_calibration(data, a100, kSource);
  std::printf("%s", format_kernel_validation(result.validation).c_str());
  ASSERT_EQ(result.validation.size(), 9u);
  for (const KernelValidationRow& row : result.validation) {
    EXPECT_GE(row.held_out_points, row.op == "cross_entropy" ? 3u : 10u) << row.op;
    // tf32: in-model GEMMs of odd shapes (k 15-98304, n 1-19410, batches of 647 x 30 products),
    // where cuBLAS's kernel and split-K choice per shape (not modelled: one tile per class)
    // sets the time; 20.2% measured, 48% with the physics defaults this fit replaced.
    EXPECT_LT(row.held_out_geomean, row.op == "gemm/tf32" ? 0.22 : 0.10) << row.op;
  }
  // Attention forward plus backward (flash2, flash1): measured held out 2.01%, 3.72% (the
  // defaults this fit replaced: 5.27% on flash2, 44% on flash1).
  for (size_t i = 7; i < 9; ++i) {
    EXPECT_TRUE(result.validation[i].op.starts_with("attention_forward_backward/"));
    EXPECT_EQ(result.validation[i].held_out_points, 12u) << result.validation[i].op;
  }
  EXPECT_EQ(result.validation[5].op, "gemm/fp32");
  EXPECT_EQ(result.validation[6].op, "gemm/tf32");
  // No tf32 row is large enough to measure the class's rate: it keeps compute_scale 1 and the
  // fp16 class's memory_scale (rate_measurable, fit_kernel_calibration.cpp).
  const GemmParams& tf32_fit =
      result.calibration.gemm_by_dtype[static_cast<size_t>(DType::kTf32)].value();
  EXPECT_EQ(tf32_fit.compute_scale, 1.0);
  EXPECT_EQ(tf32_fit.memory_scale,
            result.calibration.gemm_by_dtype[static_cast<size_t>(DType::kFp16)]->memory_scale);
  // Physics: the fp32 fit never prices a GEMM above the fp32 peak, even at a huge K.
  const CalibratedKernelCost fitted(result.calibration, a100.achievable);
  const KernelDesc huge = gemm_kernel(DType::kFp32, 1, 8192, 8192, 65536);
  const double tflops =
      2.0 * 8192.0 * 8192.0 * 65536.0 / fitted.core_seconds(huge, a100.device) * 1e-12;
  EXPECT_LE(tflops, 19.5 * (1 + 1e-9));
  EXPECT_GT(tflops, 0.9 * 19.5);
  EXPECT_EQ(result.calibration.curve_of_op[static_cast<size_t>(MemoryOp::kCrossEntropy)],
            "cross_entropy");
  const std::string text = kernel_calibration_yaml(result.calibration, calibration_header(result));
  EXPECT_EQ(read_text(kConfigs / "calibration" / "a100_llmcompass.yaml"), text)
      << "configs/calibration/a100_llmcompass.yaml is stale: regenerate it with `upsim calibrate "
         "kernels --csv test/data/liger-kernel/"
      << kA100CrossEntropyTable << " --csv test/data/triton-matmul/" << kA100Fp32Table
      << " --measured-on test/data/triton-matmul/" << kA100Fp32Table
      << "=configs/hardware/a100_pcie_80gb.yaml"
      << " --csv test/data/vidur/a100_llama2_7b_gemm.csv --csv test/data/vidur/"
         "a100_llama2_70b_gemm.csv --measured-on test/data/vidur/a100_llama2_7b_gemm.csv="
         "configs/hardware/a100_pcie_80gb.yaml --measured-on test/data/vidur/"
         "a100_llama2_70b_gemm.csv=configs/hardware/a100_pcie_80gb.yaml --csv "
         "test/data/holistic-trace-analysis/"
      << kA100Tf32Table << " --measured-on test/data/holistic-trace-analysis/" << kA100Tf32Table
      << "=configs/hardware/a100_sxm4_40gb.yaml --csv " << kA100AttentionPairTable
      << " --hardware configs/hardware/a100_sxm4_80gb.yaml --source '" << kSource
      << "' --out configs/calibration/a100_llmcompass.yaml --force`";

  // validate_kernels on the shipped file gives the same table.
  const CalibratedKernelCost shipped = shipped_model(a100);
  EXPECT_EQ(format_kernel_validation(validate_kernels(data, shipped, a100.device)),
            format_kernel_validation(result.validation));
}

TEST(KernelFitAccuracy, FitIsDeterministic) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  std::vector<KernelMeasurement> gelu =
      read_llmcompass_elementwise(kData / "llmcompass" / "gelu_A100.csv", MemoryOp::kGelu);
  const CalibrationResult a = fit_kernel_calibration(gelu, a100, "gelu");
  const CalibrationResult b = fit_kernel_calibration(gelu, a100, "gelu");
  EXPECT_EQ(kernel_calibration_yaml(a.calibration, calibration_header(a)),
            kernel_calibration_yaml(b.calibration, calibration_header(b)));
}

/// Measured best achievable bf16 matmul of `accelerator` from the mamf table: TFLOP/s, M, N, K.
struct Mamf {
  double tflops = 0.0;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

Mamf mamf_row(const std::string& accelerator) {
  std::ifstream in(kData / "hardware-specs" / "mamf_max_achievable_matmul_tflops_bf16.csv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(accelerator + ",", 0) != 0) continue;
    // Accelerator,MAMF,Theory,Efficiency,Best Shape MxNxK,...
    std::stringstream fields(line);
    std::string name;
    std::string mamf;
    std::string theory;
    std::string efficiency;
    std::string shape;
    std::getline(fields, name, ',');
    std::getline(fields, mamf, ',');
    std::getline(fields, theory, ',');
    std::getline(fields, efficiency, ',');
    std::getline(fields, shape, ',');
    Mamf out;
    out.tflops = std::stod(mamf);
    char x = 0;
    std::stringstream dims(shape);
    dims >> out.m >> x >> out.n >> x >> out.k;
    return out;
  }
  ADD_FAILURE() << "no mamf row for " << accelerator;
  return {};
}

double predicted_tflops(const std::string& hardware_file, const Mamf& shape) {
  const HardwareProfile hw = profile(hardware_file);
  const CalibratedKernelCost model = shipped_model(hw);
  const KernelDesc gemm = gemm_kernel(DType::kBf16, 1, shape.m, shape.n, shape.k);
  const double seconds = model.core_seconds(gemm, hw.device);
  return 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
         static_cast<double>(shape.k) / seconds * 1e-12;
}

// MAMF (test/data/hardware-specs) is the best rate of a shape search: the shipped A100 file, on
// the A100 and H100 profiles, prices that shape below it (physics: no faster than the best
// published rate) and within 15%: its bf16 rate is fitted on in-model kernel times (Vidur's
// Llama-2 GEMMs, 0.915 of the profile's MAMF fraction; Azure's cuBLASLt table reaches 0.946 of
// MAMF at 16384^3), which run below the best shape's rate. Measured: -11.7% on both.
TEST(KernelFitAccuracy, LargeGemmThroughputBelowMamfOnA100AndH100) {
  const Mamf a100 = mamf_row("NVIDIA A100 SXM");
  const Mamf h100 = mamf_row("NVIDIA H100 SXM");
  EXPECT_EQ(a100.m, 1024);
  EXPECT_EQ(h100.k, 13312);
  const double a100_model = predicted_tflops("a100_sxm4_80gb.yaml", a100);
  const double h100_model = predicted_tflops("h100_sxm5_80gb.yaml", h100);
  std::printf("mamf A100 SXM %lldx%lldx%lld: measured %.1f, model %.1f TFLOP/s (%+.2f%%)\n",
              static_cast<long long>(a100.m), static_cast<long long>(a100.n),
              static_cast<long long>(a100.k), a100.tflops, a100_model,
              100.0 * (a100_model / a100.tflops - 1.0));
  std::printf("mamf H100 SXM %lldx%lldx%lld: measured %.1f, model %.1f TFLOP/s (%+.2f%%)\n",
              static_cast<long long>(h100.m), static_cast<long long>(h100.n),
              static_cast<long long>(h100.k), h100.tflops, h100_model,
              100.0 * (h100_model / h100.tflops - 1.0));
  EXPECT_LE(a100_model, a100.tflops);
  EXPECT_LE(h100_model, h100.tflops);
  EXPECT_GT(a100_model, 0.85 * a100.tflops);
  EXPECT_GT(h100_model, 0.85 * h100.tflops);
}

std::vector<KernelMeasurement> h100_rows() {
  return read_measurement_csv(kData / "xla-matmul" / "h100_xla_matmul.csv");
}

std::vector<KernelMeasurement> h100_attention_rows() {
  return rows_from_root(kH100AttentionTable);
}

/// The rows of the tables configs/calibration/h100_xla.yaml is fitted on, in the order of its
/// command (h100_xla_csv_arguments), each table's row count checked.
std::vector<KernelMeasurement> h100_xla_fit_rows() {
  std::vector<KernelMeasurement> rows = h100_rows();
  EXPECT_EQ(rows.size(), 750u);
  const auto append = [&rows](const char* table, size_t expected) {
    const std::vector<KernelMeasurement> more = rows_from_root(table);
    EXPECT_EQ(more.size(), expected) << table;
    rows.insert(rows.end(), more.begin(), more.end());
  };
  append(kH100AttentionTable, 142);
  append(kH100RmsNormTable, 6);
  for (const H100MemoryTable& table : kH100MemoryTables)
    append(table.path, table.rows);
  append(kH100Fp32Table, 285);
  append(kH100AttentionPairTable, 48);
  return rows;
}

/// The `--csv` arguments of `upsim calibrate kernels` for those tables.
std::string h100_xla_csv_arguments() {
  std::string args = "--csv test/data/xla-matmul/h100_xla_matmul.csv";
  for (const char* table : {kH100AttentionTable, kH100RmsNormTable})
    args += fmt::format(" --csv {}", table);
  for (const H100MemoryTable& table : kH100MemoryTables)
    args += fmt::format(" --csv {}", table.path);
  for (const char* table : {kH100Fp32Table, kH100AttentionPairTable})
    args += fmt::format(" --csv {}", table);
  return args;
}

TEST(GemmDtypeFit, H100Bf16AndTf32HeldOutWithinBoundAndShippedFileIsTheFit) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const std::vector<KernelMeasurement> rows = h100_xla_fit_rows();
  const CalibrationResult result = fit_kernel_calibration(rows, h100, kH100Source);
  std::printf("%s", format_kernel_validation(result.validation).c_str());
  ASSERT_EQ(result.validation.size(), 17u);
  // Forward plus backward: FlashAttention-2 all held out (its section is fitted on the
  // FlashAttention-3 paper's figures: an independent check, measured 3.19%, 24 points) and
  // FlashAttention v1 (fitted, measured held out 3.52%).
  EXPECT_EQ(result.validation[15].op, "attention_forward_backward/flash2");
  EXPECT_EQ(result.validation[15].train_points, 0u);
  EXPECT_EQ(result.validation[15].held_out_points, 24u);
  EXPECT_EQ(result.validation[16].op, "attention_forward_backward/flash1");
  for (size_t i = 15; i < 17; ++i)
    EXPECT_LT(result.validation[i].held_out_geomean, kAttentionHeldOutBound)
        << result.validation[i].op;
  EXPECT_EQ(result.validation[14].op, "gemm/fp32");
  EXPECT_GE(result.validation[14].held_out_points, 140u);
  EXPECT_LT(result.validation[14].held_out_geomean, 0.06);
  EXPECT_EQ(result.validation[8].op, "rms_norm");
  EXPECT_EQ(result.validation[8].held_out_points, 3u);
  EXPECT_LT(result.validation[8].held_out_geomean, kRmsNormHeldOutBound);
  for (size_t i = 0; i < kH100MemoryTables.size(); ++i) {
    const KernelValidationRow& row = result.validation[9 + i];
    EXPECT_EQ(row.op, kH100MemoryTables[i].op);
    EXPECT_EQ(row.held_out_points, kH100MemoryTables[i].rows / 2);
    EXPECT_LT(row.held_out_geomean, kH100MemoryTables[i].held_out_bound) << row.op;
  }
  // The two Megatron kernels are priced on curves of their own (their tables' `# curve:`).
  EXPECT_EQ(result.calibration.curve_of_op[static_cast<size_t>(MemoryOp::kSwiglu)], "swiglu");
  // PyTorch's LayerNorm kernel on its own curve; RMSNorm keeps the layernorm family's.
  EXPECT_EQ(result.calibration.curve_of_op[static_cast<size_t>(MemoryOp::kLayerNorm)],
            "torch_layernorm");
  EXPECT_EQ(result.calibration.curve_of_op[static_cast<size_t>(MemoryOp::kRmsNorm)], "layernorm");
  EXPECT_EQ(result.calibration.curve_of_op[static_cast<size_t>(MemoryOp::kCrossEntropy)],
            "cross_entropy");
  // A table that declares no harness gets none (Megatron's SwiGLU); one that declares none
  // gets its fitted harness (Liger's RMSNorm, timed at do_bench's per-call floor).
  EXPECT_FALSE(result.calibration.measurement.contains("swiglu"));
  EXPECT_TRUE(result.calibration.measurement.contains("rms_norm"));
  EXPECT_EQ(result.validation[0].op, "gemm/bf16");
  EXPECT_EQ(result.validation[1].op, "gemm/tf32");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GE(result.validation[i].held_out_points, 187u) << result.validation[i].op;
    EXPECT_LT(result.validation[i].held_out_geomean, kH100HeldOutBound) << result.validation[i].op;
  }
  // Attention, per implementation and direction, on the published FlashAttention-3 figures.
  for (size_t i = 2; i < 8; ++i) {
    const KernelValidationRow& row = result.validation[i];
    EXPECT_TRUE(row.op.starts_with("attention_")) << row.op;
    EXPECT_GE(row.held_out_points, 6u) << row.op;
    EXPECT_LT(row.held_out_geomean, kAttentionHeldOutBound) << row.op;
    EXPECT_LT(row.held_out_max, kAttentionHeldOutMaxBound) << row.op;
  }
  const KernelCalibration& c = result.calibration;
  const GemmParams& bf16 = c.gemm_for(DType::kBf16);
  const GemmParams& tf32 = c.gemm_for(DType::kTf32);
  std::printf("compute_scale bf16 %.4f tf32 %.4f\n", bf16.compute_scale, tf32.compute_scale);
  EXPECT_EQ(bf16.compute_scale, 1.0);  // the primary class anchors the harness
  EXPECT_NE(tf32.compute_scale, 1.0);  // tf32 fitted its own rate

  // Physics: no memory-bound curve streams faster than the datasheet's 3.35 TB/s
  // (fit_curve caps bandwidth_scale at 1 / achievable.memory).
  for (const auto& [name, curve] : c.curves) {
    EXPECT_LE(h100.device.hbm_bandwidth.bytes_per_second() * h100.achievable.memory *
                  curve.bandwidth_scale,
              3350e9 * (1 + 1e-3))
        << name;
  }

  const std::string text = kernel_calibration_yaml(c, calibration_header(result));
  EXPECT_EQ(read_text(kConfigs / "calibration" / "h100_xla.yaml"), text)
      << "configs/calibration/h100_xla.yaml is stale: regenerate it with `upsim calibrate "
         "kernels --llmcompass '' "
      << h100_xla_csv_arguments() << " --hardware configs/hardware/h100_sxm5_80gb.yaml --source '"
      << kH100Source << "' --out configs/calibration/h100_xla.yaml --force`";
}

// Vidur's H100 layer profiles (test/data/vidur) ran CUDA 12.1's cuBLAS, as the 2023-24 runs of
// torch's cu121 builds did. configs/calibration/h100_cuda12_1.yaml adds their GEMM kernel times
// (harness none) to h100_xla.yaml's tables: Llama-2-7B's and CodeLlama-34B's, alternate token
// counts train and held out, anchor the GEMM rate; Llama-2-70B's profile is held out whole. XLA's
// table keeps its harness. Measured: Llama-2-70B held out 5.40% geomean, mean signed -0.32% on
// its 98 rows of 200 us and more (h100_xla.yaml: 9.87%, -8.33%); bf16 compute_scale 0.9355.
TEST(GemmDtypeFit, H100Cuda121CublasFileIsTheFitAndPricesAHeldOutModel) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  std::vector<KernelMeasurement> rows = h100_xla_fit_rows();
  constexpr std::array<const char*, 3> kVidur = {"test/data/vidur/h100_llama2_7b_gemm.csv",
                                                 "test/data/vidur/h100_codellama_34b_gemm.csv",
                                                 "test/data/vidur/h100_llama2_70b_gemm.csv"};
  for (const char* table : kVidur) {
    const std::vector<KernelMeasurement> more = rows_from_root(table);
    ASSERT_EQ(more.size(), 304u) << table;
    rows.insert(rows.end(), more.begin(), more.end());
  }
  const std::vector<KernelMeasurement> llama2_70b = rows_from_root(kVidur[2]);
  for (const KernelMeasurement& m : llama2_70b)
    ASSERT_TRUE(m.held_out) << m.origin;
  const CalibrationResult result = fit_kernel_calibration(rows, h100, kH100Cuda121Source);
  std::printf("%s", format_kernel_validation(result.validation).c_str());
  ASSERT_EQ(result.validation.size(), 18u);
  EXPECT_EQ(result.validation[17].op, "gemm/fp16");
  EXPECT_EQ(result.validation[17].train_points, 352u);
  EXPECT_EQ(result.validation[17].held_out_points, 560u);
  EXPECT_LT(result.validation[17].held_out_geomean, 0.08);
  EXPECT_EQ(result.validation[0].op, "gemm/bf16");  // XLA's table through its harness
  EXPECT_LT(result.validation[0].held_out_geomean, kH100HeldOutBound);

  const KernelCalibration& c = result.calibration;
  std::printf("compute_scale bf16 %.4f, XLA harness compute_speedup %.3f\n",
              c.gemm_for(DType::kBf16).compute_scale, c.measurement.at("gemm").compute_speedup);
  EXPECT_LT(c.gemm_for(DType::kBf16).compute_scale, 1.0);  // below h100_xla.yaml's rate
  EXPECT_EQ(c.gemm_for(DType::kBf16).compute_scale, c.gemm_for(DType::kFp16).compute_scale);

  const std::string text = kernel_calibration_yaml(c, calibration_header(result));
  EXPECT_EQ(read_text(kConfigs / "calibration" / "h100_cuda12_1.yaml"), text)
      << "configs/calibration/h100_cuda12_1.yaml is stale: regenerate it with `upsim calibrate "
         "kernels --llmcompass '' "
      << h100_xla_csv_arguments() << " --csv " << kVidur[0] << " --csv " << kVidur[1] << " --csv "
      << kVidur[2] << " --hardware configs/hardware/h100_sxm5_80gb.yaml --source '"
      << kH100Cuda121Source << "' --out configs/calibration/h100_cuda12_1.yaml --force`";

  // The held-out model, priced by the shipped file and by h100_xla.yaml.
  const auto mean_signed_large = [&](const CalibratedKernelCost& model) {
    double sum = 0.0, n = 0.0;
    for (const KernelMeasurement& m : llama2_70b) {
      if (m.seconds < 200e-6) continue;
      sum += predicted_measurement_seconds(model, m, h100.device) / m.seconds - 1.0;
      n += 1.0;
    }
    return sum / n;
  };
  const CalibratedKernelCost cuda12_1 = shipped_file_model("h100_cuda12_1.yaml", h100);
  const CalibratedKernelCost current = shipped_file_model("h100_xla.yaml", h100);
  const std::vector<KernelValidationRow> held = validate_kernels(llama2_70b, cuda12_1, h100.device);
  ASSERT_EQ(held.size(), 1u);
  std::printf(
      "Llama-2-70B, held out: geomean %.2f%%, mean signed %+.2f%% (>= 200 us); "
      "h100_xla.yaml %+.2f%%\n",
      100 * held[0].held_out_geomean, 100 * mean_signed_large(cuda12_1),
      100 * mean_signed_large(current));
  EXPECT_LT(held[0].held_out_geomean, 0.07);
  EXPECT_LT(std::abs(mean_signed_large(cuda12_1)), 0.03);

  // CUDA 12.4's cuBLAS inside models (TraceLens, torch 2.6) runs the large GEMMs faster than
  // 12.1's: this file prices them slower than h100_xla.yaml does, never faster than measured.
  const std::vector<KernelMeasurement> cublas_12_4 =
      read_measurement_csv(kData / "tracelens" / "h100_bf16_gemm.csv");
  for (const KernelMeasurement& m : cublas_12_4) {
    if (m.kernel.batch != 1 || m.seconds < 100e-6) continue;
    const double old_stack = predicted_measurement_seconds(cuda12_1, m, h100.device);
    EXPECT_GT(old_stack, predicted_measurement_seconds(current, m, h100.device)) << m.origin;
    EXPECT_GT(old_stack, m.seconds) << m.origin;
  }

  // Physics: no faster than the best published bf16 rate (MAMF) at its shape.
  const Mamf best = mamf_row("NVIDIA H100 SXM");
  const double seconds =
      cuda12_1.core_seconds(gemm_kernel(DType::kBf16, 1, best.m, best.n, best.k), h100.device);
  EXPECT_LT(2.0 * static_cast<double>(best.m) * static_cast<double>(best.n) *
                static_cast<double>(best.k) / seconds * 1e-12,
            best.tflops);
}

/// The model's core seconds of row `m`'s kernel `k` (both directions for a pair row).
double row_core_seconds(const KernelMeasurement& m, const KernelDesc& k,
                        const CalibratedKernelCost& model, const DeviceProfile& device) {
  double seconds = model.core_seconds(k, device);
  if (m.forward_and_backward) seconds += model.core_seconds(attention_backward_of(k), device);
  return seconds;
}

/// Per attention op ("attention_forward/flash3", "attention_forward_backward/flash1"), the best
/// rate of `rows` in TFLOP/s; expects the model to price none of their kernels (or forward plus
/// backward pairs) faster than its op's best, at their sequences nor at 4x them.
std::map<std::string, double> expect_attention_below_best_published(
    const std::vector<KernelMeasurement>& rows, const CalibratedKernelCost& model,
    const DeviceProfile& device) {
  std::map<std::string, double> best;
  for (const KernelMeasurement& m : rows) {
    if (m.kernel.cls != KernelClass::kAttention) continue;
    best[m.op] = std::max(best[m.op],
                          attention_row_flops(m.kernel, m.forward_and_backward) / m.seconds / 1e12);
  }
  for (const KernelMeasurement& m : rows) {
    if (m.kernel.cls != KernelClass::kAttention) continue;
    for (const int64_t stretch : {1, 4}) {
      KernelDesc k = m.kernel;
      k.attention.seq_q *= stretch;
      k.attention.seq_kv *= stretch;
      const double rate = attention_row_flops(k, m.forward_and_backward) /
                          row_core_seconds(m, k, model, device) / 1e12;
      EXPECT_LE(rate, best.at(m.op) * (1 + 1e-9)) << m.origin << " x" << stretch;
    }
  }
  return best;
}

// Physics: the shipped H100 attention sections never price a kernel faster than the best rate
// published for its implementation and direction (the FlashAttention-3 paper's figures), at the
// published shapes nor at 4x their longest sequence (the fit caps each direction's peak
// efficiency at its best training row: fit_attention.h).
TEST(GemmDtypeFit, H100AttentionStaysBelowEachImplementationsPublishedPeak) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model = shipped_file_model("h100_xla.yaml", h100);
  const std::map<std::string, double> best =
      expect_attention_below_best_published(h100_attention_rows(), model, h100.device);
  for (const auto& [op, tflops] : best)
    std::printf("%-26s best published %.0f TFLOP/s\n", op.c_str(), tflops);
  // FlashAttention v1 (fitted) and -2 (held out) forward plus backward, the repository's figure.
  const std::map<std::string, double> pairs = expect_attention_below_best_published(
      rows_from_root(kH100AttentionPairTable), model, h100.device);
  EXPECT_EQ(pairs.size(), 2u);
}

// The same on A100: the FlashAttention-2 and v1 sections the A100 file fits on the
// flash-attention repository's forward-plus-backward figure.
TEST(KernelFitAccuracy, A100AttentionStaysBelowEachImplementationsPublishedPeak) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const std::map<std::string, double> best = expect_attention_below_best_published(
      rows_from_root(kA100AttentionPairTable), shipped_model(a100), a100.device);
  EXPECT_EQ(best.size(), 2u);
  for (const auto& [op, tflops] : best)
    std::printf("%-34s best published %.0f TFLOP/s\n", op.c_str(), tflops);
}

// The llm-foundry templates' `triton` sections are an ASSUMPTION (no kernel figures of the
// Triton FlashAttention are published). Their comments state how far that assumption sits from
// measured FlashAttention v1 on the same GPU; priced as a v1 section, on the repository's v1
// pairs (all 24 rows): 19.7% geomean on A100, 14.2% on H100.
TEST(KernelFitAccuracy, LlmFoundryTritonAssumptionAgainstMeasuredFlashAttentionV1) {
  struct Case {
    const char* hardware;
    const char* calibration;
    const char* template_file;
    const char* pairs;
    double geomean;
  };
  for (const Case& c : {Case{"a100_sxm4_80gb.yaml", "a100_llmcompass.yaml", "mpt_fsdp.yaml",
                             kA100AttentionPairTable, 0.197},
                        Case{"h100_sxm5_80gb.yaml", "h100_xla.yaml", "mpt_fsdp_h100.yaml",
                             kH100AttentionPairTable, 0.142}}) {
    const HardwareProfile hw = profile(c.hardware);
    ConfigDocument scenario = ConfigDocument::load_file(kConfigs / "validation" / c.template_file);
    const auto sections = read_attention_sections(
        scenario.root().child("platform").child("kernels").child("attention"));
    const auto& assumed = sections[static_cast<size_t>(AttentionKernel::kTriton)];
    ASSERT_TRUE(assumed) << c.template_file;
    EXPECT_EQ(assumed->provenance, "physics");
    ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / c.calibration);
    KernelCalibration as_v1 = load_kernel_calibration(doc.root());
    as_v1.attention[static_cast<size_t>(AttentionKernel::kFlash1)] = assumed;
    std::vector<KernelMeasurement> v1;
    for (KernelMeasurement& row : rows_from_root(c.pairs)) {
      if (row.kernel.attention.implementation == AttentionKernel::kFlash1) v1.push_back(row);
    }
    ASSERT_EQ(v1.size(), 24u) << c.pairs;
    std::vector<double> errors;
    for (const KernelMeasurement& row : v1) {
      errors.push_back(predicted_measurement_seconds(CalibratedKernelCost(as_v1, hw.achievable),
                                                     row, hw.device) /
                           row.seconds -
                       1.0);
    }
    EXPECT_NEAR(geomean_abs_error(errors), c.geomean, 0.005) << c.template_file;
  }
}

/// Another table of the fit (`upsim calibrate kernels --csv PATH`), with its row count; measured
/// on another GPU of the fitted chip when `measured_on` names that GPU's profile (`--measured-on
/// PATH=configs/hardware/PROFILE`).
struct OtherTable {
  const char* path;
  size_t rows;
  const char* measured_on = nullptr;
};

/// A GEMM table and other tables fitted on `hardware` (a profile file name)
/// as `upsim calibrate kernels --csv TABLE ...` fits them, the validation printed; the shipped
/// `calibration` file must be exactly that fit (the message gives the command that regenerates
/// it).
struct ShippedGemmFit {
  HardwareProfile hardware;
  std::vector<KernelMeasurement> rows;
  CalibrationResult result;
};
ShippedGemmFit fit_shipped_gemm_table(const char* table, const char* hardware, const char* source,
                                      const char* calibration, size_t expected_rows,
                                      const std::vector<OtherTable>& others = {}) {
  ShippedGemmFit fit{profile(hardware), rows_from_root(table), {}};
  EXPECT_EQ(fit.rows.size(), expected_rows) << table;
  std::string other_args;
  for (const OtherTable& other : others) {
    std::vector<KernelMeasurement> more = rows_from_root(other.path);
    EXPECT_EQ(more.size(), other.rows) << other.path;
    other_args += fmt::format(" --csv {}", other.path);
    if (other.measured_on != nullptr) {
      const auto part = std::make_shared<const HardwareProfile>(profile(other.measured_on));
      for (KernelMeasurement& row : more)
        row.measured_on = part;
      other_args +=
          fmt::format(" --measured-on {}=configs/hardware/{}", other.path, other.measured_on);
    }
    fit.rows.insert(fit.rows.end(), more.begin(), more.end());
  }
  fit.result = fit_kernel_calibration(fit.rows, fit.hardware, source);
  std::printf("%s", format_kernel_validation(fit.result.validation).c_str());
  const std::string text =
      kernel_calibration_yaml(fit.result.calibration, calibration_header(fit.result));
  EXPECT_EQ(read_text(kConfigs / "calibration" / calibration), text)
      << "configs/calibration/" << calibration
      << " is stale: regenerate it with `upsim calibrate kernels --llmcompass '' --csv " << table
      << other_args << " --hardware configs/hardware/" << hardware << " --source \"" << source
      << "\" --out configs/calibration/" << calibration << " --force`";
  return fit;
}

// B200: XLA's sm_100_B200 table in bf16, tf32 and fp8 (e4m3), each dtype its own fit, within
// the bounds on its held-out half (measured: bf16 3.52%, tf32 3.40%, fp8 4.93%); the shipped
// file is that fit; fp8 is priced from fp8 measurements (no MAMF-ratio borrowing) and never
// above the GPU's best measured fp8 matmul. Attention (cuDNN and FlashAttention-2, causal GQA,
// head_dim 128; cuDNN-frontend's published B200 run) and the memory-bound curves (Liger-Kernel's
// published B200 rows: torch softmax, torch LayerNorm on a curve of its own, Liger's RoPE, torch
// cross-entropy; FlashInfer's fused add + RMSNorm, the layernorm family's curve that rms_norm
// runs on) are fitted beside them. Measured held out: attention cuDNN forward 9.49% / backward
// 6.12%, FA2 5.88% / 5.17% (4 points each, largest 19.4% at 131072 keys, where cuDNN's backward
// falls from its 32768-key rate); softmax 2.35%, layernorm 13.8%, rotary 9.9%, cross-entropy
// 4.25% (2 points each); rms_norm 3.92% (10 points, max 15.4%). No attention kernel is priced above
// the best published rate of its implementation and direction, at the published sequences nor at 4x
// the longest.
TEST(GemmDtypeFit, B200Bf16Tf32AndFp8HeldOutWithinBoundAndShippedFileIsTheFit) {
  const ShippedGemmFit fit =
      fit_shipped_gemm_table("test/data/xla-matmul/b200_xla_matmul.csv", "b200_sxm_180gb.yaml",
                             kB200Source, "b200_xla.yaml", 1125,
                             {{"test/data/cudnn-frontend/b200_sdpa_bf16.csv", 32},
                              {"test/data/liger-kernel/b200_memory_ops.csv", 8},
                              {"test/data/liger-kernel/b200_torch_layer_norm_forward.csv", 4},
                              {"test/data/liger-kernel/b200_torch_cross_entropy_forward.csv", 4},
                              {"test/data/hp-rms-norm/b200_flashinfer_fused_add_rmsnorm.csv", 20}});
  const HardwareProfile& b200 = fit.hardware;
  const CalibrationResult& result = fit.result;
  ASSERT_EQ(result.validation.size(), 12u);
  for (size_t i = 0; i < 3; ++i) {
    const KernelValidationRow& row = result.validation[i];
    EXPECT_GE(row.held_out_points, 187u) << row.op;
    EXPECT_LT(row.held_out_geomean, row.op == "gemm/fp8" ? 0.08 : 0.06) << row.op;
  }
  EXPECT_EQ(result.validation[2].op, "gemm/fp8");
  for (size_t i = 3; i < result.validation.size(); ++i) {
    const KernelValidationRow& row = result.validation[i];
    EXPECT_GE(row.held_out_points, 2u) << row.op;
    EXPECT_LT(row.held_out_geomean, 0.15) << row.op;
    EXPECT_LT(row.held_out_max, 0.25) << row.op;
  }
  const CalibratedKernelCost model(result.calibration, b200.achievable);
  EXPECT_FALSE(
      model.borrowed_calibration(gemm_kernel(DType::kFp8, 1, 4096, 4096, 4096), b200.device));
  const KernelDesc huge = gemm_kernel(DType::kFp8, 1, 16384, 16384, 65536);
  const double tflops =
      2.0 * 16384.0 * 16384.0 * 65536.0 / model.core_seconds(huge, b200.device) * 1e-12;
  EXPECT_LE(tflops, 3432.5 * (1 + 1e-6));  // test/data/hardware-specs: B200 fp8 MAMF
  std::printf("B200 fp8 at 16384^2 x 65536: %.0f TFLOP/s\n", tflops);
  // Physics: attention below its best published rate (all rows, held out included).
  EXPECT_EQ(expect_attention_below_best_published(fit.rows, model, b200.device).size(), 4u);
}

// V100: DeepBench's published GEMMs (DGX-1), fp32 and tensor-core fp16, each dtype its own fit,
// within the bounds on its held-out half (measured: fp32 5.06%, fp16 8.83%; the largest errors
// are the K = 500000 rows, whose split-K kernels the tile model prices 40-50% slow); the A100
// file that V100 runs borrowed before is worse on the same rows (measured 13.6% / 13.0%); the
// shipped file is the fit, and never prices a GEMM above the V100 datasheet peaks. NeuSight's
// published memory-bound ops, measured on the V100 PCIe part of the same chip, fit the
// elementwise, softmax and layernorm curves (measured held out: relu 0.39%, gelu 0.90%, tanh
// 0.47%, binary 4.02%, softmax 0.85%, layernorm 0.78%; most of their small sizes sit on the
// harness's per-call floor of 32-59 us, which the fit describes).
TEST(GemmDtypeFit, V100Fp32AndFp16HeldOutWithinBoundAndShippedFileIsTheFit) {
  const ShippedGemmFit fit = fit_shipped_gemm_table(
      "test/data/deepbench/v100_dgx1_gemm.csv", "v100_sxm2_32gb.yaml", kV100Source,
      "v100_deepbench.yaml", 320,
      {{"test/data/neusight/v100_pcie_memory_ops.csv", 387, "v100_pcie_32gb.yaml"}});
  const HardwareProfile& v100 = fit.hardware;
  const std::vector<KernelMeasurement>& rows = fit.rows;
  const CalibrationResult& result = fit.result;
  ASSERT_EQ(result.validation.size(), 8u);
  EXPECT_EQ(result.validation[0].op, "gemm/fp32");
  EXPECT_EQ(result.validation[1].op, "gemm/fp16");
  for (size_t i = 0; i < 2; ++i) {
    const KernelValidationRow& row = result.validation[i];
    EXPECT_EQ(row.held_out_points, 80u) << row.op;
    EXPECT_LT(row.held_out_geomean, row.op == "gemm/fp32" ? 0.07 : 0.11) << row.op;
  }
  const std::array<const char*, 6> memory_ops{"relu",   "gelu",    "tanh",
                                              "binary", "softmax", "layernorm"};
  for (size_t i = 0; i < memory_ops.size(); ++i) {
    const KernelValidationRow& row = result.validation[2 + i];
    EXPECT_EQ(row.op, memory_ops[i]);
    EXPECT_GE(row.held_out_points, 17u) << row.op;
    EXPECT_LT(row.held_out_geomean, 0.06) << row.op;
    EXPECT_LT(row.held_out_max, 0.15) << row.op;
  }
  const std::vector<KernelValidationRow> borrowed =
      validate_kernels(rows, shipped_model(v100), v100.device);
  for (size_t i = 0; i < 2; ++i) {
    std::printf("%s held out: V100 fit %.2f%%, borrowed A100 fit %.2f%%\n",
                result.validation[i].op.c_str(), 100 * result.validation[i].held_out_geomean,
                100 * borrowed[i].held_out_geomean);
    EXPECT_LT(result.validation[i].held_out_geomean, borrowed[i].held_out_geomean);
  }
  const CalibratedKernelCost model(result.calibration, v100.achievable);
  for (const auto& [dtype, peak_tflops] : {std::pair{DType::kFp32, 15.7}, {DType::kFp16, 125.0}}) {
    const KernelDesc huge = gemm_kernel(dtype, 1, 16384, 16384, 65536);
    const double tflops =
        2.0 * 16384.0 * 16384.0 * 65536.0 / model.core_seconds(huge, v100.device) * 1e-12;
    EXPECT_LE(tflops, peak_tflops * (1 + 1e-6)) << dtype_name(dtype);
  }
}

// cuBLASLt GEMMs, held out (test/data/azure-ai-benchmarking): Azure's published fp8 tables on
// H100 and H200, priced by the shipped H100 file (bf16 fit at each GPU's measured fp8 rate), and
// its fp16 table on A100, priced by the A100 file. Measured: H100 fp8 3.17% (9 rows), H200 fp8
// 7.87% (9), A100 fp16 6.77% (8: +2…+4% at 8192^3 and above, -26% at 802816 x 192 x 768); the
// smallest shapes (1024^3, 1024 x 2145 x 1024) run 12-30% slower than predicted, and H200 is
// priced 2-7% faster than measured at large shapes (its fp8 MAMF is 3.6% above H100's; these
// tables show H200 no faster than H100).
TEST(GemmDtypeFit, CuBlasLtGemmsHeldOut) {
  struct Case {
    const char* table;
    const char* hardware;
    const char* calibration;
    double bound;
  };
  for (const Case& c :
       {Case{"h100_sxm5_fp8_cublaslt.csv", "h100_sxm5_80gb.yaml", "h100_xla.yaml", 0.06},
        Case{"h200_sxm_fp8_cublaslt.csv", "h200_sxm_141gb.yaml", "h100_xla.yaml", 0.10},
        Case{"a100_sxm4_fp16_cublaslt.csv", "a100_sxm4_80gb.yaml", "a100_llmcompass.yaml", 0.08}}) {
    const HardwareProfile hw = profile(c.hardware);
    ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / c.calibration);
    const CalibratedKernelCost model(load_kernel_calibration(doc.root()), hw.achievable);
    const std::vector<KernelMeasurement> rows =
        read_measurement_csv(kData / "azure-ai-benchmarking" / c.table);
    ASSERT_GE(rows.size(), 8u) << c.table;
    const std::vector<KernelValidationRow> table = validate_kernels(rows, model, hw.device);
    ASSERT_EQ(table.size(), 1u) << c.table;
    EXPECT_EQ(table[0].train_points, 0u) << c.table;
    std::printf("%s on %s: held-out geomean %.2f%%, max %.2f%%\n", c.table, hw.device.name.c_str(),
                100 * table[0].held_out_geomean, 100 * table[0].held_out_max);
    EXPECT_LT(table[0].held_out_geomean, c.bound) << c.table;
  }
}

// H100 fp8 GEMMs, held out: DeepGEMM's published H800 SXM5 tables (the H100 SXM5 chip), priced by
// the shipped H100 file (bf16 fit at the measured fp8 rate). Measured: 28 rows, mean |e| 9.93%,
// largest +30.2% (64 x 7168 x 2048). The known gap, pinned: equal groups (the masked layout
// times every group full) are priced by their tiles, waves and the larger of compute and memory,
// so 4 groups of 256 rows cost what 1 group of 1024 does, while DeepGEMM's masked kernel takes 32%
// longer for them: at the compute / memory ridge the two do not overlap fully (predicted /
// measured 0.76).
TEST(GemmDtypeFit, H100Fp8GemmsOnDeepGemmsPublishedTablesAndTheGroupedGemmGap) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model = shipped_file_model("h100_xla.yaml", h100);
  const std::vector<KernelMeasurement> rows =
      read_measurement_csv(kData / "deepgemm" / "h800_fp8_gemm.csv");
  ASSERT_EQ(rows.size(), 28u);
  double sum = 0.0, largest = 0.0;
  for (const KernelMeasurement& m : rows) {
    EXPECT_TRUE(m.held_out);
    const double e = predicted_measurement_seconds(model, m, h100.device) / m.seconds - 1.0;
    sum += std::abs(e);
    largest = std::max(largest, std::abs(e));
  }
  const double mean = sum / static_cast<double>(rows.size());
  std::printf("DeepGEMM fp8 on H100: mean |e| %.2f%%, largest %.2f%%\n", 100 * mean, 100 * largest);
  EXPECT_LT(mean, 0.12);
  EXPECT_LT(largest, 0.35);
  // rows 22 and 26: 1 x 1024 and 4 x 256 rows of 4096 x 7168 (masked layout).
  const KernelMeasurement& one = rows[22];
  const KernelMeasurement& four = rows[26];
  ASSERT_EQ(one.kernel.batch * one.kernel.m, four.kernel.batch * four.kernel.m);
  const double p_one = predicted_measurement_seconds(model, one, h100.device);
  const double p_four = predicted_measurement_seconds(model, four, h100.device);
  EXPECT_NEAR(p_four / p_one, 1.0, 0.01);       // no small-group penalty in the model
  EXPECT_GT(four.seconds / one.seconds, 1.25);  // measured: 1.32
  EXPECT_LT(p_four / four.seconds, 0.80);       // the gap: 0.76
}

// Published single GEMMs in PyTorch's CUDA notes (test/data/pytorch-docs), held out: A100 10240^3
// in TF32 (the A100 file's tf32 class: the profile's rate, tile and K overhead fitted on in-model
// GEMMs) and fp32 within 5% (measured +3.3% and +2.1%; the figures have two digits); V100 fp16 4096
// x k x 4096, where the V100 file (DeepBench's DGX-1 GEMMs) is 10-21% fast, the known gap between
// the two sources, pinned.
TEST(GemmDtypeFit, PyTorchDocsGemmsHeldOut) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const std::vector<KernelMeasurement> a100_rows =
      read_measurement_csv(kData / "pytorch-docs" / "a100_gemm_10240.csv");
  ASSERT_EQ(a100_rows.size(), 2u);
  for (const KernelMeasurement& m : a100_rows) {
    const double e =
        predicted_measurement_seconds(shipped_model(a100), m, a100.device) / m.seconds - 1.0;
    std::printf("A100 %s 10240^3: %+.2f%%\n", dtype_name(m.kernel.dtype).data(), 100 * e);
    EXPECT_LT(std::abs(e), 0.05) << dtype_name(m.kernel.dtype);
  }
  const HardwareProfile v100 = profile("v100_sxm2_32gb.yaml");
  const CalibratedKernelCost v100_model = shipped_file_model("v100_deepbench.yaml", v100);
  const std::vector<KernelMeasurement> v100_rows =
      read_measurement_csv(kData / "pytorch-docs" / "v100_fp16_gemm.csv");
  ASSERT_EQ(v100_rows.size(), 13u);
  const std::vector<KernelValidationRow> table =
      validate_kernels(v100_rows, v100_model, v100.device);
  ASSERT_EQ(table.size(), 1u);
  std::printf("V100 fp16 (PyTorch docs): held-out geomean %.2f%%, max %.2f%%\n",
              100 * table[0].held_out_geomean, 100 * table[0].held_out_max);
  for (const KernelMeasurement& m : v100_rows) {
    const double e = predicted_measurement_seconds(v100_model, m, v100.device) / m.seconds - 1.0;
    EXPECT_LT(e, -0.05) << m.origin;  // the gap: priced faster than measured
    EXPECT_GT(e, -0.25) << m.origin;
  }
}

// Triton's TF32 matmul on an A100 40GB (its GEMM regression test, test/data/triton-matmul),
// held out against the A100 file's tf32 class (128 x 128 tiles and a K overhead of 314 fitted on
// cuBLAS's in-model GEMMs, test/data/holistic-trace-analysis; the profile's rate): the square
// shapes within 16% (measured -1.9%, +8.1% and +6.8% at 2048^3, 4096^3 and 8192^3: cuBLAS's
// per-tile cost at k ~ 1024 priced on Triton's kernels at k >= 4096), the thin ones (16 or 64 rows
// or columns, 8192 or 4096 wide) 13-41% fast, where Triton's matmul runs far below cuBLAS. A fit
// on this table was tried and not shipped (SOURCES.md): its per-tile K overhead, set by those
// thin Triton kernels, moves PyTorch's own 10240^3 TF32 figure to -3.9%.
TEST(GemmDtypeFit, TritonA100Tf32GemmsHeldOut) {
  const HardwareProfile a100 = profile("a100_sxm4_40gb.yaml");
  const std::vector<KernelMeasurement> rows =
      read_measurement_csv(kData / "triton-matmul" / "a100_tf32_triton_regression.csv");
  ASSERT_EQ(rows.size(), 9u);
  const CalibratedKernelCost model = shipped_model(a100);
  for (const KernelMeasurement& m : rows) {
    const double e = predicted_measurement_seconds(model, m, a100.device) / m.seconds - 1.0;
    const bool square = m.kernel.m == m.kernel.n && m.kernel.n == m.kernel.k;
    std::printf("A100 tf32 %s: %+.2f%%\n", m.origin.c_str(), 100 * e);
    if (square) {
      EXPECT_LT(std::abs(e), m.kernel.m < 4096 ? 0.30 : 0.16) << m.origin;
    } else {
      EXPECT_LT(e, -0.10) << m.origin;  // the gap: Triton's thin kernels, pinned
      EXPECT_GT(e, -0.50) << m.origin;
    }
  }
}

// H100 bf16 GEMMs inside six Hugging Face models (TraceLens's published H100 reports), held out:
// the plain GEMMs of 100 us and more are priced within 15% (measured +2 .. +12%: not faster than
// kernels run in a model); the batched k = 64 attention-score GEMMs that cuBLAS runs on
// Turing-era kernels are priced 64-75% fast, pinned. Measured: geomean 12.5% over 37 shapes.
TEST(GemmDtypeFit, TraceLensH100GemmsHeldOut) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model = shipped_file_model("h100_xla.yaml", h100);
  const std::vector<KernelMeasurement> rows =
      read_measurement_csv(kData / "tracelens" / "h100_bf16_gemm.csv");
  ASSERT_EQ(rows.size(), 37u);
  const std::vector<KernelValidationRow> table = validate_kernels(rows, model, h100.device);
  ASSERT_EQ(table.size(), 1u);
  std::printf("TraceLens H100 bf16 GEMMs: held-out geomean %.2f%%, max %.2f%%\n",
              100 * table[0].held_out_geomean, 100 * table[0].held_out_max);
  EXPECT_LT(table[0].held_out_geomean, 0.15);
  for (const KernelMeasurement& m : rows) {
    const double e = predicted_measurement_seconds(model, m, h100.device) / m.seconds - 1.0;
    if (m.kernel.batch == 1 && m.seconds >= 100e-6) {
      EXPECT_GT(e, -0.05) << m.origin;  // never much faster than the in-model kernel
      EXPECT_LT(e, 0.15) << m.origin;
    }
    if (m.kernel.batch > 1 && m.kernel.k == 64 && m.kernel.m > 1000) {
      EXPECT_LT(e, -0.5) << m.origin;  // the gap: cuBLAS's Turing-era kernels, pinned
    }
  }
}

// PyTorch's FlashAttention-2 forward inside models on H100 (TraceLens), held out against the
// flash2 section fitted on the FlashAttention-3 paper's figures: 32256 x 32256 keys -1.7%, 32256
// queries x 512 keys +13.6%; 16 x 559 causal head_dim 64 -53%: a ragged causal sequence of five
// 128-row blocks computes 15 block pairs where its useful half is 9.5, padding the model's causal
// half-span does not count (pinned). Measured geomean 10.8% over 3 kernels.
TEST(GemmDtypeFit, TraceLensH100FlashAttentionHeldOut) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model = shipped_file_model("h100_xla.yaml", h100);
  const std::vector<KernelMeasurement> rows =
      read_measurement_csv(kData / "tracelens" / "h100_flash2_forward.csv");
  ASSERT_EQ(rows.size(), 3u);
  std::vector<double> e;
  for (const KernelMeasurement& m : rows)
    e.push_back(predicted_measurement_seconds(model, m, h100.device) / m.seconds - 1.0);
  std::printf("TraceLens H100 flash2 forward: %+.1f%% %+.1f%% %+.1f%%\n", 100 * e[0], 100 * e[1],
              100 * e[2]);
  EXPECT_LT(e[0], -0.4);  // the ragged short causal sequence, pinned
  EXPECT_LT(std::abs(e[1]), 0.05);
  EXPECT_LT(std::abs(e[2]), 0.2);
}

// NeuSight's published V100 PCIe fp32 GEMMs (PyTorch 2.1, 242 rows of at least 1 ms), held out
// against the V100 file's fp32 class (DeepBench's cuBLAS of 2017, about 92% of the fp32 peak
// where PyTorch 2.1's reaches 100%): priced 13% slow on average, pinned.
TEST(GemmDtypeFit, NeuSightV100Fp32GemmsHeldOut) {
  const HardwareProfile v100 = profile("v100_sxm2_32gb.yaml");
  const auto pcie = std::make_shared<const HardwareProfile>(profile("v100_pcie_32gb.yaml"));
  const CalibratedKernelCost model = shipped_file_model("v100_deepbench.yaml", v100);
  std::vector<KernelMeasurement> rows = rows_from_root("test/data/neusight/v100_fp32_gemm.csv");
  ASSERT_EQ(rows.size(), 242u);
  double sum = 0.0;
  for (KernelMeasurement& m : rows) {
    m.measured_on = pcie;
    sum += predicted_measurement_seconds(model, m, pcie->device) / m.seconds - 1.0;
  }
  const double mean = sum / static_cast<double>(rows.size());
  std::printf("NeuSight V100 fp32 GEMMs: mean signed error %+.2f%%\n", 100 * mean);
  EXPECT_GT(mean, 0.05);  // the gap: slower than PyTorch 2.1's cuBLAS
  EXPECT_LT(mean, 0.20);
}

// Vidur's published H100 profile of Llama-2-70B's four layer GEMMs (fp16, 1-4096 tokens, TP 1-8;
// 304 rows), held out: the H100 file prices them 8-12% fast on average (in-model rates of that
// software, 680 TFLOP/s at the largest, under TraceLens's 750-775), pinned as a band.
TEST(GemmDtypeFit, VidurH100GemmsHeldOut) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model = shipped_file_model("h100_xla.yaml", h100);
  const std::vector<KernelMeasurement> rows =
      read_measurement_csv(kData / "vidur" / "h100_llama2_70b_gemm.csv");
  ASSERT_EQ(rows.size(), 304u);
  double sum_large = 0.0, n_large = 0.0;
  for (const KernelMeasurement& m : rows) {
    const double e = predicted_measurement_seconds(model, m, h100.device) / m.seconds - 1.0;
    if (m.seconds >= 200e-6) {
      sum_large += e;
      n_large += 1.0;
    }
  }
  const std::vector<KernelValidationRow> table = validate_kernels(rows, model, h100.device);
  ASSERT_EQ(table.size(), 1u);
  std::printf(
      "Vidur H100 fp16 GEMMs: held-out geomean %.2f%%; mean signed %+.2f%% on %.0f rows "
      ">= 200 us\n",
      100 * table[0].held_out_geomean, 100 * sum_large / n_large, n_large);
  EXPECT_LT(table[0].held_out_geomean, 0.15);
  EXPECT_LT(sum_large / n_large, 0.0);
  EXPECT_GT(sum_large / n_large, -0.15);
}

// Vidur's A100 Llama-2 7B / 70B GEMMs (test/data/vidur), the held-out half of the rows the
// shipped A100 file is fitted on (priced on the PCIe profile, SOURCES.md): per model, geomean
// within 7% and a mean signed error within 5% on the rows of 200 us and more (measured 7B 6.2%,
// +4.1%; 70B 3.9%, -0.1%; both together 4.9%, +1.0%, where the file before them had 7.9%,
// -8.1%).
TEST(GemmDtypeFit, VidurA100GemmsHeldOut) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const auto pcie = std::make_shared<const HardwareProfile>(profile("a100_pcie_80gb.yaml"));
  const CalibratedKernelCost model = shipped_model(a100);
  for (const char* table_name : kA100VidurTables) {
    std::vector<KernelMeasurement> rows = read_measurement_csv(kData / "vidur" / table_name);
    ASSERT_EQ(rows.size(), 304u);
    double sum_large = 0.0, n_large = 0.0;
    for (KernelMeasurement& m : rows) {
      m.measured_on = pcie;
      if (!m.held_out || m.seconds < 200e-6) continue;
      sum_large += predicted_measurement_seconds(model, m, a100.device) / m.seconds - 1.0;
      n_large += 1.0;
    }
    const std::vector<KernelValidationRow> table = validate_kernels(rows, model, a100.device);
    ASSERT_EQ(table.size(), 1u);
    EXPECT_EQ(table[0].held_out_points, 128u) << table_name;
    std::printf(
        "Vidur A100 %s: held-out geomean %.2f%%; mean signed %+.2f%% on %.0f rows >= 200 us\n",
        table_name, 100 * table[0].held_out_geomean, 100 * sum_large / n_large, n_large);
    EXPECT_LT(table[0].held_out_geomean, 0.07) << table_name;
    EXPECT_LT(std::abs(sum_large / n_large), 0.05) << table_name;
  }
}

TEST(GemmDtypeFit, RowsTheProfileCannotPriceNameTheirFileAndLine) {
  // bf16 rows against a V100 profile (no bf16 unit): the first data row is line 12.
  const HardwareProfile v100 = profile("v100_sxm2_32gb.yaml");
  try {
    fit_kernel_calibration(h100_rows(), v100, "wrong GPU");
    ADD_FAILURE() << "expected a CalibrationDataError";
  } catch (const CalibrationDataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("h100_xla_matmul.csv:13"), std::string::npos) << what;
    EXPECT_NE(what.find("no bf16 peak"), std::string::npos) << what;
  }
}

TEST(GemmDtypeFit, A100CalibrationPricesLargeH100Kernels) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost a100_fit = shipped_file_model("a100_llmcompass.yaml", h100);
  for (const DType dtype : {DType::kBf16, DType::kTf32}) {
    double sum_log = 0.0;
    int n = 0;
    for (const KernelMeasurement& m : h100_rows()) {
      if (m.kernel.dtype != dtype || m.seconds < kMinSeconds) continue;
      // Core time: XLA's times are kernel-only, without the per-kernel overhead the simulator
      // adds (kernel_overhead, Lin et al., TPDS 2024).
      const double e = a100_fit.core_seconds(m.kernel, h100.device) / m.seconds - 1.0;
      sum_log += std::log(std::max(std::abs(e), 1e-6));
      ++n;
    }
    ASSERT_GT(n, 30);
    const double geomean = std::exp(sum_log / n);
    std::printf("A100 calibration on %d H100 %s kernels > %.0f us: geomean |e| %.2f%%\n", n,
                std::string(dtype_name(dtype)).c_str(), kMinSeconds * 1e6, 100.0 * geomean);
    EXPECT_LT(geomean, dtype == DType::kBf16 ? kCrossGpuBf16Bound : kCrossGpuTf32Bound)
        << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace upsim

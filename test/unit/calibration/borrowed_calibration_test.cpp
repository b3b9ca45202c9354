#include "calibration/borrowed_calibration.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/kernel_measurements.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"
#include "sim/task_graph.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

HardwareProfile profile(const std::string& file) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / file);
  return load_hardware_profile(doc.root());
}

KernelCalibration calibration(const std::string& file) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / file);
  return load_kernel_calibration(doc.root());
}

std::string note(const KernelCostModel& model, const KernelDesc& k, const DeviceProfile& d) {
  return model.borrowed_calibration(k, d).value_or("<none>");
}

KernelDesc memory_op(MemoryOp op) {
  return memory_op_kernel(op, DType::kBf16, 4096, 4096);
}

KernelDesc fused_attention() {
  KernelDesc k;
  k.cls = KernelClass::kAttention;
  k.dtype = DType::kBf16;
  k.attention = AttentionShape{2, 32, 8, 4096, 4096, 128, true, false, true};
  return k;
}

TEST(BorrowedCalibration, A100FileOnA100) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const CalibratedKernelCost model(calibration("a100_llmcompass.yaml"), a100.achievable);
  const DeviceProfile& d = a100.device;
  EXPECT_EQ(note(model, gemm_kernel(DType::kFp16, 1, 4096, 4096, 4096), d), "<none>");
  EXPECT_EQ(note(model, gemm_kernel(DType::kBf16, 1, 4096, 4096, 4096), d), "<none>");
  // tf32 has a fit of its own (in-model GEMMs of a recommendation model on A100 40GB).
  EXPECT_EQ(note(model, gemm_kernel(DType::kTf32, 1, 4096, 4096, 4096), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kGelu), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kSoftmax), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kLayerNorm), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kUnspecified), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kRmsNorm), d),
            "rms_norm: no measured curve, priced with the layernorm curve");
  // Streaming ops on the fitted elementwise curve are that curve's family, not a borrowing.
  EXPECT_EQ(note(model, memory_op(MemoryOp::kRotary), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kSwiglu), d), "<none>");
  EXPECT_EQ(note(model, memory_op(MemoryOp::kRelu), d), "<none>");
  // Cross-entropy has a measured curve of its own (PyTorch's CrossEntropyLoss on A100).
  EXPECT_EQ(note(model, memory_op(MemoryOp::kCrossEntropy), d), "<none>");
  // Attention: FlashAttention-2 and v1 fitted on the flash-attention repository's A100 figure;
  // cuDNN's and the Triton FlashAttention have no A100 figure.
  EXPECT_EQ(note(model, fused_attention(), d), "<none>");
  KernelDesc k = fused_attention();
  k.attention.implementation = AttentionKernel::kFlash1;
  EXPECT_EQ(note(model, k, d), "<none>");
  k.attention.implementation = AttentionKernel::kTriton;
  EXPECT_EQ(note(model, k, d),
            "attention triton: no triton section in the calibration fitted on A100-SXM4-80GB, "
            "priced with its flash2 (FlashAttention-2) section");
  // A section that states physics-only parameters (as a scenario's own may) says so.
  KernelCalibration stated = calibration("a100_llmcompass.yaml");
  stated.attention[static_cast<size_t>(AttentionKernel::kTriton)] =
      AttentionCalibration{AttentionParams{}, "physics", "an assumed share of the peak"};
  EXPECT_EQ(note(CalibratedKernelCost(stated, a100.achievable), k, d),
            "attention triton: priced with a section of physics-only parameters, nothing measured "
            "(an assumed share of the peak)");
  k.attention.implementation = AttentionKernel::kCudnn;
  EXPECT_EQ(note(model, k, d),
            "attention cudnn: no cudnn section in the calibration fitted on A100-SXM4-80GB, "
            "priced with its flash2 (FlashAttention-2) section");
}

// A GPU of the fitted one's chip configuration (same compute capability and SMs: another
// memory, form factor or clock of the chip) borrows nothing; another configuration does.
TEST(BorrowedCalibration, TheFileIsItsOwnOnAGpuOfTheFittedConfiguration) {
  for (const char* same : {"a100_sxm4_40gb.yaml", "a100_pcie_80gb.yaml", "a100_pcie_40gb.yaml"}) {
    const HardwareProfile hw = profile(same);
    const CalibratedKernelCost model(calibration("a100_llmcompass.yaml"), hw.achievable);
    EXPECT_EQ(note(model, gemm_kernel(DType::kFp16, 1, 4096, 4096, 4096), hw.device), "<none>")
        << same;
    EXPECT_TRUE(model.calibration().fitted_on_configuration_of(hw.device)) << same;
  }
  // The Quadro GV100 is the V100's chip (80 SMs, compute capability 7.0) at a lower clock.
  const HardwareProfile gv100 = profile("quadro_gv100.yaml");
  const CalibratedKernelCost on_gv100(calibration("v100_deepbench.yaml"), gv100.achievable);
  EXPECT_EQ(note(on_gv100, gemm_kernel(DType::kFp32, 1, 4096, 4096, 4096), gv100.device), "<none>");
  EXPECT_TRUE(on_gv100.calibration().fitted_on_configuration_of(gv100.device));
  const HardwareProfile v100 = profile("v100_sxm2_32gb.yaml");
  const CalibratedKernelCost on_v100(calibration("a100_llmcompass.yaml"), v100.achievable);
  EXPECT_EQ(note(on_v100, gemm_kernel(DType::kFp16, 1, 4096, 4096, 4096), v100.device),
            "calibration fitted on A100-SXM4-80GB, used for V100-SXM2-32GB");
  // A file that does not state its device's configuration is borrowed on any other GPU.
  KernelCalibration unstated = calibration("a100_llmcompass.yaml");
  unstated.fitted_on_device.reset();
  const HardwareProfile a100_40 = profile("a100_sxm4_40gb.yaml");
  const CalibratedKernelCost old_file(unstated, a100_40.achievable);
  EXPECT_EQ(note(old_file, gemm_kernel(DType::kFp16, 1, 4096, 4096, 4096), a100_40.device),
            "calibration fitted on A100-SXM4-80GB, used for A100-SXM4-40GB");
}

// fp8 on A100 (no fp8 unit) is an error naming the GPU and the dtype, in the calibrated model
// and in the roofline.
TEST(BorrowedCalibration, Fp8GemmOnA100IsAnError) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const CalibratedKernelCost model(calibration("a100_llmcompass.yaml"), a100.achievable);
  const RooflineKernelCost roofline({});
  const KernelDesc fp8 = gemm_kernel(DType::kFp8, 1, 8192, 8192, 8192);
  for (const KernelCostModel* m : {static_cast<const KernelCostModel*>(&model),
                                   static_cast<const KernelCostModel*>(&roofline)}) {
    try {
      (void)m->kernel_duration(fp8, a100.device);
      FAIL() << "an fp8 GEMM on A100 must not be priced";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("A100-SXM4-80GB"), std::string::npos) << what;
      EXPECT_NE(what.find("fp8"), std::string::npos) << what;
    }
  }
}

// No calibration has an fp8 fit: an fp8 GEMM on H100 takes the bf16 fit at the measured fp8
// rate (MAMF fp8 1402.6 vs bf16 794.5 TFLOP/s, ml-engineering's table), its per-tile
// prologue / epilogue kept in time (k_overhead x the rate ratio r), so a large compute-bound
// GEMM runs r (k + ko) / (k + r ko) = 1.755x faster than in bf16, not the datasheet's 2x.
TEST(BorrowedCalibration, Fp8GemmOnH100UsesTheBf16FitAtTheMeasuredFp8Rate) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  EXPECT_EQ(h100.achievable.fp8_compute, 0.709);
  const KernelCalibration h100_fit = calibration("h100_xla.yaml");
  const double ko = h100_fit.gemm_for(DType::kBf16).k_overhead;
  EXPECT_EQ(ko, 149.0);
  const CalibratedKernelCost model(h100_fit, h100.achievable);
  const KernelDesc bf16 = gemm_kernel(DType::kBf16, 1, 16384, 16384, 16384);
  KernelDesc fp8 = bf16;
  fp8.dtype = DType::kFp8;
  const double ratio = (1979.0 * 0.709) / (989.0 * 0.803);
  const double k = 16384.0;
  EXPECT_NEAR(model.core_seconds(bf16, h100.device) / model.core_seconds(fp8, h100.device),
              ratio * (k + ko) / (k + ratio * ko), 1e-9);
  EXPECT_NEAR(ratio, 1402.6 / 794.5, 0.002);
  EXPECT_EQ(note(model, fp8, h100.device),
            "gemm fp8: no fp8 fit in the calibration fitted on H100-SXM5-80GB, bf16 fit x "
            "measured fp8/bf16 MAMF ratio 1.767");
  EXPECT_EQ(note(model, bf16, h100.device), "<none>");

  // The A100 file on H100: both notes, in one line, split by the notes function.
  const CalibratedKernelCost a100_file(calibration("a100_llmcompass.yaml"), h100.achievable);
  EXPECT_EQ(note(a100_file, fp8, h100.device),
            "calibration fitted on A100-SXM4-80GB, used for H100-SXM5-80GB; gemm fp8: no fp8 fit "
            "in the calibration fitted on A100-SXM4-80GB, bf16 fit x measured fp8/bf16 MAMF "
            "ratio 1.767");

  // A profile without a measured fp8 fraction falls back to the datasheet peak ratio.
  AchievableFractions no_fp8 = h100.achievable;
  no_fp8.fp8_compute = 0.0;
  const CalibratedKernelCost peak_ratio(calibration("h100_xla.yaml"), no_fp8);
  const double peak = 1979.0 / 989.0;
  EXPECT_NEAR(
      peak_ratio.core_seconds(bf16, h100.device) / peak_ratio.core_seconds(fp8, h100.device),
      peak * (k + ko) / (k + peak * ko), 1e-9);
  EXPECT_EQ(note(peak_ratio, fp8, h100.device),
            "gemm fp8: no fp8 fit in the calibration fitted on H100-SXM5-80GB and no measured "
            "fp8 rate for H100-SXM5-80GB, bf16 fit x datasheet fp8/bf16 peak ratio 2.001");
}

// Anchors of the fp8 model, from the ml-engineering MAMF tables (test/data/hardware-specs: best
// measured matmul TFLOP/s per GPU and dtype, with its shape): priced at MAMF's own best shape,
// the H100 calibration reaches the measured best within 6% and never above it (MAMF is a
// maximum over shapes; the profile's fraction is that maximum, and tiles, waves and the
// per-tile overhead only lose). Measured: H100 bf16 -4.14%, H100 fp8 -4.74%, H200 fp8 -5.23%:
// fp8 falls short of its anchor by about what bf16 does, so its rate and tile losses are
// consistent with the fitted bf16 ones. In-sample for the rate (each profile's fraction is its
// MAMF value over the peak), held out for the shape losses (tiles, waves and k_overhead were
// fitted on XLA's H100 bf16 table, not on these shapes). Shapes are M x N x K.
TEST(BorrowedCalibration, GemmsAtTheMamfBestShapesReachTheMeasuredBest) {
  struct Anchor {
    const char* profile;
    DType dtype;
    int64_t m, n, k;
    double mamf_tflops;
    double max_shortfall;
  };
  const std::vector<Anchor> anchors{
      {"h100_sxm5_80gb.yaml", DType::kBf16, 2048, 2048, 13312, 794.5, 0.06},
      {"h100_sxm5_80gb.yaml", DType::kFp8, 1024, 9216, 14336, 1402.6, 0.06},
      {"h200_sxm_141gb.yaml", DType::kFp8, 1280, 4096, 12032, 1453.4, 0.06},
  };
  const KernelCalibration h100_fit = calibration("h100_xla.yaml");
  for (const Anchor& a : anchors) {
    const HardwareProfile hw = profile(a.profile);
    const CalibratedKernelCost model(h100_fit, hw.achievable);
    const KernelDesc g = gemm_kernel(a.dtype, 1, a.m, a.n, a.k);
    const double tflops = 2.0 * a.m * a.n * a.k / model.core_seconds(g, hw.device) / 1e12;
    std::printf(
        "%s %s %ldx%ldx%ld: predicted %.1f TFLOP/s, MAMF %.1f (%+.2f%%; ml-engineering's MAMF "
        "table, rate in-sample, shape held out)\n",
        hw.device.name.c_str(), std::string(dtype_name(a.dtype)).c_str(), static_cast<long>(a.m),
        static_cast<long>(a.n), static_cast<long>(a.k), tflops, a.mamf_tflops,
        100.0 * (tflops / a.mamf_tflops - 1.0));
    EXPECT_LE(tflops, a.mamf_tflops * 1.0005) << hw.device.name;
    EXPECT_GE(tflops, a.mamf_tflops * (1.0 - a.max_shortfall)) << hw.device.name;
  }
}

// Tile behaviour: with short K the per-tile prologue / epilogue, which does not speed up in
// fp8, takes a larger share, so fp8's gain over bf16 shrinks from the rate ratio r = 1.767
// toward 1 (H100, 8192 x 8192 GEMMs, compute-bound).
TEST(BorrowedCalibration, Fp8GainOverBf16ShrinksWithShortK) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model(calibration("h100_xla.yaml"), h100.achievable);
  const double r = (1979.0 * 0.709) / (989.0 * 0.803);
  double previous = r;
  for (int64_t k : {16384, 4096, 1024, 256}) {
    const KernelDesc bf16 = gemm_kernel(DType::kBf16, 1, 8192, 8192, k);
    KernelDesc fp8 = bf16;
    fp8.dtype = DType::kFp8;
    const double gain =
        model.core_seconds(bf16, h100.device) / model.core_seconds(fp8, h100.device);
    std::printf("k %ld: fp8 %.3fx bf16\n", static_cast<long>(k), gain);
    EXPECT_LT(gain, previous) << k;
    EXPECT_GT(gain, 1.0) << k;
    previous = gain;
  }
  EXPECT_LT(previous, 0.8 * r);  // k = 256: (256 + 149) r / (256 + 149 r) = 1.30
}

// The H100 file fits the layernorm curve (RMSNorm forward kernels), the elementwise curve (ReLU
// squared kernels), the softmax curve (torch.softmax) and curves of their own for Megatron's
// SwiGLU and cross-entropy: those ops and every streaming op borrow nothing, and layernorm
// borrows the curve of another op.
TEST(BorrowedCalibration, H100FileFitsItsMeasuredCurves) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model(calibration("h100_xla.yaml"), h100.achievable);
  for (const MemoryOp op :
       {MemoryOp::kRmsNorm, MemoryOp::kRelu, MemoryOp::kSwiglu, MemoryOp::kCrossEntropy,
        MemoryOp::kSoftmax, MemoryOp::kBinary, MemoryOp::kCopy, MemoryOp::kLayerNorm}) {
    EXPECT_EQ(note(model, memory_op(op), h100.device), "<none>") << memory_op_name(op);
  }
  EXPECT_EQ(note(model, gemm_kernel(DType::kTf32, 1, 64, 64, 64), h100.device), "<none>");
  EXPECT_EQ(note(model, gemm_kernel(DType::kFp32, 1, 64, 64, 64), h100.device), "<none>");
}

TEST(BorrowedCalibration, RooflineNotesOnlyTheFp32Fallback) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const RooflineKernelCost roofline({});
  EXPECT_FALSE(
      roofline.borrowed_calibration(gemm_kernel(DType::kFp16, 1, 64, 64, 64), a100.device));
  KernelDesc k = memory_op(MemoryOp::kGelu);
  k.dtype = DType::kFp8;
  EXPECT_FALSE(roofline.borrowed_calibration(k, a100.device)) << "no arithmetic, nothing borrowed";
  k.flops = 1e6;
  EXPECT_EQ(roofline.borrowed_calibration(k, a100.device).value_or(""),
            "memory_bound fp8: no fp8 peak on A100-SXM4-80GB, arithmetic priced at the fp32 peak");
}

TEST(BorrowedCalibration, NotesOfAGraphAreDistinctSortedAndSplit) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model(calibration("a100_llmcompass.yaml"), a100.achievable);
  TaskGraph graph;
  for (int r = 0; r < 2; ++r)
    graph.add_rank(RankInfo{"rank", 1, {"compute"}});
  const KernelDescId rms = graph.add_kernel_desc(memory_op(MemoryOp::kRmsNorm));
  for (RankId r = 0; r < 2; ++r) {
    graph.add_kernel(r, 0, "gemm", "aten::mm", gemm_kernel(DType::kBf16, 1, 64, 64, 64));
    graph.add_kernel(r, 0, "rms", "aten::rms_norm", rms);
    graph.add_kernel(r, 0, "rms", "aten::rms_norm", rms);
  }
  // A replayed kernel with a measured duration is not priced by the model.
  const TaskId fixed = graph.add_kernel(0, 0, "swiglu", "aten::silu", memory_op(MemoryOp::kSwiglu));
  graph.set_fixed_duration(fixed, Duration::from_us(3));
  graph.seal();

  EXPECT_EQ(
      borrowed_calibration_notes(model, graph, {a100.device}),
      (std::vector<std::string>{"rms_norm: no measured curve, priced with the layernorm curve"}));
  EXPECT_EQ(
      borrowed_calibration_notes(model, graph, {a100.device, h100.device}),
      (std::vector<std::string>{"calibration fitted on A100-SXM4-80GB, used for H100-SXM5-80GB",
                                "rms_norm: no measured curve, priced with the layernorm curve"}));
  EXPECT_THROW(borrowed_calibration_notes(model, graph, {}), std::invalid_argument);
}

// Memory ops priced on one unfitted curve for the same reason are one note naming them all (the
// B200 file as if its fit had measured GEMMs only).
TEST(BorrowedCalibration, OpsOnOneUnfittedCurveAreOneNote) {
  const HardwareProfile b200 = profile("b200_sxm_180gb.yaml");
  KernelCalibration gemm_only = calibration("b200_xla.yaml");
  std::erase_if(gemm_only.measurement, [](const auto& m) { return m.first != "gemm"; });
  std::erase_if(gemm_only.fit_errors, [](const FitError& e) { return !e.op.starts_with("gemm"); });
  const CalibratedKernelCost model(gemm_only, b200.achievable);
  TaskGraph graph;
  graph.add_rank(RankInfo{"rank", 1, {"compute"}});
  graph.add_kernel(0, 0, "relu", "aten::relu", memory_op(MemoryOp::kRelu));
  graph.add_kernel(0, 0, "add", "aten::add", memory_op(MemoryOp::kBinary));
  graph.add_kernel(0, 0, "ln", "aten::layer_norm", memory_op(MemoryOp::kLayerNorm));
  graph.add_kernel(0, 0, "mm", "aten::mm", gemm_kernel(DType::kBf16, 1, 64, 64, 64));
  graph.seal();
  const std::string rest =
      ": no measured curve, priced with the {} curve, which the calibration fitted on "
      "B200-SXM-180GB does not fit either (its parameters are defaults)";
  EXPECT_EQ(
      borrowed_calibration_notes(model, graph, {b200.device}),
      (std::vector<std::string>{"binary, relu" + fmt::format(fmt::runtime(rest), "elementwise"),
                                "layernorm" + fmt::format(fmt::runtime(rest), "torch_layernorm")}));
  // Nor does it fit fp32 GEMMs: its default parameters at the fp32 peak.
  EXPECT_EQ(note(model, gemm_kernel(DType::kFp32, 1, 64, 64, 64), b200.device),
            "gemm fp32: no fp32 fit in the calibration fitted on B200-SXM-180GB, priced with "
            "its default GEMM parameters at the fp32 peak");
}

}  // namespace
}  // namespace upsim

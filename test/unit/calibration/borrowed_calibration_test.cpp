#include "calibration/borrowed_calibration.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "calibration/kernel_measurements.h"
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
  EXPECT_EQ(note(model, gemm_kernel(DType::kTf32, 1, 4096, 4096, 4096), d),
            "gemm tf32: no tf32 fit in the calibration fitted on A100-SXM4-80GB, priced with "
            "its default GEMM parameters at the tf32 peak");
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
  EXPECT_EQ(note(model, memory_op(MemoryOp::kCrossEntropy), d),
            "cross_entropy: no measured curve, priced with the softmax curve");
  EXPECT_EQ(note(model, fused_attention(), d),
            "attention: no attention section in the calibration fitted on A100-SXM4-80GB, "
            "FlashAttention-2 efficiencies measured on A100 (Dao 2023, arXiv 2307.08691)");
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
// rate (MAMF fp8 1402.6 vs bf16 794.5 TFLOP/s, ml-engineering's table), so a large
// compute-bound GEMM runs 1.766x faster than in bf16, not the datasheet's 2x.
TEST(BorrowedCalibration, Fp8GemmOnH100UsesTheBf16FitAtTheMeasuredFp8Rate) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  EXPECT_EQ(h100.achievable.fp8_compute, 0.709);
  const CalibratedKernelCost model(calibration("h100_xla.yaml"), h100.achievable);
  const KernelDesc bf16 = gemm_kernel(DType::kBf16, 1, 16384, 16384, 16384);
  KernelDesc fp8 = bf16;
  fp8.dtype = DType::kFp8;
  const double ratio = (1979.0 * 0.709) / (989.0 * 0.803);
  EXPECT_NEAR(model.core_seconds(bf16, h100.device) / model.core_seconds(fp8, h100.device), ratio,
              1e-9);
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
  EXPECT_NEAR(
      peak_ratio.core_seconds(bf16, h100.device) / peak_ratio.core_seconds(fp8, h100.device),
      1979.0 / 989.0, 1e-9);
  EXPECT_EQ(note(peak_ratio, fp8, h100.device),
            "gemm fp8: no fp8 fit in the calibration fitted on H100-SXM5-80GB and no measured "
            "fp8 rate for H100-SXM5-80GB, bf16 fit x datasheet fp8/bf16 peak ratio 2.001");
}

TEST(BorrowedCalibration, H100FileHasNoMemoryCurveFits) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const CalibratedKernelCost model(calibration("h100_xla.yaml"), h100.achievable);
  EXPECT_EQ(note(model, memory_op(MemoryOp::kRmsNorm), h100.device),
            "rms_norm: no measured curve, priced with the layernorm curve, which the calibration "
            "fitted on H100-SXM5-80GB does not fit either (its parameters are defaults)");
  EXPECT_EQ(note(model, gemm_kernel(DType::kTf32, 1, 64, 64, 64), h100.device), "<none>");
  EXPECT_EQ(note(model, gemm_kernel(DType::kFp32, 1, 64, 64, 64), h100.device),
            "gemm fp32: no fp32 fit in the calibration fitted on H100-SXM5-80GB, priced with "
            "its default GEMM parameters at the fp32 peak");
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

}  // namespace
}  // namespace upsim

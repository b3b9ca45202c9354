// CalibratedKernelCost: dispatch by kernel class, the calibration file schema (round trip and
// errors) and building the model by name from a scenario section.
#include "calibration/calibrated_kernel_cost.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "calibration/fitting/kernel_measurements.h"
#include "calibration/model_registry.h"
#include "sim/config/config_error.h"
#include "test/unit/calibration/test_device.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

using test::test_device;

KernelCalibration test_calibration() {
  KernelCalibration c;
  c.fitted_on = "test-gpu";
  c.source = "hand-made";
  c.kernel_overhead = Duration::from_us(5);
  c.curve_of_op = default_curve_of_op();
  c.curves["elementwise"] = MemoryCurve{};
  c.curves["softmax"] = MemoryCurve{0.5, 1024, 2.0};
  c.curves["layernorm"] = MemoryCurve{};
  GemmParams fp32;
  fp32.tile_m = 64;
  fp32.tile_n = 64;
  c.gemm_by_dtype[static_cast<size_t>(DType::kFp32)] = fp32;
  c.measurement["gemm"] = HarnessOverhead{Duration::from_us(30), Duration::from_us(20), 1.5};
  c.split = "alternate";
  c.fit_errors.push_back(FitError{"gemm", 3, 2, 0.01, 0.02, "published"});
  return c;
}

TEST(CalibratedKernelCost, DispatchesByClassAndAddsTheOverhead) {
  const CalibratedKernelCost model(test_calibration(), {1.0, 1.0});
  // GEMM fp16 256 x 640 x 1000 with the default 128 x 128 tile: 3.2768 us + 5 us.
  EXPECT_EQ(model.kernel_duration(gemm_kernel(DType::kFp16, 1, 256, 640, 1000), test_device()).ps(),
            8'276'800);
  // Softmax on its own curve: 1000 x 4096 fp16 rows of 8192 B > 1024 B: (2 x 8.192e6 + 8.192e6)
  // B / 500 GB/s = 49.152 us.
  const KernelDesc softmax = memory_op_kernel(MemoryOp::kSoftmax, DType::kFp16, 1000, 4096);
  EXPECT_NEAR(model.core_seconds(softmax, test_device()), 49.152e-6, 1e-15);
  // fp32 uses its own GEMM entry (64 x 64 tiles): 256 x 640 -> 40 tiles, 4 waves of
  // 2 x 64 x 64 x 1000 x 10 / 1e13 = 8.192 us.
  EXPECT_NEAR(model.core_seconds(gemm_kernel(DType::kFp32, 1, 256, 640, 1000), test_device()),
              4 * 8.192e-6, 1e-15);
  KernelDesc embedding;
  embedding.cls = KernelClass::kEmbeddingForward;
  embedding.embedding =
      EmbeddingShape{.batch = 100, .tables = 1, .rows = 1000000, .dim = 64, .pooling = 10};
  EXPECT_GT(model.core_seconds(embedding, test_device()), 0.0);
  // An embedding op carries its own kernel floors: no kernel_overhead on top.
  EXPECT_EQ(model.kernel_duration(embedding, test_device()),
            Duration::from_seconds_f(model.core_seconds(embedding, test_device())));
  // SGD foreach over 400 tensors of 1000 fp32 elements: 7 launches (64 tensors each at depth
  // 2); 400000 x (8 + 4) B / 1000 GB/s = 4.8 us + 6 extra launches x 5 us in the core time,
  // + 5 us kernel_overhead.
  KernelDesc sgd;
  sgd.memory_op = MemoryOp::kOptimizer;
  sgd.optimizer =
      OptimizerShape{OptimizerKind::kSgd, OptimizerImpl::kForeach, std::vector<int64_t>(400, 1000)};
  EXPECT_NEAR(model.core_seconds(sgd, test_device()), 4.8e-6 + 30e-6, 1e-15);
  EXPECT_EQ(model.kernel_duration(sgd, test_device()), Duration::from_ns(39800));
}

TEST(CalibratedKernelCost, YamlRoundTripsExactly) {
  const KernelCalibration c = test_calibration();
  const std::string text = kernel_calibration_yaml(c, "# test\n");
  ConfigDocument doc = ConfigDocument::parse_string(text, "round_trip.yaml");
  const KernelCalibration back = load_kernel_calibration(doc.root());
  doc.check_all_keys_used();
  EXPECT_EQ(kernel_calibration_yaml(back, "# test\n"), text);
  EXPECT_EQ(back.gemm_for(DType::kFp32).tile_m, 64);
  EXPECT_EQ(back.gemm_for(DType::kFp16).tile_m, 128);
  EXPECT_DOUBLE_EQ(back.measurement.at("gemm").compute_speedup, 1.5);
  EXPECT_EQ(back.curve_of_op[static_cast<size_t>(MemoryOp::kRelu)], "elementwise");
}

/// The error message of loading `text` (a calibration document).
std::string load_error(const std::string& text) {
  ConfigDocument doc = ConfigDocument::parse_string(text, "bad.yaml");
  try {
    load_kernel_calibration(doc.root());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(CalibratedKernelCost, BadFilesGiveClearErrors) {
  const std::string good = kernel_calibration_yaml(test_calibration(), "");
  EXPECT_NE(load_error(replaced(good, "    relu: elementwise\n", "    relux: elementwise\n"))
                .find("unknown op `relux`"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(good, "    relu: elementwise\n", "")).find("missing op `relu`"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(good, "    relu: elementwise\n", "    relu: fancy\n"))
                .find("curve `fancy` is not defined"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(good, "  fp32: {", "  fp64: {")).find("unknown dtype `fp64`"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(good, "tile_m: 128", "tile_m: 0"))
                .find("tile_m: must be between 1 and 4096, got 0"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(good, "long_row_read_passes: 2", "long_row_read_passes: 0.5"))
                .find("long_row_read_passes: must be between 1 and 64, got 0.5"),
            std::string::npos);
  // Outside the documented ranges: a scale that prices every GEMM at 1e-300 of its roofline
  // time, a launch floor of a day.
  const std::string scale = load_error(replaced(good, "compute_scale: 1", "compute_scale: 1e-300"));
  EXPECT_NE(scale.find("compute_scale: must be between 0.01 and 100, got 1e-300"),
            std::string::npos)
      << scale;
  EXPECT_NE(load_error(replaced(good, "kernel_overhead: 5us", "kernel_overhead: 86400s"))
                .find("kernel_overhead: must be between 0 ps and 1 ms"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(good, "kernel_overhead: 5us\n", "")).find("kernel_overhead"),
            std::string::npos);
  // fitted_on_device: optional; when given, every key and a compute capability major.minor.
  const std::string device =
      "fitted_on_device: {compute_capability: 8.0, sm_count: 108, sm_boost_clock_mhz: 1410}\n";
  const std::string with_device = replaced(good, "source:", device + "source:");
  EXPECT_EQ(load_error(with_device), "no error");
  EXPECT_NE(load_error(replaced(with_device, "compute_capability: 8.0", "compute_capability: 80"))
                .find("must be major.minor"),
            std::string::npos);
  EXPECT_NE(load_error(replaced(with_device, ", sm_count: 108", "")).find("sm_count"),
            std::string::npos);
}

TEST(CalibratedKernelCost, RegistryBuildsItFromTheShippedFile) {
  ConfigDocument hw_doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_40gb.yaml");
  const HardwareProfile hw = load_hardware_profile(hw_doc.root());
  // A scenario section in configs/: the path is relative to the file holding it.
  ConfigDocument doc = ConfigDocument::parse_string(
      "kernels: {model: calibrated, calibration: calibration/a100_llmcompass.yaml}\n",
      (kConfigs / "scenario.yaml").string());
  const auto model = make_kernel_cost_model(doc.root().child("kernels"), hw);
  doc.check_all_keys_used();
  // A big fp16 GEMM runs near the profile's achievable rate (312 TFLOP/s x 0.869).
  const KernelDesc big = gemm_kernel(DType::kFp16, 1, 8192, 8192, 8192);
  const double seconds = (model->kernel_duration(big, hw.device) - Duration::from_us(5)).seconds();
  const double tflops = 2.0 * 8192.0 * 8192.0 * 8192.0 / seconds * 1e-12;
  EXPECT_GT(tflops, 0.9 * 312 * 0.869);
  EXPECT_LT(tflops, 312 * 0.869);

  ConfigDocument unknown = ConfigDocument::parse_string("kernels: {model: calibratd}\n", "s.yaml");
  try {
    make_kernel_cost_model(unknown.root().child("kernels"), hw);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("calibrated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace upsim

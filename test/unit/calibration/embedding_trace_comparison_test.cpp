// The data-distribution-aware embedding-bag model (calibration/embedding_bag_model.h) against
// the FBGEMM embedding ops of the 8x V100 TorchRec DLRM traces (test/data/dlrm_v100_embedding,
// derived from ../shared/data/param-et-replay: shapes from the execution trace, durations from
// the Kineto trace). Predicted = core time + kernel_overhead of the shipped calibration, on the
// V100-SXM2-32GB profile.
//
// What it shows (issue 4 asks for the error to be reported, not bounded): these ops are tiny
// (batch 128, dim 16, 768..13312 lookups: 0.05..0.9 MB of rows), so their time is launch and
// latency, not bandwidth. The forward is one kernel whose time grows with the pooling factor
// (a warp walks its bag's rows in sequence), the backward is 14..20 kernels. The model, a
// bandwidth model with one fixed per-kernel time, underestimates both: forward geomean |e| about
// 46%, backward about 94%. The test pins these numbers so that a change to the model shows here.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/kernel_measurements.h"
#include "calibration/kernel_validation.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;
const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

TEST(EmbeddingTraceComparison, V100DlrmEmbeddingOps) {
  ConfigDocument hw_doc = ConfigDocument::load_file(kConfigs / "hardware" / "v100_sxm2_32gb.yaml");
  const HardwareProfile v100 = load_hardware_profile(hw_doc.root());
  ConfigDocument cal_doc =
      ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  const CalibratedKernelCost model(load_kernel_calibration(cal_doc.root()), v100.achievable);
  const std::vector<KernelMeasurement> ops =
      read_embedding_op_csv(kData / "dlrm_v100_embedding" / "embedding_ops.csv");
  ASSERT_EQ(ops.size(), 16u);
  EXPECT_EQ(ops[0].kernel.embedding.index_bytes, 8);
  EXPECT_EQ(ops[0].kernel.embedding.optimizer, FusedEmbeddingOptimizer::kAdagrad);
  EXPECT_DOUBLE_EQ(ops[0].kernel.embedding.pooling, 2.0);  // 768 / (128 x 3)

  std::printf("%s", format_kernel_points(ops, model, v100.device).c_str());
  const std::vector<KernelValidationRow> rows = validate_kernels(ops, model, v100.device);
  std::printf("%s", format_kernel_validation(rows).c_str());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op, "embedding_forward");
  EXPECT_NEAR(rows[0].held_out_geomean, 0.46, 0.02);
  EXPECT_EQ(rows[1].op, "embedding_backward");
  EXPECT_NEAR(rows[1].held_out_geomean, 0.94, 0.02);
}

}  // namespace
}  // namespace upsim

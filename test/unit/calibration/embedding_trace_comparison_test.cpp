// The embedding-bag model (calibration/embedding_bag_model.h) against the FBGEMM embedding ops
// of the 8x V100 TorchRec DLRM traces (test/data/dlrm_v100_embedding, derived from
// test/data/param-et-replay: shapes from the execution trace, durations from the Kineto
// trace), on the V100-SXM2-32GB profile.
//
// Split: ranks 0, 2, 4, 6 train, ranks 1, 3, 5, 7 held out (the `split` column of
// embedding_ops.csv). The latency terms are fitted (fit_embedding_latencies) on the per-kernel
// durations of the training ranks only (embedding_kernels.csv); the test checks that this fit is
// what EmbeddingParams and the shipped calibration carry, then prints measured vs predicted per
// op and the train / held-out geomean |e|.
//
// Bounds: the backward (14..20 kernels, most at the floor) is within 3% held out; the forward
// is one latency-bound kernel whose time follows the longest bag of its 3 tables, which the
// trace does not give (only the op's total lookups), so ranks with the same mean pooling differ
// by 20% (rank 6: pooling 4.0, 11 us; rank 7: 5.0, 9 us). Its held-out geomean is about 14%,
// above the seed paper's 10%; the bounds below are what is achieved plus a margin.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/embedding_bag_model.h"
#include "calibration/fitting/kernel_measurements.h"
#include "calibration/fitting/kernel_validation.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;
const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ','))
    out.push_back(field);
  return out;
}

/// Rows of a CSV with a header, '#' lines skipped, as column -> value maps.
std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split_csv(line);
    if (header.empty()) {
      header = fields;
      continue;
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < fields.size(); ++i)
      row[header[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

/// The per-kernel samples of the training ranks (even), with each op's lookups and bags from
/// embedding_ops.csv.
std::vector<EmbeddingKernelSample> training_kernels() {
  const auto dir = kData / "dlrm_v100_embedding";
  std::map<std::string, std::pair<double, double>> shape;  // "rank op" -> (lookups, bags)
  for (const auto& op : read_csv(dir / "embedding_ops.csv")) {
    shape[op.at("rank") + " " + op.at("op")] = {
        std::stod(op.at("lookups")), std::stod(op.at("batch")) * std::stod(op.at("tables"))};
  }
  std::vector<EmbeddingKernelSample> out;
  for (const auto& k : read_csv(dir / "embedding_kernels.csv")) {
    if (std::stoi(k.at("rank")) % 2 != 0) continue;
    const std::string op = k.at("rank") + " " + k.at("op");
    const std::optional<EmbeddingKernelRole> role = parse_embedding_kernel_role(k.at("kernel"));
    EXPECT_TRUE(role.has_value()) << k.at("kernel");
    if (!role) continue;
    out.push_back(EmbeddingKernelSample{op, *role, shape.at(op).first, shape.at(op).second,
                                        std::stod(k.at("time_us")) * 1e-6});
  }
  return out;
}

TEST(EmbeddingTraceComparison, FitOnTrainingRanksIsTheShippedParameters) {
  const std::vector<EmbeddingKernelSample> train = training_kernels();
  ASSERT_EQ(train.size(), 4u + 14u + 15u + 20u + 15u);  // 4 forward + ranks 0, 2, 4, 6 backward
  const EmbeddingParams fit = fit_embedding_latencies(train, EmbeddingParams{});
  std::printf(
      "fit (ranks 0 2 4 6): floor %.3f us, forward %.3f + %.3f Lm us, index step %.3f us, sort "
      "tile %.3f, upsweep %.3f, pass %.3f, encode %.3f, update %.3f us\n",
      fit.kernel_floor.us(), fit.forward_latency.us(), fit.forward_row_latency.us(),
      fit.index_step_latency.us(), fit.sort_tile_latency.us(), fit.sort_upsweep_latency.us(),
      fit.sort_pass_latency.us(), fit.encode_latency.us(), fit.update_latency.us());
  const EmbeddingParams shipped;
  EXPECT_EQ(fit.kernel_floor, shipped.kernel_floor);
  EXPECT_EQ(fit.forward_latency, shipped.forward_latency);
  EXPECT_EQ(fit.forward_row_latency, shipped.forward_row_latency);
  EXPECT_EQ(fit.index_step_latency, shipped.index_step_latency);
  EXPECT_EQ(fit.sort_tile_latency, shipped.sort_tile_latency);
  EXPECT_EQ(fit.sort_upsweep_latency, shipped.sort_upsweep_latency);
  EXPECT_EQ(fit.sort_pass_latency, shipped.sort_pass_latency);
  EXPECT_EQ(fit.encode_latency, shipped.encode_latency);
  EXPECT_EQ(fit.update_latency, shipped.update_latency);

  ConfigDocument cal_doc =
      ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  const EmbeddingParams file = load_kernel_calibration(cal_doc.root()).embedding;
  EXPECT_EQ(file.kernel_floor, fit.kernel_floor);
  EXPECT_EQ(file.update_latency, fit.update_latency);
  EXPECT_EQ(file.sort_single_tile_items, shipped.sort_single_tile_items);
}

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
  EXPECT_FALSE(ops[0].held_out);                           // rank 0
  EXPECT_TRUE(ops[2].held_out);                            // rank 1

  // The model's kernel count is the trace's on every rank (`kernels` column).
  const auto rows_csv = read_csv(kData / "dlrm_v100_embedding" / "embedding_ops.csv");
  ASSERT_EQ(rows_csv.size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const EmbeddingOpTime t =
        embedding_op_time(ops[i].kernel, v100.device, v100.achievable, EmbeddingParams{});
    EXPECT_EQ(t.kernels, std::stoi(rows_csv[i].at("kernels"))) << ops[i].origin;
    EXPECT_GT(t.latency_seconds, t.bandwidth_seconds) << ops[i].origin;  // latency-bound
  }

  std::printf("%s", format_kernel_points(ops, model, v100.device).c_str());
  const std::vector<KernelValidationRow> rows = validate_kernels(ops, model, v100.device);
  std::printf("%s", format_kernel_validation(rows).c_str());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op, "embedding_forward");
  EXPECT_EQ(rows[0].train_points, 4u);
  EXPECT_EQ(rows[0].held_out_points, 4u);
  EXPECT_LT(rows[0].held_out_geomean, 0.20);
  EXPECT_LT(rows[0].held_out_max, 0.35);
  EXPECT_EQ(rows[1].op, "embedding_backward");
  EXPECT_LT(rows[1].held_out_geomean, 0.06);
  EXPECT_LT(rows[1].held_out_max, 0.10);
}

}  // namespace
}  // namespace upsim

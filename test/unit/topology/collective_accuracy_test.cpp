// Accuracy of the flow network's all-reduce against every measured point of eight systems
// (test/data/nccl-tests/ and test/data/llmcompass/, see their SOURCES.md), on the shipped
// fabrics of configs/topologies/. Error as ARCHITECTURE.md defines it: e = predicted / measured -
// 1, summarised by the geometric mean of |e|; plateau error = bus bandwidth error at the largest
// measured size.
//
// What was fitted (topology/nccl_tuning.cpp): 15 parameters on all 166 points shown here -- so
// the errors below are in-sample. Per system: the Ampere single-node LL cap and the NVLink Simple
// ring hop latency on the 4x A100 sweep (32 points); the launch overhead and the multi-node LL /
// LL128 caps on the small and mid sizes of every sweep; NVLink efficiency on the
// 4x A100 and 1x8 A100 plateaus; TCPXO efficiency and three TCPXO hop latencies on the GCP
// sweep (31 points); RDMA efficiency and NVLS efficiency over nodes on the 2x8 and 4x8 H100
// InfiniBand sweeps (32 points each) and the 5 OCI H100 points; NVLS efficiency within a node,
// the NVLS hop latency and the Hopper latency factor on the DGX H100 sweep (32 points) and the
// multi-node H100 sweeps. Everything else comes from NCCL's tuning tables and
// constants and the fabrics' datasheet numbers. Leaving whole systems out is much harder (the
// held-out errors are in collective_cross_validation_test.cpp). ASTRA-sim publishes 9.7-20.6% for
// HGX H100 all-reduce.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "sim/config/config_node.h"
#include "topology/fabric_loader.h"
#include "topology/fitting/collective_validation.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;

// Accuracy bounds of the collective models.
constexpr double kPlateauBound = 0.05;
constexpr double kGeomeanBound = 0.15;
constexpr double kSinglePointBound = 0.05;

TEST(CollectiveAccuracy, AllReduceMatchesMeasuredSystems) {
  const auto cases = collective_validation_cases();
  ASSERT_EQ(cases.size(), 8u);
  size_t points = 0;
  for (const CollectiveValidationCase& c : cases) {
    ConfigDocument doc = ConfigDocument::load_file(kConfigs / c.topology);
    const Fabric fabric = load_fabric(doc.root());
    const std::vector<MeasuredCollective> measured = read_case(c, kData);
    const CollectiveValidation v =
        validate_all_reduce(fabric, nccl_like_tuning(), measured, c.system);
    std::cout << format_validation(v) << "\n";
    points += v.points.size();
    EXPECT_LE(std::abs(v.plateau_error), kPlateauBound) << c.system;
    if (v.points.size() == 1) {
      EXPECT_LE(std::abs(v.points.front().error), kSinglePointBound) << c.system;
    } else {
      EXPECT_LE(v.geomean_abs_error, kGeomeanBound) << c.system;
    }
  }
  EXPECT_EQ(points, 166u);
}

TEST(CollectiveAccuracy, ReadersNameTheFileOfBadInput) {
  EXPECT_THROW(read_llmcompass_allreduce(kData / "no-such-file.csv"), std::runtime_error);
  try {
    read_nccl_tests_allreduce(kData / "nccl-tests" / "nccl_tests_allreduce_published.csv",
                              "no_such_run");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_run"), std::string::npos) << e.what();
  }
  const auto gcp = read_nccl_tests_allreduce(
      kData / "nccl-tests" / "nccl_tests_allreduce_published.csv", "gcp_a3mega_2x8_h100_tcpxo");
  ASSERT_EQ(gcp.size(), 31u);
  EXPECT_EQ(gcp.front().bytes, 8);
  EXPECT_DOUBLE_EQ(gcp.back().time_us, 47535.0);
}

}  // namespace
}  // namespace upsim

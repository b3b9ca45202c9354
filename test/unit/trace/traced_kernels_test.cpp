// The kernels of a traced rank as measurements (workloads/trace/traced_kernels.h), on the PARAM
// DLRM traces (8x V100).
#include "workloads/trace/traced_kernels.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "workloads/trace/trace_replay.h"

namespace upsim {
namespace {

const std::filesystem::path kTraces = UPSIM_TRACE_TEST_DATA;

TEST(TracedKernels, EveryKernelOfARankWithItsDurationAndModelModesDescription) {
  const LoadedTraces traces = load_trace_directory(kTraces / "dlrm");
  ASSERT_EQ(traces.ranks.size(), 8u);
  const std::vector<TracedKernel> kernels = traced_kernels(traces.ranks[0]);
  ASSERT_FALSE(kernels.empty());
  size_t gemms = 0, collectives = 0, kept = 0;
  for (const TracedKernel& k : kernels) {
    EXPECT_GE(k.duration.seconds(), 0.0) << k.name;
    if (k.collective) {
      ++collectives;
      EXPECT_FALSE(k.desc) << k.name;
      EXPECT_NE(k.name.find("nccl"), std::string::npos) << k.name;
    } else if (!k.desc) {
      ++kept;
    } else if (k.desc->cls == KernelClass::kGemm) {
      ++gemms;
      EXPECT_EQ(k.desc->dtype, DType::kFp32) << k.name;  // V100 SIMT sgemm
      EXPECT_GT(k.desc->m * k.desc->n * k.desc->k, 0) << k.name;
    }
  }
  // Rank 0's step: 23 GEMMs (the MLPs forward and backward, the interaction's bmm), 8 NCCL
  // kernels, the embedding kernels kept measured.
  EXPECT_EQ(gemms, 23u);
  EXPECT_EQ(collectives, 8u);
  EXPECT_GT(kept, 0u);
}

}  // namespace
}  // namespace upsim

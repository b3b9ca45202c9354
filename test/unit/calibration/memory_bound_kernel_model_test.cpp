#include "calibration/memory_bound_kernel_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "calibration/fitting/kernel_measurements.h"
#include "test/unit/calibration/test_device.h"

namespace upsim {
namespace {

using test::test_device;

TEST(MemoryBoundKernelModel, BytesOverScaledAchievableBandwidth) {
  // fp16 gelu over 1e6 elements: 2e6 B read + 2e6 B written at 1000 GB/s x 0.8 x 1.25 = 4 us.
  const KernelDesc gelu = memory_op_kernel(MemoryOp::kGelu, DType::kFp16, 1, 1000000);
  MemoryCurve c;
  c.bandwidth_scale = 1.25;
  EXPECT_NEAR(memory_bound_seconds(gelu, test_device(), {1.0, 0.8}, c), 4e-6, 1e-18);
}

TEST(MemoryBoundKernelModel, LongRowsAreReadAgain) {
  // Softmax 1000 rows x 4096 fp16 (8192 B per row): 8.192e6 B read, 8.192e6 B written.
  const KernelDesc softmax = memory_op_kernel(MemoryOp::kSoftmax, DType::kFp16, 1000, 4096);
  EXPECT_EQ(softmax.row_elements, 4096);
  MemoryCurve c;
  c.long_row_bytes = 8192;  // rows of exactly 8192 B are not long
  c.long_row_read_passes = 3.0;
  EXPECT_NEAR(memory_bound_seconds(softmax, test_device(), {1.0, 1.0}, c), 16.384e-6, 1e-15);
  c.long_row_bytes = 4096;  // now they are: 3 reads + 1 write
  EXPECT_NEAR(memory_bound_seconds(softmax, test_device(), {1.0, 1.0}, c), 4 * 8.192e-6, 1e-15);
}

TEST(MemoryBoundKernelModel, ReReadsRampInLogRowSizeToFullReReads) {
  // Ramp from 16 KiB (1 read) to 64 KiB (3 reads), linear in log2 of the row's bytes.
  MemoryCurve c;
  c.long_row_bytes = 16384;
  c.full_reread_row_bytes = 65536;
  c.long_row_read_passes = 3.0;
  EXPECT_DOUBLE_EQ(read_passes(c, 8192), 1.0);
  EXPECT_DOUBLE_EQ(read_passes(c, 16384), 1.0);
  EXPECT_DOUBLE_EQ(read_passes(c, 32768), 2.0);  // half way in log2: 1 + 2 x 1/2
  EXPECT_NEAR(read_passes(c, 24576), 1.0 + 2.0 * std::log2(1.5) / 2.0, 1e-12);
  EXPECT_DOUBLE_EQ(read_passes(c, 65536), 3.0);
  EXPECT_DOUBLE_EQ(read_passes(c, 1 << 20), 3.0);
  // full_reread_row_bytes <= long_row_bytes (default 0): the step of before.
  c.full_reread_row_bytes = 0;
  EXPECT_DOUBLE_EQ(read_passes(c, 16385), 3.0);
  c.full_reread_row_bytes = -1;
  EXPECT_THROW(check_memory_curve(c), std::invalid_argument);
}

TEST(MemoryBoundKernelModel, FlopsAreIgnoredAndBadInputsRejected) {
  KernelDesc k = memory_op_kernel(MemoryOp::kTanh, DType::kFp32, 1, 1000);
  const double base = memory_bound_seconds(k, test_device(), {1.0, 1.0}, MemoryCurve{});
  k.flops = 1e12;
  EXPECT_DOUBLE_EQ(memory_bound_seconds(k, test_device(), {1.0, 1.0}, MemoryCurve{}), base);
  k.bytes_read = -1.0;
  EXPECT_THROW(memory_bound_seconds(k, test_device(), {1.0, 1.0}, MemoryCurve{}),
               std::invalid_argument);
  MemoryCurve bad;
  bad.long_row_read_passes = 0.5;
  EXPECT_THROW(check_memory_curve(bad), std::invalid_argument);
}

TEST(MemoryBoundKernelModel, LayerNormReadsItsWeights) {
  const KernelDesc ln = memory_op_kernel(MemoryOp::kLayerNorm, DType::kFp16, 10, 100);
  EXPECT_DOUBLE_EQ(ln.bytes_read, 2.0 * 1000 + 2.0 * 2 * 100);
  EXPECT_DOUBLE_EQ(ln.bytes_written, 2.0 * 1000);
}

}  // namespace
}  // namespace upsim

// The made-up GPU of the calibration unit tests: round numbers, so that expected times can be
// computed by hand in each test's comments.
#pragma once

#include "sim/cost_models.h"

namespace upsim::test {

/// fp32 10 TFLOP/s, fp16 100 TFLOP/s, HBM 1000 GB/s, L2 10 MiB at 2000 GB/s, 10 SMs.
inline DeviceProfile test_device() {
  DeviceProfile d;
  d.name = "test-gpu";
  d.peak_flops[static_cast<size_t>(DType::kFp32)] = FlopRate::teraflops(10.0);
  d.peak_flops[static_cast<size_t>(DType::kFp16)] = FlopRate::teraflops(100.0);
  d.hbm_bandwidth = Bandwidth::gigabytes_per_second(1000.0);
  d.l2_bandwidth = Bandwidth::gigabytes_per_second(2000.0);
  d.l2_bytes = 10 * 1024 * 1024;
  d.sm_count = 10;
  return d;
}

}  // namespace upsim::test

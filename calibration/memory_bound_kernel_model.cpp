#include "calibration/memory_bound_kernel_model.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace upsim {

void check_memory_curve(const MemoryCurve& c) {
  if (!(c.bandwidth_scale > 0.0)) {
    throw std::invalid_argument(
        fmt::format("memory curve: bandwidth_scale must be positive, got {}", c.bandwidth_scale));
  }
  if (c.long_row_bytes < 0) {
    throw std::invalid_argument(
        fmt::format("memory curve: long_row_bytes must not be negative, got {}", c.long_row_bytes));
  }
  if (c.full_reread_row_bytes < 0) {
    throw std::invalid_argument(
        fmt::format("memory curve: full_reread_row_bytes must not be negative, got {}",
                    c.full_reread_row_bytes));
  }
  if (!(c.long_row_read_passes >= 1.0)) {
    throw std::invalid_argument(fmt::format(
        "memory curve: long_row_read_passes must be >= 1, got {}", c.long_row_read_passes));
  }
}

double read_passes(const MemoryCurve& c, int64_t row_bytes) {
  if (c.long_row_bytes <= 0 || row_bytes <= c.long_row_bytes) return 1.0;
  if (c.full_reread_row_bytes <= c.long_row_bytes || row_bytes >= c.full_reread_row_bytes) {
    return c.long_row_read_passes;
  }
  const double lo = static_cast<double>(c.long_row_bytes);
  const double span = std::log2(static_cast<double>(c.full_reread_row_bytes) / lo);
  const double x = std::log2(static_cast<double>(row_bytes) / lo) / span;
  return 1.0 + (c.long_row_read_passes - 1.0) * x;
}

double memory_bound_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                            const AchievableFractions& achievable, const MemoryCurve& curve) {
  if (!(kernel.bytes_read >= 0.0) || !(kernel.bytes_written >= 0.0)) {
    throw std::invalid_argument(
        fmt::format("memory-bound model: negative traffic ({} bytes read, {} written)",
                    kernel.bytes_read, kernel.bytes_written));
  }
  const double hbm = device.hbm_bandwidth.bytes_per_second();
  if (hbm <= 0.0) {
    throw std::invalid_argument(
        fmt::format("memory-bound model: device `{}` has no HBM bandwidth", device.name));
  }
  const double passes = read_passes(curve, kernel.row_elements * dtype_bytes(kernel.dtype));
  const double bandwidth = hbm * achievable.memory * curve.bandwidth_scale;
  return (kernel.bytes_read * passes + kernel.bytes_written) / bandwidth;
}

}  // namespace upsim

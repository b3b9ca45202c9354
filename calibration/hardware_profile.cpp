#include "calibration/hardware_profile.h"

#include <fmt/format.h>

#include <array>
#include <string>

namespace upsim {
namespace {

constexpr std::array<DType, kDTypeCount> kAllDTypes{DType::kFp32, DType::kTf32, DType::kFp16,
                                                    DType::kBf16, DType::kFp8,  DType::kInt8};

std::string valid_dtype_list() {
  std::string out;
  for (DType dtype : kAllDTypes) {
    if (!out.empty()) out += ", ";
    out += dtype_name(dtype);
  }
  return out;
}

Bandwidth memory_bandwidth(const ConfigNode& node, std::string_view key) {
  return node.get_bandwidth_in(key, kHardwareRanges.min_memory_bandwidth,
                               kHardwareRanges.max_memory_bandwidth);
}

double fraction(const ConfigNode& node, std::string_view key) {
  const double value = node.get_double(key);
  if (!(value > 0.0 && value <= 1.0)) {
    node.child(key).fail(fmt::format("must be a fraction in (0, 1], got {}", value));
  }
  return value;
}

}  // namespace

std::optional<Bandwidth> pcie_x16_bandwidth(int64_t generation) {
  // GT/s per lane x 16 lanes x 128/130 coding / 8 bits per byte.
  constexpr double kLanes = 16.0;
  constexpr double kCoding = 128.0 / 130.0;
  switch (generation) {
    case 3:
      return Bandwidth::bytes_per_second(8e9 * kLanes * kCoding / 8.0);
    case 4:
      return Bandwidth::bytes_per_second(16e9 * kLanes * kCoding / 8.0);
    case 5:
      return Bandwidth::bytes_per_second(32e9 * kLanes * kCoding / 8.0);
    default:
      return std::nullopt;
  }
}

HardwareProfile load_hardware_profile(const ConfigNode& node) {
  node.expect_map("a GPU hardware profile");
  HardwareProfile profile;
  DeviceProfile& device = profile.device;
  device.name = node.get_string("name");
  if (device.name.empty()) node.child("name").fail("must not be empty");

  const ConfigNode peaks = node.child("peak_flops");
  if (!peaks.is_map()) peaks.fail("must be a map from dtype to FLOP/s");
  for (const auto& [key, value] : peaks.map_entries()) {
    const std::optional<DType> dtype = parse_dtype(key);
    if (!dtype) {
      value.fail(fmt::format("unknown dtype `{}`; valid: {}", key, valid_dtype_list()));
    }
    if (value.as_flop_rate().flops_per_second() <= 0.0) {
      value.fail("must be a positive FLOP/s (omit a dtype the device has no unit for)");
    }
    const FlopRate rate = value.as_flop_rate_in(kHardwareRanges.min_peak, kHardwareRanges.max_peak);
    device.peak_flops[static_cast<size_t>(*dtype)] = rate;
  }
  if (device.peak(DType::kFp32).flops_per_second() <= 0.0) {
    peaks.fail("must give the fp32 peak");
  }

  const ConfigNode hbm = node.child("hbm");
  device.hbm_bandwidth = memory_bandwidth(hbm, "bandwidth");
  device.hbm_bytes =
      hbm.get_bytes_in("size", kHardwareRanges.min_memory_bytes, kHardwareRanges.max_memory_bytes);

  const ConfigNode l2 = node.child("l2");
  device.l2_bytes =
      l2.get_bytes_in("size", kHardwareRanges.min_l2_bytes, kHardwareRanges.max_l2_bytes);
  // L2 bandwidth is not on the datasheets; profiles give it only where it was measured.
  if (l2.has("bandwidth")) device.l2_bandwidth = memory_bandwidth(l2, "bandwidth");

  device.sm_count =
      static_cast<int32_t>(node.get_int_in("sm_count", 1, kHardwareRanges.max_sm_count));
  device.sm_boost_clock_mhz = static_cast<int32_t>(
      node.get_int_in("sm_boost_clock_mhz", 1, kHardwareRanges.max_sm_clock_mhz));

  const int64_t generation = node.get_int("pcie_generation");
  const std::optional<Bandwidth> host_link = pcie_x16_bandwidth(generation);
  if (!host_link) {
    node.child("pcie_generation").fail(fmt::format("must be 3, 4 or 5, got {}", generation));
  }
  device.host_link_bandwidth = *host_link;

  const ConfigNode achievable = node.child("achievable");
  profile.achievable.compute = fraction(achievable, "compute_fraction");
  profile.achievable.memory = fraction(achievable, "memory_fraction");
  if (achievable.has("fp8_compute_fraction")) {
    if (device.peak(DType::kFp8).flops_per_second() <= 0.0) {
      achievable.child("fp8_compute_fraction").fail("given, but the profile has no fp8 peak");
    }
    profile.achievable.fp8_compute = fraction(achievable, "fp8_compute_fraction");
  }
  // 0 .. 1 ms, the calibration file's range for the same quantity.
  if (node.has("kernel_overhead")) {
    profile.kernel_overhead =
        node.get_duration_in("kernel_overhead", Duration::zero(), Duration::from_ms(1));
  }
  return profile;
}

}  // namespace upsim

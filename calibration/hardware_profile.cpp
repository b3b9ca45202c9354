#include "calibration/hardware_profile.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <string>

#include "sim/config/quantity_parse.h"

namespace upsim {

int32_t compute_capability(const ConfigNode& node) {
  const std::string text = node.as_string();
  const size_t dot = text.find('.');
  const auto digits = [](std::string_view part) {
    return !part.empty() && part.size() <= 2 &&
           part.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (dot == std::string::npos || !digits(std::string_view(text).substr(0, dot)) ||
      std::string_view(text).substr(dot + 1).size() != 1 ||
      !digits(std::string_view(text).substr(dot + 1))) {
    node.fail(fmt::format("must be major.minor, e.g. 9.0 (H100) or 8.0 (A100), got `{}`", text));
  }
  const int32_t major = std::stoi(text.substr(0, dot));
  const int32_t minor = std::stoi(text.substr(dot + 1));
  if (major < 1) node.fail(fmt::format("must be at least 1.0, got `{}`", text));
  return major * 10 + minor;
}

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

namespace {

/// `key` of `profile` as its file writes it (before --set), range-checked there; the current
/// value when --set gave the key.
int64_t as_written_int(const ConfigNode& profile, std::string_view key, int64_t lo, int64_t hi) {
  const ConfigNode value = profile.child(key);
  const std::optional<ConfigNode> written = value.as_written();
  return (written ? *written : value).as_int_in(lo, hi);
}

/// Scales every stated peak by `scale` (the contract's what-if on SMs and clock); a scaled peak
/// outside kHardwareRanges fails at `blame`.
void scale_peaks(DeviceProfile& device, double scale, const ConfigNode& blame) {
  if (scale == 1.0) return;
  for (DType dtype : kAllDTypes) {
    FlopRate& peak = device.peak_flops[static_cast<size_t>(dtype)];
    if (peak.flops_per_second() <= 0.0) continue;
    peak = FlopRate::flops_per_second(peak.flops_per_second() * scale);
    if (peak.flops_per_second() < kHardwareRanges.min_peak.flops_per_second() ||
        peak.flops_per_second() > kHardwareRanges.max_peak.flops_per_second()) {
      blame.fail(fmt::format("scales the {} peak to {}, outside {} .. {}", dtype_name(dtype),
                             format_flop_rate(peak), format_flop_rate(kHardwareRanges.min_peak),
                             format_flop_rate(kHardwareRanges.max_peak)));
    }
  }
}

/// The SM clock kernels run at, as a fraction of sm_boost_clock_mhz: `sustained_sm_clock_mhz`
/// (a measured clock under sustained load), or from a power cap `power_limit_w` below `tdp_w`:
/// CMOS dynamic power P = a C V^2 f with the voltage following the clock in the DVFS range,
/// P ~ f^3, so f = boost x (limit / tdp)^(1/3) (a physics prior, not a measurement). 1 without
/// either. ConfigError for both at once, one power key without the other, a limit above the
/// TDP or a sustained clock above the boost clock.
double sustained_clock_scale(const ConfigNode& compute, const DeviceProfile& device) {
  const bool sustained = compute.has("sustained_sm_clock_mhz");
  const bool limit = compute.has("power_limit_w");
  const bool tdp = compute.has("tdp_w");
  if (sustained && (limit || tdp)) {
    compute.child("sustained_sm_clock_mhz")
        .fail("give either the sustained clock or a power limit (power_limit_w, tdp_w), not both");
  }
  if (sustained) {
    const int64_t mhz = compute.get_int_in("sustained_sm_clock_mhz", 1, device.sm_boost_clock_mhz);
    return static_cast<double>(mhz) / static_cast<double>(device.sm_boost_clock_mhz);
  }
  if (limit != tdp) {
    compute.child(limit ? "power_limit_w" : "tdp_w")
        .fail("needs both power_limit_w (the board's cap, W) and tdp_w (its rated TDP, W)");
  }
  if (!limit) return 1.0;
  const int64_t rated = compute.get_int_in("tdp_w", 1, 100'000);
  const int64_t cap = compute.get_int_in("power_limit_w", 1, rated);
  return std::cbrt(static_cast<double>(cap) / static_cast<double>(rated));
}

}  // namespace

HardwareProfile load_hardware_profile(const ConfigNode& profile) {
  profile.expect_map("a GPU hardware profile");
  HardwareProfile hardware;
  DeviceProfile& device = hardware.device;
  device.name = profile.get_string("name");
  if (profile.has("compute_capability")) {
    device.compute_capability = compute_capability(profile.child("compute_capability"));
  }
  if (device.name.empty()) profile.child("name").fail("must not be empty");
  if (profile.has("recorded_names")) {
    hardware.recorded_names = profile.get_string_list("recorded_names");
    for (const std::string& n : hardware.recorded_names) {
      if (n.empty()) profile.child("recorded_names").fail("a recorded name must not be empty");
    }
  }

  const ConfigNode compute = profile.read_for(kHardwareComputeUse);
  const ConfigNode peaks = compute.child("peak_flops");
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

  const ConfigNode memory = profile.read_for(kHardwareMemoryUse);
  device.hbm_bandwidth = memory_bandwidth(memory.child("hbm"), "bandwidth");
  device.hbm_bytes = profile.child("hbm").get_bytes_in("size", kHardwareRanges.min_memory_bytes,
                                                       kHardwareRanges.max_memory_bytes);

  const ConfigNode l2 = profile.read_for(kHardwareL2Use).child("l2");
  device.l2_bytes =
      l2.get_bytes_in("size", kHardwareRanges.min_l2_bytes, kHardwareRanges.max_l2_bytes);
  // L2 bandwidth is not on the datasheets; profiles give it only where it was measured.
  if (l2.has("bandwidth")) device.l2_bandwidth = memory_bandwidth(l2, "bandwidth");

  device.sm_count =
      static_cast<int32_t>(compute.get_int_in("sm_count", 1, kHardwareRanges.max_sm_count));
  device.sm_boost_clock_mhz = static_cast<int32_t>(
      compute.get_int_in("sm_boost_clock_mhz", 1, kHardwareRanges.max_sm_clock_mhz));
  // The SMs and clock the peaks are stated at (the contract); a what-if scales from them.
  const ConfigNode stated_at = compute.child_or_empty_map("peak_flops_at");
  const int64_t stated_sms =
      stated_at.get_int_in_or("sm_count", 1, kHardwareRanges.max_sm_count,
                              as_written_int(compute, "sm_count", 1, kHardwareRanges.max_sm_count));
  const int64_t stated_clock = stated_at.get_int_in_or(
      "sm_boost_clock_mhz", 1, kHardwareRanges.max_sm_clock_mhz,
      as_written_int(compute, "sm_boost_clock_mhz", 1, kHardwareRanges.max_sm_clock_mhz));
  hardware.stated_sm_count = static_cast<int32_t>(stated_sms);
  const double sm_scale = static_cast<double>(device.sm_count) / static_cast<double>(stated_sms);
  const double clock_scale =
      static_cast<double>(device.sm_boost_clock_mhz) / static_cast<double>(stated_clock);
  scale_peaks(device, sm_scale * clock_scale,
              compute.child(sm_scale != 1.0 ? "sm_count" : "sm_boost_clock_mhz"));
  if (clock_scale != 1.0 && device.l2_bandwidth.bytes_per_second() > 0.0) {
    device.l2_bandwidth = device.l2_bandwidth * clock_scale;
    if (device.l2_bandwidth.bytes_per_second() >
        kHardwareRanges.max_memory_bandwidth.bytes_per_second()) {
      compute.child("sm_boost_clock_mhz")
          .fail(fmt::format("scales the L2 bandwidth to {}, more than {}",
                            format_bandwidth(device.l2_bandwidth),
                            format_bandwidth(kHardwareRanges.max_memory_bandwidth)));
    }
  }

  const double sustained = sustained_clock_scale(compute, device);
  if (sustained != 1.0) {
    const char* key =
        compute.has("sustained_sm_clock_mhz") ? "sustained_sm_clock_mhz" : "power_limit_w";
    scale_peaks(device, sustained, compute.child(key));
    device.l2_bandwidth = device.l2_bandwidth * sustained;
    device.sustained_sm_clock_mhz =
        static_cast<int32_t>(std::lround(sustained * device.sm_boost_clock_mhz));
  }

  const ConfigNode host_link_node = profile.read_for(kHardwareHostLinkUse);
  const int64_t generation = host_link_node.get_int("pcie_generation");
  const std::optional<Bandwidth> host_link = pcie_x16_bandwidth(generation);
  if (!host_link) {
    host_link_node.child("pcie_generation")
        .fail(fmt::format("must be 3, 4 or 5, got {}", generation));
  }
  device.host_link_bandwidth = *host_link;

  hardware.achievable.compute = fraction(compute.child("achievable"), "compute_fraction");
  hardware.achievable.memory = fraction(memory.child("achievable"), "memory_fraction");
  const ConfigNode fp8 = profile.read_for(kHardwareFp8Use).child("achievable");
  if (fp8.has("fp8_compute_fraction")) {
    if (device.peak(DType::kFp8).flops_per_second() <= 0.0) {
      fp8.child("fp8_compute_fraction").fail("given, but the profile has no fp8 peak");
    }
    hardware.achievable.fp8_compute = fraction(fp8, "fp8_compute_fraction");
  }
  // 0 .. 1 ms, the calibration file's range for the same quantity.
  const ConfigNode overhead = profile.read_for(kHardwareKernelOverheadUse);
  if (overhead.has("kernel_overhead")) {
    hardware.kernel_overhead =
        overhead.get_duration_in("kernel_overhead", Duration::zero(), Duration::from_ms(1));
  }
  return hardware;
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> hardware_profile_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"name", "the GPU's name as the profile states it"},
      {"recorded_names[]", "GPU names that traces record for this profile's GPU"},
      {"compute_capability", "CUDA compute capability, major.minor"},
      {"sm_count", "streaming multiprocessors"},
      {"sm_boost_clock_mhz", "SM boost clock"},
      {"peak_flops.*", "datasheet dense peak of that element type"},
      {"peak_flops_at.sm_count", "the SM count the peaks are stated at"},
      {"peak_flops_at.sm_boost_clock_mhz", "the clock the peaks are stated at"},
      {"hbm.size", "device memory"},
      {"hbm.bandwidth", "datasheet device-memory bandwidth"},
      {"l2.size", "L2 cache size"},
      {"l2.bandwidth", "L2 read bandwidth"},
      {"pcie_generation", "PCIe generation of the host link (x16)"},
      {"kernel_overhead", "GPU time every kernel takes beyond its modelled work"},
      {"achievable.compute_fraction", "share of the compute peaks real kernels reach (roofline)"},
      {"achievable.memory_fraction", "share of the HBM bandwidth real kernels reach"},
      {"achievable.fp8_compute_fraction", "share of the fp8 peak fp8 GEMMs reach"},
  };
  return kMeanings;
}

}  // namespace upsim

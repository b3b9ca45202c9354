#include "calibration/seed_curve_collective_cost.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "calibration/alpha_beta_collective_cost.h"

namespace upsim {

Duration SeedCurve::time(double bytes, double mf) const {
  if (bytes <= 0.0) return Duration::zero();
  const double x = std::log2(bytes);
  double us;
  if (x <= ln_p) {
    us = overhead_us;
  } else if (x > sats_p) {
    us = bytes / max_bw_gbps * mf / 1e3 + overhead_us;
  } else {
    const double log_bw = sigmoid_l / (1.0 + std::exp(-sigmoid_k * (x - sigmoid_x0))) + sigmoid_b;
    us = bytes / std::pow(10.0, log_bw) * mf / 1e3;
  }
  return Duration::from_us_f(us);
}

// Lin et al., TPDS 2024, "Reference values": the 4x V100 DGX-1 fit of the seed's HiPC-era code
// (owensgroup/ml_perf_model commit eb77e3a).
SeedCurve seed_dgx1_v100_all_to_all() {
  return SeedCurve{13, 27, 56.7134, 85.6, 5.97878216, 13.33976161, 0.22551425, -3.99731681};
}
SeedCurve seed_dgx1_v100_all_reduce() {
  return SeedCurve{12, 26, 75.6704, 84.2, 6.04564109, 12.70417428, 0.2242347, -3.94164857};
}

SeedCurveCollectiveCost::SeedCurveCollectiveCost(std::optional<SeedCurve> all_reduce,
                                                 std::optional<SeedCurve> all_to_all,
                                                 Bandwidth host_link, Bandwidth device_copy)
    : all_reduce_(all_reduce),
      all_to_all_(all_to_all),
      host_link_(host_link),
      device_copy_(device_copy) {
  if (!(host_link.bytes_per_second() > 0.0) || !(device_copy.bytes_per_second() > 0.0)) {
    throw std::invalid_argument("seed_curve: copy bandwidths must be positive");
  }
}

Duration SeedCurveCollectiveCost::collective_duration(const CollectiveDesc& c) const {
  const auto n = static_cast<double>(c.members.size());
  if (c.members.size() <= 1) return Duration::zero();
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      if (all_reduce_) return all_reduce_->time(static_cast<double>(c.bytes), 2.0 * (n - 1) / n);
      break;
    case CollectiveKind::kAllToAll:
      if (all_to_all_) {
        return all_to_all_->time(all_to_all_max_of_max(c.send_bytes, c.members.size()),
                                 (n - 1) / n);
      }
      break;
    default:
      break;
  }
  throw std::invalid_argument(fmt::format(
      "seed_curve: no fitted curve for {} (the seed fits all_reduce and all_to_all only)",
      collective_kind_name(c.kind)));
}

Duration SeedCurveCollectiveCost::transfer_duration(const TransferDesc& t) const {
  const auto bytes = static_cast<double>(t.bytes);
  if (t.kind == TransferKind::kDeviceToDevice) return device_copy_.transfer_time(2.0 * bytes);
  return host_link_.transfer_time(bytes);
}

namespace {

SeedCurve read_curve(const ConfigNode& parent, std::string_view key, const SeedCurve& fallback) {
  const std::optional<ConfigNode> node = parent.optional_child(key);
  if (!node) return fallback;
  SeedCurve c;
  // Ranges: ln_p / sats_p are log2 of message sizes in bytes (at most 2^62 bytes); the
  // bandwidth and overhead ranges are the fabric's links' (topology/fabric_loader.h).
  c.ln_p = node->get_double_in_or("ln_p", 0.0, 64.0, fallback.ln_p);
  c.sats_p = node->get_double_in_or("sats_p", 0.0, 64.0, fallback.sats_p);
  c.max_bw_gbps = node->get_bandwidth_in_or("max_bw", Bandwidth::bytes_per_second(1e6),
                                            Bandwidth::bytes_per_second(1e15),
                                            Bandwidth::gigabytes_per_second(fallback.max_bw_gbps))
                      .gigabytes_per_second();
  c.overhead_us = node->get_duration_in_or("overhead", Duration::zero(), kMaxConfiguredLatency,
                                           Duration::from_us_f(fallback.overhead_us))
                      .us();
  if (node->has("sigmoid")) {
    const ConfigNode s = node->child("sigmoid");
    const std::vector<ConfigNode> items = s.items();
    if (items.size() != 4) s.fail("expected [L, x0, k, b]: four numbers");
    // Finite and of a size a fit can have (the seed's are within +-100).
    c.sigmoid_l = items[0].as_double_in(-1e6, 1e6);
    c.sigmoid_x0 = items[1].as_double_in(-1e6, 1e6);
    c.sigmoid_k = items[2].as_double_in(-1e6, 1e6);
    c.sigmoid_b = items[3].as_double_in(-1e6, 1e6);
  } else {
    c.sigmoid_l = fallback.sigmoid_l;
    c.sigmoid_x0 = fallback.sigmoid_x0;
    c.sigmoid_k = fallback.sigmoid_k;
    c.sigmoid_b = fallback.sigmoid_b;
  }
  if (!(c.max_bw_gbps > 0.0)) node->child("max_bw").fail("must be positive");
  if (c.overhead_us < 0.0) node->child("overhead").fail("must not be negative");
  if (c.sats_p < c.ln_p) node->fail("sats_p must not be below ln_p");
  return c;
}

}  // namespace

SeedCurveCollectiveCost load_seed_curve(const ConfigNode& node, const HardwareProfile& hardware) {
  const SeedCurve all_reduce = read_curve(node, "all_reduce", seed_dgx1_v100_all_reduce());
  const SeedCurve all_to_all = read_curve(node, "all_to_all", seed_dgx1_v100_all_to_all());
  return SeedCurveCollectiveCost(all_reduce, all_to_all, hardware.device.host_link_bandwidth,
                                 hardware.device.hbm_bandwidth * hardware.achievable.memory);
}

}  // namespace upsim

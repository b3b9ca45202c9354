// The seed paper's collective model (Lin et al., TPDS 2024):
// one fitted size -> time curve per collective kind and platform, with no topology. Kept as a
// selectable model so that scenarios can compare it with the fabric-aware network.
//
// Curve (Lin et al., TPDS 2024), with x = log2(size in bytes) and mf the bus-to-algorithm
// bandwidth factor of the kind (Lin et al., TPDS 2024):
//   x <= ln_p:          time = overhead                                  (latency floor)
//   x >  sats_p:        time = size / max_bw * mf + overhead             (saturated)
//   otherwise:          time = size / BW(x) * mf,  BW(x) = 10^(L / (1 + e^(-k (x - x0))) + b) GB/s
// The curve is neither continuous nor monotone at ln_p and sats_p; it is reproduced as fitted.
// All-to-all sizes use the seed's max-of-max (Lin et al., TPDS 2024): the larger of bytes sent and
// received at the busiest rank. Host<->device copies take bytes / host-link bandwidth
// (the seed's memcpy model, Lin et al., TPDS 2024); device copies 2 x bytes at HBM speed.
#pragma once

#include <optional>

#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"

namespace upsim {

struct SeedCurve {
  double ln_p = 0.0;         ///< log2 bytes: end of the latency floor
  double sats_p = 0.0;       ///< log2 bytes: start of saturation
  double max_bw_gbps = 0.0;  ///< GB/s (1e9 B/s) bus bandwidth at saturation
  double overhead_us = 0.0;  ///< latency floor
  double sigmoid_l = 0.0;
  double sigmoid_x0 = 0.0;
  double sigmoid_k = 0.0;
  double sigmoid_b = 0.0;

  /// Time of one call moving `bytes` (the kind's size convention) with factor `mf`.
  Duration time(double bytes, double mf) const;
};

/// The 4x V100 DGX-1 fits hard-coded in the seed's HiPC-era code (Lin et al., TPDS 2024 table).
SeedCurve seed_dgx1_v100_all_to_all();
SeedCurve seed_dgx1_v100_all_reduce();

class SeedCurveCollectiveCost final : public CollectiveCostModel {
 public:
  /// A kind without a curve is an error when priced (std::invalid_argument naming the kind).
  SeedCurveCollectiveCost(std::optional<SeedCurve> all_reduce, std::optional<SeedCurve> all_to_all,
                          Bandwidth host_link, Bandwidth device_copy);
  Duration collective_duration(const CollectiveDesc& collective) const override;
  Duration transfer_duration(const TransferDesc& transfer) const override;

 private:
  std::optional<SeedCurve> all_reduce_;
  std::optional<SeedCurve> all_to_all_;
  Bandwidth host_link_;
  Bandwidth device_copy_;
};

/// Reads `{model: seed_curve, all_reduce: {ln_p, sats_p, max_bw: 75.67GB/s, overhead: 84.2us,
/// sigmoid: [L, x0, k, b]}, all_to_all: {...}}`; each curve defaults to the seed's DGX-1 V100
/// fit (written into the resolved scenario). Copies use the profile's host link and HBM.
SeedCurveCollectiveCost load_seed_curve(const ConfigNode& node, const HardwareProfile& hardware);

}  // namespace upsim

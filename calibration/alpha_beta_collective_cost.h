// AlphaBetaCollectiveCost: collectives as ring steps over one link kind, each step paying a
// latency alpha, the payload moving at an effective per-GPU, per-direction bandwidth
// bw_eff = bandwidth x efficiency. No link state, no contention (topology/ does that).
//
// With n = members.size() and S = CollectiveDesc::bytes (each member's input buffer):
//   all-reduce      2(n-1) alpha + 2(n-1)/n x S / bw_eff                 (ring)
//   reduce-scatter   (n-1) alpha +  (n-1)/n x S / bw_eff                 (S = full input buffer)
//   all-gather       (n-1) alpha +  (n-1)/n x (n S) / bw_eff             (n S = gathered output)
//   all-to-all       (n-1) alpha + max_r max(sent_r, received_r) / bw_eff
//                    sent_r = sum_{j != r} send_bytes(r, j), received_r = sum_{i != r}
//                    send_bytes(i, r): the busiest rank's larger direction, the seed's
//                    "max-of-max" (Lin et al., TPDS 2024); without send_bytes each member
//                    sends S/n to every member.
//   broadcast        (n-1) alpha + S / bw_eff                            (pipelined chain)
//   send/recv              alpha + S / bw_eff
// A group of one member, or a collective that moves no bytes, takes zero time (NCCL returns
// at once for an empty buffer).
// Transfers: H2D / D2H = host_link.alpha + bytes / host_link bw_eff; D2D reads and writes every
// byte in device memory: 2 bytes / device_copy_bandwidth (Lin et al., TPDS 2024, copies).
//
// Contract: pure and const; every parameter is fixed at construction and cited in
// alpha_beta_collective_cost.cpp (default_link_cost).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"

namespace upsim {

enum class LinkKind : uint8_t {
  kNvlink2,
  kNvlink3,
  kNvlink4,
  kPcie3,
  kPcie4,
  kPcie5,
  kIbHdr,
  kIbNdr
};

/// "nvlink2", "nvlink3", "nvlink4", "pcie3", "pcie4", "pcie5", "ib_hdr", "ib_ndr".
std::string_view link_kind_name(LinkKind kind);
std::optional<LinkKind> parse_link_kind(std::string_view name);
/// Every link kind name, in enum order (for error messages and choices).
std::span<const std::string_view> link_kind_names();

/// Cost of one link kind as seen by one GPU.
struct LinkCost {
  /// Latency of one algorithm step (>= 0).
  Duration alpha;
  /// Nominal bandwidth per GPU and per direction (> 0).
  Bandwidth bandwidth;
  /// Achieved / nominal bandwidth at large messages, in (0, 1].
  double efficiency = 1.0;

  Bandwidth effective() const { return bandwidth * efficiency; }
};

/// The cited defaults of each link kind (see the table in alpha_beta_collective_cost.cpp).
LinkCost default_link_cost(LinkKind kind);

class AlphaBetaCollectiveCost final : public CollectiveCostModel {
 public:
  /// `link` prices collectives, `host_link` host<->device copies; device-to-device copies move
  /// 2 x bytes at `device_copy_bandwidth`. Throws std::invalid_argument for a negative alpha, a
  /// non-positive bandwidth or an efficiency outside (0, 1].
  AlphaBetaCollectiveCost(LinkCost link, LinkCost host_link, Bandwidth device_copy_bandwidth);

  /// Defaults of `kind` for collectives; the PCIe defaults at the device's host-link bandwidth
  /// for H2D / D2H; D2D at the device's HBM bandwidth x achievable memory fraction.
  AlphaBetaCollectiveCost(LinkKind kind, const HardwareProfile& hardware);

  Duration collective_duration(const CollectiveDesc& collective) const override;
  Duration transfer_duration(const TransferDesc& transfer) const override;

  const LinkCost& link() const { return link_; }
  const LinkCost& host_link() const { return host_link_; }

 private:
  LinkCost link_;
  LinkCost host_link_;
  Bandwidth device_copy_bandwidth_;
};

/// The all-to-all volume of the busiest rank: max over r of max(sent_r, received_r), with the
/// self-chunk excluded (see the header comment). O(n). Throws std::invalid_argument unless
/// send_bytes.members() == n (empty sizes included).
double all_to_all_max_of_max(const AllToAllSizes& send_bytes, size_t n);

/// Reads `{model: alpha_beta, link: nvlink3, bandwidth: 300GB/s, latency: 2us, efficiency: 0.78,
/// host_link: pcie4}`: `link` is required; `bandwidth`, `latency` (alpha per step) and
/// `efficiency` override that kind's defaults (e.g. "NVLink twice as fast": bandwidth: 600GB/s);
/// `host_link` names a PCIe kind for H2D / D2H (default: the profile's pcie_generation).
AlphaBetaCollectiveCost load_alpha_beta(const ConfigNode& node, const HardwareProfile& hardware);

}  // namespace upsim

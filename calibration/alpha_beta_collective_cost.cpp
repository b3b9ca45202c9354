#include "calibration/alpha_beta_collective_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

namespace upsim {
namespace {

constexpr std::array<std::string_view, 8> kLinkKindNames{"nvlink2", "nvlink3", "nvlink4", "pcie3",
                                                         "pcie4",   "pcie5",   "ib_hdr",  "ib_ndr"};

// --- NVLink3, fitted on measured data ---------------------------------------------------------
// Source: test/data/llmcompass/allreduce_A100x4_nvlink_measured.csv (LLMCompass,
// PrincetonUniversity, measured all-reduce on 4x A100 NVLink v3 fully connected; copy and
// attribution in test/data/llmcompass/). Ring all-reduce with n = 4: T = 6 alpha + 1.5 S / bw_eff.
//  - alpha: the 8 smallest sizes (8 B .. 1 KiB) are latency-bound; their mean latency is
//    12.875 us = 2(n-1) alpha = 6 alpha -> alpha = 2.146 us.
//  - efficiency: bus bandwidth at the largest size, 16 GiB in 110277 us: algbw 155.79 GB/s x
//    2(n-1)/n = 233.68 GB/s, over the 300 GB/s nominal -> 0.779. Cross-check: 8x A100-SXM4-40GB
//    over NVSwitch reach busbw 232.20 GB/s at 10 GiB (published nccl-tests results,
//    test/data/nccl-tests, run oci_bm.gpu4.8_1x8_a100_40gb) = 0.774 of 300 GB/s.
// Accuracy over the whole sweep (test/unit/calibration/alpha_beta_accuracy_test.cpp): geomean
// |e| 8.3% over all 32 points, 16.4% over the 23 not used in the fit; bus bandwidth within 5% of
// the measured plateau from 1 GiB up; worst point 1 MiB, predicted 68% too fast.
constexpr int64_t kNvlink3AlphaNs = 2146;
constexpr double kNvlink3Efficiency = 0.779;

// --- Relative step latency of other link classes -----------------------------------------------
// No measured PCIe or InfiniBand collective sweep is available yet, so alpha of the other classes
// scales the fitted NVLink alpha by NCCL's own per-hop latency model: hwLat, Ring / LL protocol
// (the small-message protocol), NVLink 0.47 us, PCI 1.0 us, NET 2.7 us (NVIDIA/nccl
// src/graph/tuning.cc at commit 01afd20a77b5804e0ecf1042509dd9d20ebf9e93). To be replaced by a
// fit when such a sweep is added.
constexpr double kNcclRingLlNvlinkUs = 0.47;
constexpr double kNcclRingLlPciUs = 1.0;
constexpr double kNcclRingLlNetUs = 2.7;

// --- PCIe efficiency ----------------------------------------------------------------------------
// Lin et al., TPDS 2024: the seed measured peak_PCIe_BW = 8.1 GB/s on V100 (PCIe 3.0 x16,
// 15.754 GB/s per direction) -> 0.514. Borrowed for PCIe 4.0 and 5.0 (no measurement there).
constexpr double kSeedPcieGBps = 8.1;

// --- Network efficiency -------------------------------------------------------------------------
// the published nccl-tests results in test/data/nccl-tests, run oci_bm.gpu4.8_2x8_a100_40gb_rocev2:
// 2 nodes x 8 A100, 16 x 100 Gb/s RoCEv2 per node (200 GB/s per node), all-reduce busbw 191.76 GB/s
// at 10 GiB. A two-node ring pushes 2(n-1)/n x S through each node's NICs, so busbw is bounded by
// the node's NIC bandwidth: 191.76 / 200 = 0.959. Measured on RoCE, borrowed for IB HDR / NDR.
constexpr double kNetworkEfficiency = 191.76 / 200.0;

Duration scaled_alpha(double class_latency_us) {
  return Duration::from_us_f(static_cast<double>(kNvlink3AlphaNs) * 1e-3 * class_latency_us /
                             kNcclRingLlNvlinkUs);
}

void check_link(const LinkCost& link, std::string_view what) {
  if (link.alpha < Duration::zero()) {
    throw std::invalid_argument(fmt::format("alpha_beta: {} latency must not be negative", what));
  }
  if (!(link.bandwidth.bytes_per_second() > 0.0)) {
    throw std::invalid_argument(fmt::format("alpha_beta: {} bandwidth must be positive", what));
  }
  if (!(link.efficiency > 0.0 && link.efficiency <= 1.0)) {
    throw std::invalid_argument(
        fmt::format("alpha_beta: {} efficiency must be in (0, 1], got {}", what, link.efficiency));
  }
}

/// H2D / D2H over the device's own host link: PCIe alpha and efficiency (the same for every
/// generation in default_link_cost) at the profile's host-link bandwidth.
LinkCost profile_host_link(const DeviceProfile& device) {
  LinkCost host = default_link_cost(LinkKind::kPcie3);
  host.bandwidth = device.host_link_bandwidth;
  return host;
}

}  // namespace

std::string_view link_kind_name(LinkKind kind) {
  return kLinkKindNames[static_cast<size_t>(kind)];
}

std::span<const std::string_view> link_kind_names() {
  return kLinkKindNames;
}

std::optional<LinkKind> parse_link_kind(std::string_view name) {
  for (size_t i = 0; i < kLinkKindNames.size(); ++i) {
    if (kLinkKindNames[i] == name) return static_cast<LinkKind>(i);
  }
  return std::nullopt;
}

LinkCost default_link_cost(LinkKind kind) {
  const Duration nvlink_alpha = Duration::from_ns(kNvlink3AlphaNs);
  const Bandwidth pcie3 = *pcie_x16_bandwidth(3);
  const double pcie_efficiency = kSeedPcieGBps * 1e9 / pcie3.bytes_per_second();
  switch (kind) {
    // NVIDIA Tesla V100 datasheet: NVLink 2.0, 6 links x 25 GB/s per direction = 150 GB/s
    // (300 GB/s bidirectional). Alpha and efficiency borrowed from the NVLink3 fit.
    case LinkKind::kNvlink2:
      return {nvlink_alpha, Bandwidth::gigabytes_per_second(150.0), kNvlink3Efficiency};
    // NVIDIA A100 datasheet: NVLink 3.0, 12 links x 25 GB/s per direction = 300 GB/s (600 GB/s
    // bidirectional). Alpha and efficiency fitted above.
    case LinkKind::kNvlink3:
      return {nvlink_alpha, Bandwidth::gigabytes_per_second(300.0), kNvlink3Efficiency};
    // NVIDIA H100 datasheet (SXM5): NVLink 4.0, 18 links x 25 GB/s per direction = 450 GB/s
    // (900 GB/s bidirectional). Alpha and efficiency borrowed from the NVLink3 fit.
    case LinkKind::kNvlink4:
      return {nvlink_alpha, Bandwidth::gigabytes_per_second(450.0), kNvlink3Efficiency};
    // PCI-SIG base specifications, x16 per direction (calibration/hardware_profile.h).
    case LinkKind::kPcie3:
      return {scaled_alpha(kNcclRingLlPciUs), pcie3, pcie_efficiency};
    case LinkKind::kPcie4:
      return {scaled_alpha(kNcclRingLlPciUs), *pcie_x16_bandwidth(4), pcie_efficiency};
    case LinkKind::kPcie5:
      return {scaled_alpha(kNcclRingLlPciUs), *pcie_x16_bandwidth(5), pcie_efficiency};
    // InfiniBand HDR 200 Gb/s and NDR 400 Gb/s per port (NVIDIA ConnectX-6 / ConnectX-7
    // datasheets), one port per GPU: 25 and 50 GB/s per direction.
    case LinkKind::kIbHdr:
      return {scaled_alpha(kNcclRingLlNetUs), Bandwidth::gigabytes_per_second(25.0),
              kNetworkEfficiency};
    case LinkKind::kIbNdr:
      return {scaled_alpha(kNcclRingLlNetUs), Bandwidth::gigabytes_per_second(50.0),
              kNetworkEfficiency};
  }
  throw std::invalid_argument("alpha_beta: unknown link kind");
}

AlphaBetaCollectiveCost::AlphaBetaCollectiveCost(LinkCost link, LinkCost host_link,
                                                 Bandwidth device_copy_bandwidth)
    : link_(link), host_link_(host_link), device_copy_bandwidth_(device_copy_bandwidth) {
  check_link(link_, "link");
  check_link(host_link_, "host link");
  if (!(device_copy_bandwidth_.bytes_per_second() > 0.0)) {
    throw std::invalid_argument("alpha_beta: device copy bandwidth must be positive");
  }
}

AlphaBetaCollectiveCost::AlphaBetaCollectiveCost(LinkKind kind, const HardwareProfile& hardware)
    : AlphaBetaCollectiveCost(default_link_cost(kind), profile_host_link(hardware.device),
                              hardware.device.hbm_bandwidth * hardware.achievable.memory) {}

double all_to_all_max_of_max(const AllToAllSizes& send_bytes, size_t n) {
  if (send_bytes.members() != n) {
    throw std::invalid_argument(
        fmt::format("alpha_beta: all-to-all send_bytes are over {} members, expected n = {}",
                    send_bytes.members(), n));
  }
  double busiest = 0.0;
  for (size_t r = 0; r < n; ++r) {
    const int64_t self = send_bytes.at(r, r);
    const double sent = as_double(send_bytes.sent_by(r) - self);
    const double received = as_double(send_bytes.received_by(r) - self);
    busiest = std::max(busiest, std::max(sent, received));
  }
  return busiest;
}

Duration AlphaBetaCollectiveCost::collective_duration(const CollectiveDesc& collective) const {
  const size_t n = collective.members.size();
  if (collective.bytes < 0) {
    throw std::invalid_argument(fmt::format("alpha_beta: {} of negative size {}",
                                            collective_kind_name(collective.kind),
                                            collective.bytes));
  }
  if (n <= 1) return Duration::zero();
  const double nd = as_double(static_cast<int64_t>(n));
  const auto steps = static_cast<int64_t>(n) - 1;
  const double bytes = as_double(collective.bytes);
  const Bandwidth bw = link_.effective();

  int64_t alpha_steps = 0;
  double wire_bytes = 0.0;
  switch (collective.kind) {
    case CollectiveKind::kAllReduce:
      alpha_steps = 2 * steps;
      wire_bytes = 2.0 * (nd - 1.0) / nd * bytes;
      break;
    case CollectiveKind::kReduceScatter:
      alpha_steps = steps;
      wire_bytes = (nd - 1.0) / nd * bytes;
      break;
    case CollectiveKind::kAllGather:
      alpha_steps = steps;
      wire_bytes = (nd - 1.0) * bytes;
      break;
    case CollectiveKind::kAllToAll:
      alpha_steps = steps;
      wire_bytes = collective.send_bytes.empty() ? (nd - 1.0) / nd * bytes
                                                 : all_to_all_max_of_max(collective.send_bytes, n);
      break;
    case CollectiveKind::kBroadcast:
      alpha_steps = steps;
      wire_bytes = bytes;
      break;
    case CollectiveKind::kSendRecv:
      alpha_steps = 1;
      wire_bytes = bytes;
      break;
  }
  // An all-to-all with only self-chunks moves nothing across links either.
  if (wire_bytes <= 0.0) return Duration::zero();
  return link_.alpha * alpha_steps + bw.transfer_time(wire_bytes);
}

Duration AlphaBetaCollectiveCost::transfer_duration(const TransferDesc& transfer) const {
  if (transfer.bytes < 0) {
    throw std::invalid_argument(fmt::format("alpha_beta: {} copy of negative size {}",
                                            transfer_kind_name(transfer.kind), transfer.bytes));
  }
  if (transfer.bytes == 0) return Duration::zero();
  const double bytes = as_double(transfer.bytes);
  switch (transfer.kind) {
    case TransferKind::kHostToDevice:
    case TransferKind::kDeviceToHost:
      return host_link_.alpha + host_link_.effective().transfer_time(bytes);
    case TransferKind::kDeviceToDevice:
      return device_copy_bandwidth_.transfer_time(2.0 * bytes);
  }
  return Duration::zero();
}

AlphaBetaCollectiveCost load_alpha_beta(const ConfigNode& node, const HardwareProfile& hardware) {
  node.get_choice_or("model", {"alpha_beta"}, "alpha_beta");
  const LinkKind kind = *parse_link_kind(node.get_choice("link", link_kind_names()));
  LinkCost link = default_link_cost(kind);
  // Ranges as the fabric's links (topology/fabric_loader.h): 1 MB/s .. 1 PB/s, 0 .. 1 s.
  link.bandwidth = node.get_bandwidth_in_or("bandwidth", Bandwidth::bytes_per_second(1e6),
                                            Bandwidth::bytes_per_second(1e15), link.bandwidth);
  link.alpha =
      node.get_duration_in_or("latency", Duration::zero(), kMaxConfiguredLatency, link.alpha);
  link.efficiency = node.get_double_in_or("efficiency", 1e-6, 1.0, link.efficiency);

  LinkCost host = profile_host_link(hardware.device);
  if (node.has("host_link")) {
    const LinkKind host_kind = *parse_link_kind(node.get_choice(
        "host_link", std::initializer_list<std::string_view>{"pcie3", "pcie4", "pcie5"}));
    host = default_link_cost(host_kind);
  }
  try {
    return AlphaBetaCollectiveCost(link, host,
                                   hardware.device.hbm_bandwidth * hardware.achievable.memory);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

}  // namespace upsim

#include "topology/nccl_tuning.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "sim/config/quantity_parse.h"

namespace upsim {
namespace {

constexpr std::array<std::string_view, kCollectiveAlgorithmCount> kAlgorithmNames{
    "ring", "tree", "nvls", "hierarchical", "direct"};
constexpr std::array<std::string_view, kCollectiveProtocolCount> kProtocolNames{"LL", "LL128",
                                                                                "Simple"};
constexpr std::array<std::string_view, kLinkClassCount> kLinkClassNames{"nvlink", "pci", "net"};
constexpr std::array<std::string_view, kLatencyColumnCount> kColumnNames{"tree", "ring", "nvls"};

Duration us(double v) {
  return Duration::from_us_f(v);
}

// ---- NCCL's tables ----------------------------------------------------------------------------
// Source: NVIDIA/nccl src/graph/tuning.cc at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027
// (ncclTunerConstantsDefaults): baseLatencies and hwLatencies in microseconds, indexed
// [algorithm][protocol] with protocols (LL, LL128, Simple). Columns used here: Tree, Ring, and
// for NVLS the NVLS row on NVLink (25 us) and the NVLSTree row on the network (20.9 us), since
// upsim's NVLS spans nodes with trees. NCCL has no LL / LL128 for NVLS (zero here).
struct NcclRow {
  double ll;
  double ll128;
  double simple;
};
// baseLatencies: Tree {6.8, 14.0, 8.4}, Ring {6.6, 14.0, 8.4}, NVLS / NVLSTree {0, 0, 0}.
constexpr NcclRow kBaseTree{6.8, 14.0, 8.4};
constexpr NcclRow kBaseRing{6.6, 14.0, 8.4};
constexpr NcclRow kBaseNvls{0.0, 0.0, 0.0};
// hwLatencies, NVLINK: Tree {0.6, 1.25, 4.0}, Ring {0.6, 1.9, 3.4}, NVLS {0, 0, 25}.
constexpr NcclRow kNvlinkTree{0.6, 1.25, 4.0};
constexpr NcclRow kNvlinkRing{0.6, 1.9, 3.4};
constexpr NcclRow kNvlinkNvls{0.0, 0.0, 25.0};
// hwLatencies, PCI: Tree {1.0, 1.9, 4.0}, Ring {1.0, 2.5, 5.7}, NVLS {0, 0, 0}.
constexpr NcclRow kPciTree{1.0, 1.9, 4.0};
constexpr NcclRow kPciRing{1.0, 2.5, 5.7};
constexpr NcclRow kPciNvls{0.0, 0.0, 0.0};
// hwLatencies, NET: Tree {5.0, 8.5, 14}, Ring {2.7, 4.0, 14.0}, NVLSTree {0, 0, 20.9}.
constexpr NcclRow kNetTree{5.0, 8.5, 14.0};
constexpr NcclRow kNetRing{2.7, 4.0, 14.0};
constexpr NcclRow kNetNvls{0.0, 0.0, 20.9};

double pick(const NcclRow& row, CollectiveProtocol p) {
  switch (p) {
    case CollectiveProtocol::kLl:
      return row.ll;
    case CollectiveProtocol::kLl128:
      return row.ll128;
    case CollectiveProtocol::kSimple:
      return row.simple;
  }
  return 0.0;
}

std::array<Duration, kLatencyColumnCount> columns(const NcclRow& tree, const NcclRow& ring,
                                                  const NcclRow& nvls, CollectiveProtocol p) {
  return {us(pick(tree, p)), us(pick(ring, p)), us(pick(nvls, p))};
}

// ---- Wire factors -----------------------------------------------------------------------------
// NVIDIA/nccl src/include/device.h (same commit): an LL line (union ncclLLFifoLine) is 16 bytes
// holding 8 data bytes and two 4-byte flags -> 2 wire bytes per payload byte. An LL128 line is
// NCCL_LL128_LINEELEMS = 16 eight-byte elements of which NCCL_LL128_DATAELEMS = 15 carry data
// -> 16/15. Simple moves payload only.
constexpr double kLlWireFactor = 2.0;
constexpr double kLl128WireFactor = 16.0 / 15.0;

// ---- LL within one node ------------------------------------------------------------------------
// NVIDIA/nccl src/graph/tuning.cc (same commit) llMaxBws, the N1 (single node) column, indexed by
// the GPU's compute capability: Volta 39.0, Ampere 87.7, Hopper 141.0, Blackwell 2 x 141.0 GB/s;
// NCCL caps ring and tree LL bus bandwidth at it. Here by the NVLink generation of the GPUs'
// links: NVLink 3 is Ampere's, 4 Hopper's, 5 Blackwell's. The DGX H100 sweep agrees with Hopper's
// value (ring / LL to 1 MiB as NCCL picks it there, test/data/nccl-tests SOURCES.md). Ampere's is
// [FIT] (prior: NCCL's 87.7): the only single-node Ampere sweep with LL sizes, LLMCompass' 4x
// A100, runs LL at 11.3 GB/s (busbw 11 GB/s at 256 KiB). Over several nodes NCCL indexes llMaxBws
// by CPU vendor instead (Intel 39.0 / 20.4 GB/s on 2 / more nodes): that cap is the fitted
// injection_cap below, which comes out at 40.3 GB/s.
constexpr double kLlAmpereSingleNodeCapPriorGBps = 87.7;
constexpr double kLlAmpereSingleNodeCapGBps = 11.34;
constexpr std::array<std::pair<std::string_view, double>, 3> kLlSingleNodeCapsGBps{{
    {"nvlink3", kLlAmpereSingleNodeCapGBps},
    {"nvlink4", 141.0},
    {"nvlink5", 2 * 141.0},
}};

// ---- Calibrated on measured data (test/data/nccl-tests/, see its SOURCES.md) -------------------
// Fifteen parameters fitted together (Nelder-Mead) on the 166 measured all-reduce points of the
// eight systems of topology/fitting/collective_validation.h, minimising the sum over systems of the
// mean Huber loss of ln(predicted / measured) (topology/fitting/collective_fit.h; each system
// weighted equally), with every other number fixed at the NCCL, protocol and datasheet values here
// and in the fabric files. The fit runs the flow network itself;
// test/unit/topology/collective_accuracy_test.cpp prints the resulting tables. Which points
// determine which parameter:
//  - launch overhead: the small sizes of every sweep;
//  - LL cap over several nodes (40.3 GB/s, NCCL's own llMaxBws[Intel][N2] is 39.0), LL128 cap:
//    the multi-node sweeps' small and mid sizes; the Ampere single-node LL cap and the NVLink
//    Simple ring hop latency: the LLMCompass 4x A100 sweep (32 points, 8 B - 16 GiB);
//  - NVLink efficiency (NVLink 3; other generations by the factors below): the plateaus of 4x A100
//    (16 GiB) and 8x A100 NVSwitch (OCI, 10 GiB);
//  - TCPXO efficiency and LL / Simple extra hop latencies: the GCP A3 Mega 2x8 H100 sweep (31
//    points, 8 B - 8 GiB). Its LL128 extra latency (108.8 us) only keeps LL128 from winning
//    there: any larger value gives the same errors;
//  - RDMA (RoCE, InfiniBand, Ethernet) efficiency: the InfiniBand sweeps of 2x8 and 4x8 H100
//    (Dell XE9680 and VMware, 32 points each, 8 B - 16 GiB) and the OCI 2x8 H100 RoCE points;
//  - NVLS efficiency within one node, the NVLink NVLS hop latency and the Hopper (NVLink 4)
//    latency factor: the NVIDIA DGX H100 1x8 sweep (32 points, 8 B - 16 GiB) and the multi-node
//    H100 sweeps. The efficiency comes out at 0.846, NCCL's own Hopper figure (nvlsEfficiency
//    0.85); the NVLS hop at 13.9 us (NCCL's table: 25 us); the Hopper latency factor at its cap
//    of 1 (NCCL's one table fits Hopper's small sizes once LL runs at Hopper's own cap);
//  - NVLS efficiency over several nodes (NCCL's NVLS_TREE): the two InfiniBand H100 sweeps, the
//    OCI 2x8 H100 RoCE points (5 points, 1 - 16 GiB) and the GCP sweep's NVLS sizes.
// Reproduce: `upsim calibrate collectives --validation-systems --fit NAME,...
// --max-evaluations 20000` with the fifteen names of calibrated_tuning_parameters(), from the
// previous values with the Ampere single-node LL cap at its prior (converged; objective 0.1632 ->
// 0.1150; in-sample geomean |error| 3.98% on 4x A100, 2.57% on GCP, 5.45% on DGX H100, 3.84% on
// the 2x8 and 7.04% on the 4x8 InfiniBand sweeps). Held out: leaving whole systems out
// (`upsim validate collectives --held-out`, from nccl_prior_tuning()) gives 9.6% on the 4x A100
// sweep (34.6% over 128 KiB - 32 MiB: held out, its LL runs at NCCL's Ampere 87.7 GB/s, and its
// ring / LL128 mid sizes are a regime no other sweep has), 6.3% on the DGX H100 sweep (6.6% over
// that band), 4.1% (7.3%) on the 2x8 and 7.9% (10.0%) on the 4x8 InfiniBand sweeps, and 54.0% on
// GCP (its TCPXO values are measured by no other system).
constexpr double kLaunchOverheadUs = 3.658;
constexpr double kLlInjectionCapGBps = 40.27;
constexpr double kLl128InjectionCapGBps = 46.37;
constexpr double kNvlinkSimpleRingHopUs = 9.186;
constexpr double kNvlinkSimpleNvlsHopUs = 13.91;
constexpr double kNvlinkEfficiency = 0.768;
constexpr double kRdmaEfficiency = 0.956;
constexpr double kTcpxoEfficiency = 0.924;
constexpr double kTcpxoExtraHopLlUs = 52.25;
constexpr double kTcpxoExtraHopLl128Us = 108.8;
constexpr double kTcpxoExtraHopSimpleUs = 342.4;
constexpr double kNvlsEfficiency = 0.8455;
constexpr double kNvlsTreeEfficiency = 0.7894;
constexpr double kNvlink4LatencyFactor = 1.0;

// ---- Per-generation factors (relative to the fitted NVLink 3 / Hopper NVLS values) ------------
// NVLink: NVIDIA/nccl src/graph/topo.h gives the bandwidth NCCL's topology model counts per
// NVLink by compute capability (SM70_NVLINK_BW 20.0, SM80 20.0, SM90 20.6, SM100 40.1 GB/s).
// Over the nominal per-link rate of the fabric files (25 GB/s per direction for NVLink 2, 3 and
// 4, 50 GB/s for NVLink 5: NVIDIA V100, A100, H100 whitepapers and the B200 datasheet) that is
// 0.80, 0.80, 0.824 and 0.802. The NVLink efficiency above was fitted on NVLink 3 (A100)
// plateaus, so NVLink 4 gets 0.824 / 0.80 = 1.03 of it, NVLink 5 0.802 / 0.80 = 1.0025 and
// NVLink 2 the same as NVLink 3.
constexpr double kNvlink4Factor = (20.6 / 25.0) / (20.0 / 25.0);
constexpr double kNvlink5Factor = (40.1 / 50.0) / (20.0 / 25.0);
// NVLS: NVIDIA/nccl src/graph/tuning.cc nvlsEfficiency per compute capability: Hopper 0.85,
// Blackwell 0.74. The NVLS efficiencies above were fitted on H100 (DGX H100, OCI 2x8 H100), so
// NVLink 5 (Blackwell) NVLS gets 0.74 / 0.85 of them.
constexpr double kNvlsBlackwellFactor = 0.74 / 0.85;

// NVLS pipeline fill: nvlsChannels x NCCL_NVLS_CHUNKSIZE x NCCL_STEPS. NVIDIA/nccl
// src/transport/nvls.cc: NVLS_NCHANNELS_SM90 16, NVLS_NCHANNELS_SM100 32 (24 on a single NVL
// node), NCCL_NVLS_CHUNKSIZE 128 KiB; src/include/device.h: NCCL_STEPS 8. Hopper: 16 x 128 KiB
// x 8 = 16 MiB; Blackwell 32 MiB. Not fitted: on the DGX H100 sweep (test/data/nccl-tests)
// the time above latency + bytes / plateau rate grows to about this size's transfer time by
// 16 MiB and stays near it up to GiB sizes, as a filling pipeline does.
constexpr double kNvlsFillSm90Mib = 16.0;

// SMs NCCL's collective kernel holds per GPU: one thread block per channel (NVIDIA/nccl
// src/enqueue.cc launches nChannels blocks), and NCCL runs every channel its topology search
// finds twice (ncclTopoPreset, src/graph/connect.cc: "Duplicate channels rings/trees"). Counts
// published in NCCL's own logs and profiles:
//  - NVLink 3 (HGX / DGX A100, NVSwitch): 24 channels ("Channel 23/24", NVIDIA/nccl-tests
//    issue #100, an HGX A100 8-GPU log).
//  - NVLink 4 (DGX / HGX H100, NVSwitch): 24 channels ("Channel 16/24 ... 23", NVIDIA/nccl issue
//    #1259, an 8 x H100 NVLS system), and an nsys profile of an H100 FSDP step shows
//    ncclAllGather running 24 blocks beside a 132-block GEMM, which then needs a second wave
//    (NVIDIA developer forum thread 337991, "Compute-Communication Overlap Causes Severe GEMM
//    Performance Degradation because of Tail Effect").
//  - NVLink 5 (B200): no published count; Hopper's 24 (NCCL's NVLS kernels use 32 channels on
//    SM100 against 16 on SM90, nvls.cc above, so this is likely low).
//  - NVLink meshes without an NVSwitch find fewer rings (the graph dumps of NVIDIA/nccl issue
//    #713, run twice): four A100s with 4 NVLinks per pair (HGX A100 4-GPU), 4 rings: 8; four
//    V100s with 2 NVLinks per pair, 6 rings: 12, which also stands for V100 on an NVSwitch
//    (DGX-2: no published count).
//  - Anything else (PCIe, bridges, NICs only): NCCL finds one ring over PCIe ("Pattern 4 ...
//    nChannels 1", NVIDIA/nccl issue #1358's log), run twice: 2.
// The magnitude agrees with measured overlap: Lee et al., "Characterizing Compute-Communication
// Overlap in GPU-Accelerated Distributed Deep Learning" (arXiv 2507.03114) report compute
// 18.9% slower on average (40% at most) beside collectives on A100 and H100; 24 of 132 H100 SMs
// is 18%.
constexpr int32_t kCommunicationSmsNvlink = 24;
constexpr int32_t kCommunicationSmsNvlink2 = 12;
constexpr int32_t kCommunicationSmsNvlink3Mesh = 8;
constexpr int32_t kCommunicationSmsOther = 2;
// A send / receive to a peer of another node: "start from 2 channels per NIC"
// (ncclTopoGetNchannels, NVIDIA/nccl src/graph/paths.cc, v2.28: nNetChannels = 2 unless
// NCCL_NCHANNELS_PER_NET_PEER says otherwise). Pipeline sends between nodes hold 2 SMs, not a
// collective's 24.
constexpr int32_t kNetworkPeerSms = 2;
constexpr double kNvlsFillSm100Mib = 32.0;

// NCCL tuning.cc (same commit): tree all-reduce bandwidth is refined by busBw * .92 and, for the
// plain TREE pattern, * .85.
constexpr double kTreeEfficiency = 0.92 * 0.85;
// NCCL getNetOverhead(): 1 us on x86 (Intel); NCCL triples it for Simple.
constexpr double kNetOverheadUs = 1.0;

template <size_t N>
std::string join(const std::array<std::string_view, N>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

/// A YAML double-quoted scalar.
std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

template <typename T, typename Name>
std::string flow_list(const std::vector<T>& items, Name name) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += name(items[i]);
  }
  return out + "]";
}

std::string latency_map(const std::array<Duration, kLatencyColumnCount>& row) {
  std::string out = "{";
  for (size_t c = 0; c < kLatencyColumnCount; ++c) {
    if (c > 0) out += ", ";
    out += fmt::format("{}: {}", kColumnNames[c], format_duration_exact(row[c]));
  }
  return out + "}";
}

}  // namespace

std::string_view collective_algorithm_name(CollectiveAlgorithm algorithm) {
  return kAlgorithmNames[static_cast<size_t>(algorithm)];
}

std::optional<CollectiveAlgorithm> parse_collective_algorithm(std::string_view name) {
  for (size_t i = 0; i < kAlgorithmNames.size(); ++i) {
    if (kAlgorithmNames[i] == name) return static_cast<CollectiveAlgorithm>(i);
  }
  return std::nullopt;
}

std::string_view collective_protocol_name(CollectiveProtocol protocol) {
  return kProtocolNames[static_cast<size_t>(protocol)];
}

std::optional<CollectiveProtocol> parse_collective_protocol(std::string_view name) {
  for (size_t i = 0; i < kProtocolNames.size(); ++i) {
    if (kProtocolNames[i] == name) return static_cast<CollectiveProtocol>(i);
  }
  return std::nullopt;
}

std::string_view link_class_name(LinkClass link_class) {
  return kLinkClassNames[static_cast<size_t>(link_class)];
}

const LinkFamily& CollectiveTuning::family_of(std::string_view link_kind) const {
  const LinkFamily* best = nullptr;
  size_t best_length = 0;
  for (const LinkFamily& f : families) {
    for (const std::string& prefix : f.kind_prefixes) {
      if (link_kind.substr(0, prefix.size()) != prefix) continue;
      if (best == nullptr || prefix.size() > best_length) {
        best = &f;
        best_length = prefix.size();
      }
    }
  }
  if (best == nullptr) {
    throw std::invalid_argument(
        fmt::format("collective tuning: no link family matches link kind `{}`", link_kind));
  }
  return *best;
}

namespace {
/// The value of the longest key of `entries` that prefixes `kind`; `otherwise` when none does.
template <typename Value>
Value longest_prefix_value(const std::vector<std::pair<std::string, Value>>& entries,
                           std::string_view kind, Value otherwise) {
  Value value = otherwise;
  size_t best = 0;
  bool found = false;
  for (const auto& [prefix, v] : entries) {
    if (kind.substr(0, prefix.size()) != prefix) continue;
    if (!found || prefix.size() > best) {
      value = v;
      best = prefix.size();
      found = true;
    }
  }
  return value;
}

/// The factor of the longest key that prefixes `kind`; 1 when none does.
double generation_factor(const std::vector<std::pair<std::string, double>>& factors,
                         std::string_view kind, double otherwise = 1.0) {
  return longest_prefix_value(factors, kind, otherwise);
}
}  // namespace

Bandwidth CollectiveTuning::single_node_injection_cap_for(CollectiveProtocol p,
                                                          std::string_view link_kind) const {
  const ProtocolTuning& pt = protocol(p);
  return longest_prefix_value(pt.single_node_injection_caps, link_kind, pt.injection_cap);
}

double CollectiveTuning::link_efficiency(std::string_view link_kind) const {
  const LinkFamily& f = family_of(link_kind);
  return std::min(1.0, f.efficiency * generation_factor(f.generation_factors, link_kind));
}

double CollectiveTuning::nvls_efficiency_for(std::string_view link_kind, bool several_nodes) const {
  const double base = several_nodes ? nvls_tree_efficiency : nvls_efficiency;
  return std::min(1.0, base * generation_factor(nvls_generation_factors, link_kind));
}

double CollectiveTuning::latency_factor_for(std::string_view link_kind) const {
  return generation_factor(latency_generation_factors, link_kind);
}

int32_t CollectiveTuning::communication_sms_for(std::string_view link_kind, bool gpu_to_gpu) const {
  const int32_t any = longest_prefix_value(communication_sms, link_kind, int32_t{0});
  return gpu_to_gpu ? longest_prefix_value(communication_sms_direct, link_kind, any) : any;
}

double CollectiveTuning::nvls_pipeline_fill_bytes_for(std::string_view link_kind) const {
  return generation_factor(nvls_pipeline_fill_mib, link_kind, 0.0) * 1024.0 * 1024.0;
}

CollectiveTuning nccl_like_tuning() {
  CollectiveTuning t;
  t.launch_overhead = us(kLaunchOverheadUs);
  t.net_overhead = us(kNetOverheadUs);
  t.tree_efficiency = kTreeEfficiency;
  t.nvls_efficiency = kNvlsEfficiency;
  t.nvls_tree_efficiency = kNvlsTreeEfficiency;
  t.nvls_pipeline_fill_mib = {{"nvlink4", kNvlsFillSm90Mib}, {"nvlink5", kNvlsFillSm100Mib}};
  t.latency_generation_factors = {{"nvlink4", kNvlink4LatencyFactor}};
  t.communication_sms = {{"", kCommunicationSmsOther},
                         {"nvlink2", kCommunicationSmsNvlink2},
                         {"nvlink3", kCommunicationSmsNvlink},
                         {"nvlink4", kCommunicationSmsNvlink},
                         {"nvlink5", kCommunicationSmsNvlink}};
  t.communication_sms_direct = {{"nvlink3", kCommunicationSmsNvlink3Mesh}};
  t.network_peer_sms = kNetworkPeerSms;
  // NVLink SHARP (in-switch reduction) arrived with the third-generation NVSwitch of H100
  // systems (NVLink 4); NCCL enables NVLS from compute capability 9.0.
  t.nvls_link_prefixes = {"nvlink4", "nvlink5"};
  t.nvls_generation_factors = {{"nvlink5", kNvlsBlackwellFactor}};
  t.all_reduce_algorithms = {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree,
                             CollectiveAlgorithm::kNvls};
  t.enabled_protocols = {CollectiveProtocol::kLl, CollectiveProtocol::kLl128,
                         CollectiveProtocol::kSimple};
  for (CollectiveProtocol p :
       {CollectiveProtocol::kLl, CollectiveProtocol::kLl128, CollectiveProtocol::kSimple}) {
    ProtocolTuning& pt = t.protocols[static_cast<size_t>(p)];
    pt.base_latency = columns(kBaseTree, kBaseRing, kBaseNvls, p);
    pt.hop_latency[static_cast<size_t>(LinkClass::kNvlink)] =
        columns(kNvlinkTree, kNvlinkRing, kNvlinkNvls, p);
    pt.hop_latency[static_cast<size_t>(LinkClass::kPci)] = columns(kPciTree, kPciRing, kPciNvls, p);
    pt.hop_latency[static_cast<size_t>(LinkClass::kNet)] = columns(kNetTree, kNetRing, kNetNvls, p);
  }
  ProtocolTuning& ll = t.protocols[static_cast<size_t>(CollectiveProtocol::kLl)];
  ll.wire_factor = kLlWireFactor;
  ll.injection_cap = Bandwidth::gigabytes_per_second(kLlInjectionCapGBps);
  for (const auto& [kind, gbps] : kLlSingleNodeCapsGBps)
    ll.single_node_injection_caps.emplace_back(kind, Bandwidth::gigabytes_per_second(gbps));
  ProtocolTuning& ll128 = t.protocols[static_cast<size_t>(CollectiveProtocol::kLl128)];
  ll128.wire_factor = kLl128WireFactor;
  ll128.injection_cap = Bandwidth::gigabytes_per_second(kLl128InjectionCapGBps);
  ProtocolTuning& simple = t.protocols[static_cast<size_t>(CollectiveProtocol::kSimple)];
  simple.wire_factor = 1.0;
  simple.hop_latency[static_cast<size_t>(LinkClass::kNvlink)]
                    [static_cast<size_t>(LatencyColumn::kRing)] = us(kNvlinkSimpleRingHopUs);
  simple.hop_latency[static_cast<size_t>(LinkClass::kNvlink)]
                    [static_cast<size_t>(LatencyColumn::kNvls)] = us(kNvlinkSimpleNvlsHopUs);

  // PCIe efficiency is not calibrated (no measured PCIe sweep in test/data): 1.0.
  t.families = {
      LinkFamily{"nvlink",
                 {"nvlink"},
                 LinkClass::kNvlink,
                 kNvlinkEfficiency,
                 {},
                 {{"nvlink4", kNvlink4Factor}, {"nvlink5", kNvlink5Factor}}},
      LinkFamily{"pcie", {"pcie"}, LinkClass::kPci, 1.0, {}, {}},
      LinkFamily{
          "rdma", {"ib", "roce", "ethernet", "eth"}, LinkClass::kNet, kRdmaEfficiency, {}, {}},
      LinkFamily{"tcpxo",
                 {"tcpxo"},
                 LinkClass::kNet,
                 kTcpxoEfficiency,
                 {us(kTcpxoExtraHopLlUs), us(kTcpxoExtraHopLl128Us), us(kTcpxoExtraHopSimpleUs)},
                 {}},
      LinkFamily{"other", {""}, LinkClass::kPci, 1.0, {}, {}},
  };
  return t;
}

std::vector<std::string> calibrated_tuning_parameters() {
  return {"launch_overhead",
          "protocols.LL.injection_cap",
          "protocols.LL128.injection_cap",
          "protocols.Simple.hop_latency.nvlink.ring",
          "link_families.nvlink.efficiency",
          "link_families.rdma.efficiency",
          "link_families.tcpxo.efficiency",
          "link_families.tcpxo.extra_hop_latency.LL",
          "link_families.tcpxo.extra_hop_latency.LL128",
          "link_families.tcpxo.extra_hop_latency.Simple",
          "nvls_efficiency",
          "nvls_tree_efficiency",
          "protocols.Simple.hop_latency.nvlink.nvls",
          "latency_generation_factors.nvlink4",
          "protocols.LL.single_node_injection_caps.nvlink3"};
}

// ---- Priors of the calibrated parameters (nccl_prior_tuning) ----------------------------------
// Values chosen without looking at any measurement of test/data:
//  - launch overhead 5 us: Lin et al., TPDS 2024 (arXiv 2404.12674), GPU_KERNEL_OVERHEAD, the
//    per-kernel overhead their predictor adds to every kernel;
//  - LL injection cap 39 GB/s and LL128 cap 20 GB/s: NVIDIA/nccl src/graph/tuning.cc (commit
//    above), llMaxBws[Intel][N2] (the LL limit of NCCL's own model over several nodes, where the
//    fitted cap applies; within one node the per-generation N1 caps above are used) and
//    perChMaxRingLL128Bws[Ampere] (one channel), the per-channel LL128 limit;
//  - NVLink Simple ring hop 3.4 us and NVLS hop 25 us: NCCL's hwLat (the table above);
//  - NVLink, RDMA and TCPXO efficiencies 1 (the links' nominal rates) and no TCPXO extra hop
//    latency: the fabric files' datasheet numbers alone;
//  - NVLS efficiency 0.85, within a node and over several: NCCL's own Hopper figure
//    (src/graph/tuning.cc nvlsEfficiency);
//  - latency generation factors 1: NCCL's one latency table for every generation.
constexpr double kPriorLaunchOverheadUs = 5.0;
constexpr double kPriorLlInjectionCapGBps = 39.0;
constexpr double kPriorLl128InjectionCapGBps = 20.0;
constexpr double kPriorNvlsEfficiency = 0.85;

CollectiveTuning nccl_prior_tuning() {
  CollectiveTuning t = nccl_like_tuning();
  t.launch_overhead = us(kPriorLaunchOverheadUs);
  t.protocols[static_cast<size_t>(CollectiveProtocol::kLl)].injection_cap =
      Bandwidth::gigabytes_per_second(kPriorLlInjectionCapGBps);
  t.protocols[static_cast<size_t>(CollectiveProtocol::kLl128)].injection_cap =
      Bandwidth::gigabytes_per_second(kPriorLl128InjectionCapGBps);
  t.protocols[static_cast<size_t>(CollectiveProtocol::kSimple)].hop_latency[static_cast<size_t>(
      LinkClass::kNvlink)][static_cast<size_t>(LatencyColumn::kRing)] = us(kNvlinkRing.simple);
  t.protocols[static_cast<size_t>(CollectiveProtocol::kSimple)].hop_latency[static_cast<size_t>(
      LinkClass::kNvlink)][static_cast<size_t>(LatencyColumn::kNvls)] = us(kNvlinkNvls.simple);
  t.nvls_efficiency = kPriorNvlsEfficiency;
  t.nvls_tree_efficiency = kPriorNvlsEfficiency;
  for (auto& [kind, cap] :
       t.protocols[static_cast<size_t>(CollectiveProtocol::kLl)].single_node_injection_caps) {
    if (kind == "nvlink3") cap = Bandwidth::gigabytes_per_second(kLlAmpereSingleNodeCapPriorGBps);
  }
  for (auto& [kind, factor] : t.latency_generation_factors)
    factor = 1.0;
  for (LinkFamily& f : t.families) {
    f.efficiency = 1.0;
    f.extra_hop_latency = {};
  }
  return t;
}

void validate_tuning(const CollectiveTuning& t) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("collective tuning: " + what);
  };
  if (t.launch_overhead < Duration::zero()) fail("launch_overhead must not be negative");
  if (t.net_overhead < Duration::zero()) fail("net_overhead must not be negative");
  if (!(t.tree_efficiency > 0.0 && t.tree_efficiency <= 1.0)) {
    fail(fmt::format("tree_efficiency must be in (0, 1], got {}", t.tree_efficiency));
  }
  auto check_factors = [&](const std::vector<std::pair<std::string, double>>& factors,
                           std::string_view what) {
    for (const auto& [kind, factor] : factors) {
      if (!(factor > 0.0 && factor <= kMaxGenerationFactor)) {
        fail(fmt::format("{} generation factor of `{}` must be in (0, {}], got {}", what, kind,
                         kMaxGenerationFactor, factor));
      }
    }
  };
  check_factors(t.nvls_generation_factors, "nvls");
  check_factors(t.latency_generation_factors, "latency");
  for (const LinkFamily& f : t.families)
    check_factors(f.generation_factors, f.name);
  if (!(t.nvls_efficiency > 0.0 && t.nvls_efficiency <= 1.0)) {
    fail(fmt::format("nvls_efficiency must be in (0, 1], got {}", t.nvls_efficiency));
  }
  if (!(t.nvls_tree_efficiency > 0.0 && t.nvls_tree_efficiency <= 1.0)) {
    fail(fmt::format("nvls_tree_efficiency must be in (0, 1], got {}", t.nvls_tree_efficiency));
  }
  if (t.network_peer_sms < 0 || t.network_peer_sms > kMaxCommunicationSms) {
    fail(fmt::format("network_peer_sms must be an SM count in [0, {}], got {}",
                     kMaxCommunicationSms, t.network_peer_sms));
  }
  for (const auto* table : {&t.communication_sms, &t.communication_sms_direct}) {
    for (const auto& [kind, sms] : *table) {
      if (sms < 0 || sms > kMaxCommunicationSms) {
        fail(fmt::format("communication_sms of `{}` must be an SM count in [0, {}], got {}", kind,
                         kMaxCommunicationSms, sms));
      }
    }
  }
  for (const auto& [kind, mib] : t.nvls_pipeline_fill_mib) {
    if (!(mib >= 0.0) || !std::isfinite(mib)) {
      fail(fmt::format("nvls_pipeline_fill_mib of `{}` must be a size in MiB >= 0, got {}", kind,
                       mib));
    }
  }
  for (size_t p = 0; p < kCollectiveProtocolCount; ++p) {
    const ProtocolTuning& pt = t.protocols[p];
    const std::string_view name = kProtocolNames[p];
    if (!(pt.wire_factor >= 1.0)) {
      fail(fmt::format("protocol {}: wire_factor must be >= 1, got {}", name, pt.wire_factor));
    }
    if (pt.injection_cap.bytes_per_second() < 0.0) {
      fail(fmt::format("protocol {}: injection_cap must not be negative", name));
    }
    for (const auto& [kind, cap] : pt.single_node_injection_caps) {
      if (!(cap.bytes_per_second() >= 0.0)) {
        fail(fmt::format("protocol {}: single_node_injection_caps of `{}` must not be negative",
                         name, kind));
      }
    }
    for (size_t c = 0; c < kLatencyColumnCount; ++c) {
      if (pt.base_latency[c] < Duration::zero()) {
        fail(fmt::format("protocol {}: base latency must not be negative", name));
      }
      for (size_t k = 0; k < kLinkClassCount; ++k) {
        if (pt.hop_latency[k][c] < Duration::zero()) {
          fail(fmt::format("protocol {}: hop latency must not be negative", name));
        }
      }
    }
  }
  bool fallback = false;
  for (const LinkFamily& f : t.families) {
    if (!(f.efficiency > 0.0 && f.efficiency <= 1.0)) {
      fail(fmt::format("link family `{}`: efficiency must be in (0, 1], got {}", f.name,
                       f.efficiency));
    }
    for (Duration d : f.extra_hop_latency) {
      if (d < Duration::zero()) {
        fail(fmt::format("link family `{}`: extra hop latency must not be negative", f.name));
      }
    }
    for (const std::string& prefix : f.kind_prefixes)
      fallback = fallback || prefix.empty();
  }
  if (!fallback) fail("no fallback link family (one with the kind prefix \"\")");
  if (t.all_reduce_algorithms.empty()) fail("all_reduce_algorithms is empty");
  if (t.enabled_protocols.empty()) fail("enabled_protocols is empty");
}

namespace {
/// A map of link kind prefix -> value in [lo, hi] (by default a factor in (0,
/// kMaxGenerationFactor]), in file order.
std::vector<std::pair<std::string, double>> read_factors(const ConfigNode& node, double lo = 1e-6,
                                                         double hi = kMaxGenerationFactor) {
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& kind : node.map_keys())
    out.emplace_back(kind, node.get_double_in(kind, lo, hi));
  return out;
}

/// Largest NVLS pipeline fill a tuning file may give, MiB (64 GiB: beyond any GPU's memory).
constexpr double kMaxNvlsFillMib = 65536.0;

/// `{"kind": value, ...}` of a prefix table (generation factors, fills, SM counts).
template <typename Value>
std::string factor_map(const std::vector<std::pair<std::string, Value>>& factors) {
  std::string out = "{";
  for (size_t i = 0; i < factors.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}: {}", yaml_quoted(factors[i].first), factors[i].second);
  }
  return out + "}";
}
}  // namespace

CollectiveTuning load_collective_tuning(const ConfigNode& root) {
  root.expect_map("a collective tuning, as `upsim calibrate collectives` writes it");
  CollectiveTuning t = nccl_like_tuning();
  t.launch_overhead = root.get_duration_in_or("launch_overhead", Duration::zero(),
                                              kMaxConfiguredLatency, t.launch_overhead);
  t.net_overhead = root.get_duration_in_or("net_overhead", Duration::zero(), kMaxConfiguredLatency,
                                           t.net_overhead);
  t.tree_efficiency =
      root.get_double_in_or("tree_efficiency", kMinEfficiency, 1.0, t.tree_efficiency);
  t.nvls_efficiency =
      root.get_double_in_or("nvls_efficiency", kMinEfficiency, 1.0, t.nvls_efficiency);
  t.nvls_tree_efficiency =
      root.get_double_in_or("nvls_tree_efficiency", kMinEfficiency, 1.0, t.nvls_tree_efficiency);
  if (root.has("nvls_link_kinds")) t.nvls_link_prefixes = root.get_string_list("nvls_link_kinds");
  if (auto factors = root.optional_child("nvls_generation_factors")) {
    t.nvls_generation_factors = read_factors(*factors);
  }
  if (auto factors = root.optional_child("latency_generation_factors")) {
    t.latency_generation_factors = read_factors(*factors);
  }
  if (auto fill = root.optional_child("nvls_pipeline_fill_mib")) {
    t.nvls_pipeline_fill_mib = read_factors(*fill, 0.0, kMaxNvlsFillMib);
  }
  t.network_peer_sms = static_cast<int32_t>(
      root.get_int_in_or("network_peer_sms", 0, kMaxCommunicationSms, t.network_peer_sms));
  for (auto [key, table] : {std::pair{"communication_sms", &t.communication_sms},
                            std::pair{"communication_sms_direct", &t.communication_sms_direct}}) {
    if (auto sms = root.optional_child(key)) {
      sms->expect_map("SMs per link kind prefix, e.g. {\"\": 2, nvlink4: 24}");
      table->clear();
      for (const std::string& kind : sms->map_keys()) {
        table->emplace_back(kind,
                            static_cast<int32_t>(sms->get_int_in(kind, 0, kMaxCommunicationSms)));
      }
    }
  }
  if (auto list = root.optional_child("all_reduce_algorithms")) {
    t.all_reduce_algorithms.clear();
    for (const ConfigNode& item : list->items()) {
      const auto a = parse_collective_algorithm(item.as_string());
      if (!a || *a == CollectiveAlgorithm::kDirect) {
        item.fail(
            fmt::format("unknown all-reduce algorithm `{}`; valid: ring, tree, nvls, "
                        "hierarchical",
                        item.as_string()));
      }
      t.all_reduce_algorithms.push_back(*a);
    }
  }
  if (auto list = root.optional_child("enabled_protocols")) {
    t.enabled_protocols.clear();
    for (const ConfigNode& item : list->items()) {
      const auto p = parse_collective_protocol(item.as_string());
      if (!p) {
        item.fail(fmt::format("unknown protocol `{}`; valid: {}", item.as_string(),
                              join(kProtocolNames)));
      }
      t.enabled_protocols.push_back(*p);
    }
  }
  if (auto protocols = root.optional_child("protocols")) {
    for (size_t p = 0; p < kCollectiveProtocolCount; ++p) {
      const auto node = protocols->optional_child(kProtocolNames[p]);
      if (!node) continue;
      ProtocolTuning& pt = t.protocols[p];
      pt.wire_factor = node->get_double_in_or("wire_factor", 1.0, kMaxWireFactor, pt.wire_factor);
      pt.injection_cap = node->get_bandwidth_in_or(
          "injection_cap", Bandwidth::bytes_per_second(0.0), kMaxInjectionCap, pt.injection_cap);
      // A file that sets injection_cap alone (as files before single_node_injection_caps did)
      // means that cap everywhere.
      if (node->has("injection_cap")) pt.single_node_injection_caps.clear();
      if (auto caps = node->optional_child("single_node_injection_caps")) {
        pt.single_node_injection_caps.clear();
        for (const std::string& kind : caps->map_keys()) {
          pt.single_node_injection_caps.emplace_back(
              kind,
              caps->get_bandwidth_in(kind, Bandwidth::bytes_per_second(0.0), kMaxInjectionCap));
        }
      }
      if (auto base = node->optional_child("base_latency")) {
        for (size_t c = 0; c < kLatencyColumnCount; ++c)
          pt.base_latency[c] = base->get_duration_in_or(kColumnNames[c], Duration::zero(),
                                                        kMaxConfiguredLatency, pt.base_latency[c]);
      }
      if (auto hop = node->optional_child("hop_latency")) {
        for (size_t k = 0; k < kLinkClassCount; ++k) {
          const auto cls = hop->optional_child(kLinkClassNames[k]);
          if (!cls) continue;
          for (size_t c = 0; c < kLatencyColumnCount; ++c)
            pt.hop_latency[k][c] = cls->get_duration_in_or(
                kColumnNames[c], Duration::zero(), kMaxConfiguredLatency, pt.hop_latency[k][c]);
        }
      }
    }
  }
  if (auto list = root.optional_child("link_families")) {
    t.families.clear();
    for (const ConfigNode& item : list->items()) {
      LinkFamily f;
      f.name = item.get_string("name");
      f.kind_prefixes = item.get_string_list("kinds");
      const std::string cls = item.get_choice("class", kLinkClassNames);
      for (size_t k = 0; k < kLinkClassCount; ++k) {
        if (kLinkClassNames[k] == cls) f.link_class = static_cast<LinkClass>(k);
      }
      f.efficiency = item.get_double_in_or("efficiency", kMinEfficiency, 1.0, 1.0);
      if (auto factors = item.optional_child("generation_factors")) {
        f.generation_factors = read_factors(*factors);
      }
      if (auto extra = item.optional_child("extra_hop_latency")) {
        for (size_t p = 0; p < kCollectiveProtocolCount; ++p)
          f.extra_hop_latency[p] = extra->get_duration_in_or(
              kProtocolNames[p], Duration::zero(), kMaxConfiguredLatency, Duration::zero());
      }
      t.families.push_back(std::move(f));
    }
  }
  try {
    validate_tuning(t);
  } catch (const std::invalid_argument& e) {
    root.fail(e.what());
  }
  return t;
}

std::string format_collective_tuning(const CollectiveTuning& t, std::string_view header) {
  std::string out;
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find('\n', start);
    if (end == std::string_view::npos) end = header.size();
    const std::string_view line = header.substr(start, end - start);
    out += line.empty() ? "#\n" : fmt::format("# {}\n", line);
    start = end + 1;
  }
  out += fmt::format("launch_overhead: {}\n", format_duration_exact(t.launch_overhead));
  out += fmt::format("net_overhead: {}\n", format_duration_exact(t.net_overhead));
  out += fmt::format("tree_efficiency: {}\n", t.tree_efficiency);
  out += fmt::format("nvls_efficiency: {}\n", t.nvls_efficiency);
  out += fmt::format("nvls_tree_efficiency: {}\n", t.nvls_tree_efficiency);
  out += fmt::format(
      "nvls_link_kinds: {}\n",
      flow_list(t.nvls_link_prefixes, [](const std::string& k) { return yaml_quoted(k); }));
  out += fmt::format("nvls_generation_factors: {}\n", factor_map(t.nvls_generation_factors));
  out += fmt::format("nvls_pipeline_fill_mib: {}\n", factor_map(t.nvls_pipeline_fill_mib));
  out += fmt::format("latency_generation_factors: {}\n", factor_map(t.latency_generation_factors));
  out += fmt::format("communication_sms: {}\n", factor_map(t.communication_sms));
  out += fmt::format("communication_sms_direct: {}\n", factor_map(t.communication_sms_direct));
  out += fmt::format("network_peer_sms: {}\n", t.network_peer_sms);
  out += fmt::format("all_reduce_algorithms: {}\n",
                     flow_list(t.all_reduce_algorithms, [](CollectiveAlgorithm a) {
                       return std::string(collective_algorithm_name(a));
                     }));
  out += fmt::format("enabled_protocols: {}\n",
                     flow_list(t.enabled_protocols, [](CollectiveProtocol p) {
                       return std::string(collective_protocol_name(p));
                     }));
  out += "protocols:\n";
  for (size_t p = 0; p < kCollectiveProtocolCount; ++p) {
    const ProtocolTuning& pt = t.protocols[p];
    out += fmt::format("  {}:\n", kProtocolNames[p]);
    out += fmt::format("    wire_factor: {}\n", pt.wire_factor);
    out += fmt::format("    injection_cap: {}\n", format_bandwidth_exact(pt.injection_cap));
    std::string caps = "{";
    for (size_t i = 0; i < pt.single_node_injection_caps.size(); ++i) {
      if (i > 0) caps += ", ";
      caps += fmt::format("{}: {}", yaml_quoted(pt.single_node_injection_caps[i].first),
                          format_bandwidth_exact(pt.single_node_injection_caps[i].second));
    }
    out += fmt::format("    single_node_injection_caps: {}}}\n", caps);
    out += fmt::format("    base_latency: {}\n", latency_map(pt.base_latency));
    out += "    hop_latency:\n";
    for (size_t k = 0; k < kLinkClassCount; ++k)
      out += fmt::format("      {}: {}\n", kLinkClassNames[k], latency_map(pt.hop_latency[k]));
  }
  out += "link_families:\n";
  for (const LinkFamily& f : t.families) {
    out += fmt::format("  - name: {}\n", yaml_quoted(f.name));
    out += fmt::format("    kinds: {}\n", flow_list(f.kind_prefixes, [](const std::string& k) {
                         return yaml_quoted(k);
                       }));
    out += fmt::format("    class: {}\n", link_class_name(f.link_class));
    out += fmt::format("    efficiency: {}\n", f.efficiency);
    out += fmt::format("    generation_factors: {}\n", factor_map(f.generation_factors));
    std::string extra = "{";
    for (size_t p = 0; p < kCollectiveProtocolCount; ++p) {
      if (p > 0) extra += ", ";
      extra +=
          fmt::format("{}: {}", kProtocolNames[p], format_duration_exact(f.extra_hop_latency[p]));
    }
    out += fmt::format("    extra_hop_latency: {}}}\n", extra);
  }
  return out;
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> collective_tuning_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"launch_overhead", "added to every collective: kernel launch and host-side overhead"},
      {"net_overhead", "per-step floor of intra-node hops in rings over several nodes"},
      {"tree_efficiency", "bandwidth factor of the tree algorithm"},
      {"nvls_efficiency", "bandwidth factor of NVLS (NVLink SHARP) within one node"},
      {"nvls_tree_efficiency", "bandwidth factor of NVLS over several nodes (NVLS_TREE)"},
      {"nvls_link_kinds[]", "link kinds (prefixes) whose NVSwitch offers NVLS"},
      {"nvls_generation_factors.*", "factor on the NVLS efficiency over links of this kind"},
      {"nvls_pipeline_fill_mib.*", "MiB an NVLS collective moves before it streams at full rate"},
      {"latency_generation_factors.*", "factor on NCCL's base and intra-node hop latencies"},
      {"communication_sms.", "SMs a collective's kernel holds per GPU, any link kind"},
      {"communication_sms.*", "SMs a collective's kernel holds per GPU with links of this kind"},
      {"communication_sms_direct.*", "the same for direct GPU-to-GPU links of this kind"},
      {"network_peer_sms", "SMs of a send / receive between GPUs of different nodes"},
      {"all_reduce_algorithms[]", "algorithms the tuner may choose for an all-reduce"},
      {"enabled_protocols[]", "protocols the tuner may choose: LL, LL128, Simple"},
      {"protocols.*.wire_factor", "bytes on the wire per payload byte of this protocol"},
      {"protocols.*.injection_cap", "most payload bytes per second a GPU sends with it; 0: none"},
      {"protocols.*.single_node_injection_caps.*",
       "the cap within one node over links of this kind"},
      {"protocols.*.base_latency.*", "NCCL's base latency of this protocol and algorithm"},
      {"protocols.*.hop_latency.*.*",
       "NCCL's per-hop latency on this hardware class and algorithm"},
      {"link_families[].name", "the family's name"},
      {"link_families[].kinds[]", "link kind prefixes of the family (\"\": every kind)"},
      {"link_families[].class", "NCCL's hardware class of its hops: nvlink, pci or net"},
      {"link_families[].efficiency", "share of a link's bandwidth a long transfer reaches"},
      {"link_families[].generation_factors.*", "factor on the efficiency for links of this kind"},
      {"link_families[].extra_hop_latency.*", "added to NCCL's hop latency of this protocol"},
  };
  return kMeanings;
}

}  // namespace upsim

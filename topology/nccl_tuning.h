// NCCL-like collective tuning: the algorithms and protocols a collective can run with, the
// latency and bandwidth parameters of each, and the efficiencies of link families. The flow
// network (topology/flow_network.h) prices every candidate (algorithm, protocol) with these
// numbers, picks the fastest as NCCL's tuner does, and simulates that one on the fabric.
//
// Contract:
//  - Every number has a source: NCCL's own tuning tables (NVIDIA/nccl src/graph/tuning.cc),
//    NCCL's protocol definitions, or a fit on measured nccl-tests data; nccl_like_tuning()
//    states which for each (see nccl_tuning.cpp). configs/collectives/nccl_like.yaml restates
//    the same values and test/unit/topology/collective_algorithms_test.cpp checks that they agree.
//  - Latencies are Durations, caps Bandwidths (payload bytes per second), efficiencies are
//    fractions in (0, 1], wire factors are >= 1.
//  - A link belongs to the family with the longest `kind_prefixes` entry that prefixes its
//    FabricLink::kind; the empty prefix matches every kind, so a family with it is the fallback.
//  - validate_tuning() throws std::invalid_argument naming the first bad value;
//    load_collective_tuning() throws ConfigError at the key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/time.h"
#include "sim/units.h"

namespace upsim {

/// How a collective moves its bytes (NCCL's algorithms, plus the direct exchange of all-to-all).
enum class CollectiveAlgorithm : uint8_t {
  kRing,          ///< rings over all members (NCCL Ring); all-reduce = reduce-scatter + all-gather
  kTree,          ///< chains inside nodes, double binary tree across nodes (NCCL Tree)
  kNvls,          ///< NVLink SHARP: reduction inside the NVSwitch, trees across nodes (NVLS/Tree)
  kHierarchical,  ///< ring reduce-scatter inside nodes, trees across nodes, ring all-gather
  kDirect,        ///< every pair exchanges directly (all-to-all, send/recv)
};
inline constexpr size_t kCollectiveAlgorithmCount = 5;
std::string_view collective_algorithm_name(CollectiveAlgorithm algorithm);
std::optional<CollectiveAlgorithm> parse_collective_algorithm(std::string_view name);

/// NCCL's wire protocols: LL (8-byte lines of 4 data + 4 flag bytes), LL128 (128-byte lines of
/// 120 data bytes + an 8-byte flag), Simple (bulk copies with a fence per chunk).
enum class CollectiveProtocol : uint8_t { kLl, kLl128, kSimple };
inline constexpr size_t kCollectiveProtocolCount = 3;
std::string_view collective_protocol_name(CollectiveProtocol protocol);
std::optional<CollectiveProtocol> parse_collective_protocol(std::string_view name);

/// NCCL's hardware classes for hop latencies (NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET).
/// NVLS over several nodes (NCCL's NVLS_TREE) pipelines two stages, the in-switch reduction /
/// multicast within each node and the network tree between nodes, and the network stage keeps as
/// many bytes in flight as the first (NCCL_STEPS slots of one NVLS chunk per channel, NVIDIA/nccl
/// src/enqueue.cc and src/include/device.h at commit 5067397c): its pipeline fill is this many
/// times CollectiveTuning::nvls_pipeline_fill_mib. The 2x8 H100 InfiniBand sweep of
/// test/data/nccl-tests agrees: from 64 MiB up its time exceeds latency + bytes / plateau rate by
/// the transfer time of about 40 MB (2 x 16 MiB = 33.6 MB); in a refit of the tuning, 2 gives an
/// objective of 0.1169, 3 gives 0.1177 and 4 gives 0.1189.
inline constexpr double kNvlsTreeFillStages = 2.0;

enum class LinkClass : uint8_t { kNvlink, kPci, kNet };
inline constexpr size_t kLinkClassCount = 3;
std::string_view link_class_name(LinkClass link_class);

/// The latency columns of NCCL's tables that upsim's algorithms use: Tree, Ring and NVLS
/// (NVLSTree on several nodes). Hierarchical and direct use the Ring column.
enum class LatencyColumn : uint8_t { kTree, kRing, kNvls };
inline constexpr size_t kLatencyColumnCount = 3;

/// A family of link technologies that share an efficiency and a latency class.
struct LinkFamily {
  std::string name;
  /// A link whose kind starts with one of these belongs to the family ("" matches every kind).
  std::vector<std::string> kind_prefixes;
  LinkClass link_class = LinkClass::kPci;
  /// Achieved / nominal bandwidth of a long transfer, in (0, 1]: the flow network shares
  /// bandwidth x efficiency among the flows on a link of this family.
  double efficiency = 1.0;
  /// Added to NCCL's per-hop latency of each protocol for hops over this family (NCCL's
  /// `latencyInter` of a network plugin plays this role); zero for the defaults.
  std::array<Duration, kCollectiveProtocolCount> extra_hop_latency{};
  /// Per-generation factors on `efficiency`: a link whose kind starts with a key (longest
  /// matching key) gets efficiency x factor, capped at 1; other links get `efficiency`. Lets
  /// one fitted number serve several generations of a technology in the ratios a source gives
  /// (the defaults: NCCL's per-generation NVLink bandwidths, nccl_tuning.cpp).
  std::vector<std::pair<std::string, double>> generation_factors;
};

struct ProtocolTuning {
  /// Bytes on the wire per payload byte (>= 1).
  double wire_factor = 1.0;
  /// NCCL baseLat per LatencyColumn.
  std::array<Duration, kLatencyColumnCount> base_latency{};
  /// NCCL hwLat per [LinkClass][LatencyColumn].
  std::array<std::array<Duration, kLatencyColumnCount>, kLinkClassCount> hop_latency{};
  /// The most payload bytes per second a GPU's NCCL kernel pushes out with this protocol, all
  /// its flows of one collective together (NCCL's llMaxBw / per-channel caps play this role);
  /// zero means no cap. Over several nodes, and within one node without a match below.
  Bandwidth injection_cap;
  /// The cap within one node by the link kind of the members' intra-node ring arcs (longest
  /// prefix; the lowest over the arcs): NCCL's per-GPU-generation single-node limits (for LL,
  /// llMaxBws' N1 column, nccl_tuning.cpp). Zero means no cap.
  std::vector<std::pair<std::string, Bandwidth>> single_node_injection_caps;
};

struct CollectiveTuning {
  /// Added to every collective: kernel launch and the benchmark's host-side overhead.
  Duration launch_overhead;
  std::array<ProtocolTuning, kCollectiveProtocolCount> protocols;
  /// Families of link kinds; must include a fallback (a family with the prefix "").
  std::vector<LinkFamily> families;
  /// Bandwidth factor of the tree algorithm (NCCL's tree model refinements), in (0, 1].
  double tree_efficiency = 1.0;
  /// Bandwidth factor of GPU <-> NVSwitch flows under NVLS within one node, in (0, 1].
  double nvls_efficiency = 1.0;
  /// The same under NVLS spanning several nodes (NCCL's separate NVLS_TREE algorithm: in-switch
  /// reduction in each node, trees over the network), in (0, 1].
  double nvls_tree_efficiency = 1.0;
  /// NVLS needs an NVSwitch whose GPU links have one of these kind prefixes (NVLink SHARP).
  std::vector<std::string> nvls_link_prefixes;
  /// Per-generation factors on nvls_efficiency, by NVLS link kind prefix (longest match; 1
  /// otherwise), capped at 1 (defaults: NCCL's per-generation NVLS efficiencies).
  std::vector<std::pair<std::string, double>> nvls_generation_factors;
  /// Pipeline fill of NVLS, in MiB, by NVLS link kind prefix (longest match; 0 otherwise): the
  /// bytes an NVLS collective moves before its pipeline streams at full rate. NCCL runs NVLS on
  /// nvlsChannels channels of NCCL_NVLS_CHUNKSIZE chunks with NCCL_STEPS slots each; until that
  /// much is in flight a byte costs its transfer time twice. Added to the latency of NVLS as
  /// min(bytes, fill) at the uncontended bottleneck rate (nccl_tuning.cpp has the values); NVLS
  /// over several nodes (NCCL's NVLS_TREE) fills kNvlsTreeFillStages times as much.
  std::vector<std::pair<std::string, double>> nvls_pipeline_fill_mib;
  /// Per-GPU-generation factor on NCCL's base and intra-node hop latencies (not the launch
  /// overhead, not network hops), by the link kind of the members' intra-node ring arcs (longest
  /// prefix; 1 otherwise): NCCL's latency table is one for every generation, the small-message
  /// floor is not (nccl_tuning.cpp has the values).
  std::vector<std::pair<std::string, double>> latency_generation_factors;
  /// SMs NCCL's kernel holds on each member GPU while a collective runs (one thread block per
  /// channel, resident from its launch until the collective completes), by the kind of the
  /// GPU's links: for each link of the GPU the longest matching prefix ("" matches every kind),
  /// the largest over its links; 0 when none matches. Compute kernels beside it run on the SMs
  /// left (sim/executor.h). Values and sources in nccl_tuning.cpp; empty: no interference.
  std::vector<std::pair<std::string, int32_t>> communication_sms;
  /// The same for links that join the GPU directly to another GPU (an NVLink mesh without an
  /// NVSwitch: NCCL's search finds fewer rings there); links of kinds without an entry here
  /// take communication_sms.
  std::vector<std::pair<std::string, int32_t>> communication_sms_direct;
  /// SMs of a send / receive between GPUs of different nodes (NCCL's channels per network
  /// peer; at most communication_sms).
  int32_t network_peer_sms = 0;
  /// Per-step floor of intra-node hop latency in rings spanning several nodes (NCCL
  /// getNetOverhead), tripled for Simple as NCCL does.
  Duration net_overhead;
  /// Algorithms the tuner may choose for all-reduce, and protocols for every collective.
  std::vector<CollectiveAlgorithm> all_reduce_algorithms;
  std::vector<CollectiveProtocol> enabled_protocols;

  const ProtocolTuning& protocol(CollectiveProtocol p) const {
    return protocols[static_cast<size_t>(p)];
  }
  /// The family of a link kind (longest matching prefix). Throws std::invalid_argument when no
  /// family matches (validate_tuning requires a fallback).
  const LinkFamily& family_of(std::string_view link_kind) const;
  /// Bandwidth efficiency of a link of this kind: its family's, times the family's generation
  /// factor for the kind, capped at 1.
  double link_efficiency(std::string_view link_kind) const;
  /// NVLS efficiency over NVLS links of this kind: nvls_efficiency (one node) or
  /// nvls_tree_efficiency (several nodes) times its generation factor, capped at 1.
  double nvls_efficiency_for(std::string_view link_kind, bool several_nodes = false) const;
  /// Latency factor of links of this kind (latency_generation_factors; 1 when none matches).
  double latency_factor_for(std::string_view link_kind) const;
  /// communication_sms of a link of this kind (longest matching prefix; 0 when none matches);
  /// `gpu_to_gpu`: communication_sms_direct's entry first, when one matches.
  int32_t communication_sms_for(std::string_view link_kind, bool gpu_to_gpu = false) const;
  /// NVLS pipeline fill over NVLS links of this kind, in bytes (0 when no prefix matches).
  double nvls_pipeline_fill_bytes_for(std::string_view link_kind) const;
  /// Injection cap of `p` for a collective within one node over links of this kind: the
  /// longest matching single_node_injection_caps key's, else injection_cap.
  Bandwidth single_node_injection_cap_for(CollectiveProtocol p, std::string_view link_kind) const;
  /// NCCL hop latency of `protocol` on `link_class` in `column`.
  Duration hop_latency(CollectiveProtocol p, LinkClass link_class, LatencyColumn column) const {
    return protocol(p).hop_latency[static_cast<size_t>(link_class)][static_cast<size_t>(column)];
  }
};

/// The calibrated defaults (values and sources in nccl_tuning.cpp).
CollectiveTuning nccl_like_tuning();

/// The names (collective_fit.h key paths) of the parameters of nccl_like_tuning() that were
/// fitted on measured data (the [FIT] values of configs/collectives/nccl_like.yaml), in the
/// order nccl_tuning.cpp lists them.
std::vector<std::string> calibrated_tuning_parameters();

/// nccl_like_tuning() with every calibrated parameter set back to a value that no measurement
/// of test/data chose: NCCL's own table value where NCCL has one, the datasheet (efficiency 1,
/// no extra latency) otherwise; sources in nccl_tuning.cpp. The start of a held-out
/// (leave-one-system-out) fit, so that a parameter the training systems do not determine keeps
/// a value that owes nothing to the held-out system.
CollectiveTuning nccl_prior_tuning();

/// Throws std::invalid_argument for a negative latency, an efficiency outside (0, 1], a wire
/// factor below 1, a negative cap, a generation factor outside (0, kMaxGenerationFactor], no
/// fallback family, or an empty algorithm / protocol list.
void validate_tuning(const CollectiveTuning& tuning);

/// The documented ranges of a tuning file's values: latencies and overheads in [0, 1 s]
/// (kMaxConfiguredLatency),
/// efficiencies in [1e-6, 1], wire factors in [1, 16] (NCCL's LL doubles the bytes on the wire,
/// LL128 adds 1/16), injection caps in [0, 1 PB/s] (0: no cap).
inline constexpr double kMinEfficiency = 1e-6;
inline constexpr double kMaxWireFactor = 16.0;
/// The most SMs a tuning file may say one collective's kernel holds per GPU (beyond any GPU).
inline constexpr int32_t kMaxCommunicationSms = 1024;
/// Generation factors lie in (0, 4] (one generation at most four times as efficient as another).
inline constexpr double kMaxGenerationFactor = 4.0;
inline constexpr Bandwidth kMaxInjectionCap = Bandwidth::bytes_per_second(1e15);

/// Reads a tuning file (configs/collectives/nccl_like.yaml). Every key is optional and
/// overrides the default of nccl_like_tuning(); `link_families`, when present, replaces the
/// whole list. A protocol's `injection_cap` without `single_node_injection_caps` beside it
/// applies within one node too (the meaning it had before that key existed). Throws ConfigError at
/// the offending key, also for a value outside the ranges above.
CollectiveTuning load_collective_tuning(const ConfigNode& root);

/// What each key of a tuning file means, one line each (sim/config/key_meaning.h).
std::span<const KeyMeaning> collective_tuning_key_meanings();

/// The whole tuning as a YAML file in the schema load_collective_tuning() reads, every key
/// written (durations and bandwidths in exact forms, doubles shortest round-trip), so that
/// loading the text gives back `tuning` exactly. `header` is written first, each of its lines
/// as a `# ` comment.
std::string format_collective_tuning(const CollectiveTuning& tuning, std::string_view header = {});

}  // namespace upsim

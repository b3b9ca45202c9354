// One collective algorithm family (ring, tree, NVLS, hierarchical, direct): how it decomposes a
// collective into flows on a member set's layout and what NCCL's latency formula charges it.
// Each family is one file of this folder; the planner (collective_planner.h) finds it through
// collective_algorithm(). Adding an algorithm: a CollectiveAlgorithm value
// (topology/nccl_tuning.h), a file with its class, and a line in algorithm_registry.cpp.
//
// Contract: an Algorithm holds no state; structure() is called once per (member set, kind) and
// cached by the planner (all-to-all: once per set of sizes), latency() per candidate protocol.
#pragma once

#include <cstdint>
#include <string>

#include "sim/cost_models.h"
#include "topology/collectives/channel_flows.h"
#include "topology/collectives/collective_layout.h"
#include "topology/collectives/fabric_paths.h"
#include "topology/collectives/flow_structure.h"
#include "topology/nccl_tuning.h"

namespace upsim::collectives {

/// What NCCL's latency formulas (tuning.cc ncclTopoTuneModel; see nccl_tuning.cpp for the
/// commit) read for one candidate protocol on one layout.
struct LatencyTerms {
  const CollectiveTuning& tuning;
  const CollectiveLayout& layout;
  CollectiveProtocol protocol;

  const ProtocolTuning& protocol_tuning() const { return tuning.protocol(protocol); }
  /// NCCL hwLat of a link class in a latency column.
  Duration hop(LinkClass link_class, LatencyColumn column) const {
    return tuning.hop_latency(protocol, link_class, column);
  }
  /// NCCL baseLat of a latency column.
  Duration base(LatencyColumn column) const {
    return protocol_tuning().base_latency[static_cast<size_t>(column)];
  }
  /// A base or intra-node latency in the GPU generation of the layout's ring arcs.
  Duration generation(Duration d) const {
    return layout.latency_factor == 1.0
               ? d
               : Duration::from_seconds_f(d.seconds() * layout.latency_factor);
  }
  /// The worst extra hop latency of the inter-node routes for this protocol.
  Duration inter_extra() const { return layout.inter_extra[static_cast<size_t>(protocol)]; }
  uint32_t members() const { return static_cast<uint32_t>(layout.size()); }
  uint32_t nodes() const { return layout.node_count(); }
  /// The most members of a node (p).
  uint32_t per_node() const { return layout.max_per_node; }
  /// floor(log2(nodes)), as a double.
  double log_nodes() const;
};

/// A flow structure and what it is per: a byte of the collective's size (per_byte), or the
/// collective's own bytes (all-to-all structures, built for its sizes).
struct BuiltStructure {
  const FlowStructure* structure = nullptr;
  bool per_byte = true;
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual CollectiveAlgorithm id() const = 0;
  /// Why the algorithm cannot run on `layout`; empty when it can.
  virtual std::string unavailable(const CollectiveLayout& /*layout*/) const { return {}; }
  /// Whether it runs with `protocol` (NVLS: Simple only).
  virtual bool runs(CollectiveProtocol /*protocol*/) const { return true; }
  /// The flows of `collective` on `layout` (kept in the layout's caches), routed over `paths`.
  /// By default add_flows() per byte of the size, cached per (kind, algorithm).
  virtual BuiltStructure structure(const CollectiveDesc& collective, CollectiveLayout& layout,
                                   FabricPaths& paths, const CollectiveTuning& tuning) const;
  /// The start latency of its flows, launch overhead excluded.
  virtual Duration latency(CollectiveKind kind, const LatencyTerms& terms) const = 0;
  /// The fraction of its modelled rate the algorithm reaches for `bytes` (tree all-reduce's
  /// medium-size correction); payload bytes are divided by it when priced. 1 by default.
  virtual double rate_fraction(CollectiveKind /*kind*/, CollectiveProtocol /*protocol*/,
                               int64_t /*bytes*/) const {
    return 1.0;
  }
  /// Bytes whose transfer time is paid twice until its pipeline is full (NVLS); 0 by default.
  virtual double pipeline_fill_bytes(const CollectiveLayout& /*layout*/) const { return 0.0; }

 protected:
  /// Adds the flows of `kind` per byte of the collective's size (structure()'s default).
  virtual void add_flows(CollectiveKind kind, const CollectiveTuning& tuning, FabricPaths& paths,
                         ChannelFlows& flows) const = 0;
};

/// The family of `id` (algorithm_registry.cpp).
const Algorithm& collective_algorithm(CollectiveAlgorithm id);

/// The families, one per file of this folder.
const Algorithm& ring_algorithm();
const Algorithm& tree_algorithm();
const Algorithm& nvls_algorithm();
const Algorithm& hierarchical_algorithm();
const Algorithm& direct_algorithm();

}  // namespace upsim::collectives

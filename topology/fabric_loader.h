// Fabric YAML -> validated, sealed Fabric.
//
// Schema (every key is checked: an unknown key is an error when the document is checked). A
// single-node fabric:
//
//   name: 4x A100 NVLink3            # required, non-empty
//   nodes: 1                         # servers built from `node`; default 1, at most kMaxNodes
//   node:                            # the template of one server: a map, or the path of a YAML
//                                    # file holding that map (relative to this file)
//     link_kinds:                    # optional: per-technology defaults for `links`
//       nvlink3: {bandwidth: 25GB/s, latency: 700ns}    # per physical link, per direction
//       pcie4: {bandwidth: 31.5GB/s, latency: 500ns}
//     devices:                       # in order; see "Ids" and "GPU order"
//       - {id: cpu, kind: cpu}                        # no count: the id as written
//       - {id: pcie, kind: pcie_switch, count: 2}     # pcie0, pcie1
//       - {id: gpu, kind: gpu, count: 4}              # gpu0 .. gpu3
//     links:                         # each entry: exactly one of between / pairs / from+to /
//                                    # mesh, then kind, and optionally bandwidth, latency, count
//       - {mesh: gpu*, kind: nvlink3, count: 4}       # 6 links of 4 x 25 GB/s
//       - {from: [pcie0, pcie1], to: cpu, kind: pcie4, latency: 300ns}  # overrides the table
//       - {pairs: [[gpu0, pcie0], [gpu1, pcie0], [gpu2, pcie1], [gpu3, pcie1]], kind: pcie4}
//
// A multi-node fabric (node template in a file of its own, shared by several fabrics):
//
//   name: DGX H100 cluster
//   nodes: 128
//   node: nodes/dgx_h100.yaml
//   network:                         # required when nodes > 1; see "Network"
//     topology: rail_optimized       # rail_optimized | fat_tree | leaf_spine
//     nic_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 500ns}      # all three required
//     switch_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 300ns}   # needed with > 1 leaf
//     nodes_per_leaf: 32             # default: all nodes
//     oversubscription: 1.0          # leaf downlink / uplink bandwidth; default 1.0; from
//                                    #   kMinOversubscription to kMaxOversubscription
//     spines: 16                     # default: the most uplink cables of any leaf
//
// Devices: `kind` is gpu | cpu | pcie_switch | nvswitch | nic | network_switch. Without `count`
// the device id is `id`; with `count: n` (1 .. kMaxDeviceCount) the entry declares the n devices
// `id`0 .. `id`<n-1>. An id is letters, digits, `_`, `-` and `.`; `/` and `*` are reserved.
//
// Links: every link is full duplex. `bandwidth` is per physical link and per direction and needs
// a unit ("25GB/s", "400Gbit/s"); `latency` is one way ("350ns"). `count: n` (default 1) states n
// parallel physical links, modelled as ONE link of n x bandwidth (routes take a single path, so
// parallel links must be aggregated to be usable at once). `kind` names the technology (an
// identifier such as nvlink4, pcie5, upi, ib_ndr); when `link_kinds` is given, every link kind
// must be one of its keys and `bandwidth` / `latency` default to the table's values, otherwise
// both are required on every link. The endpoint forms:
//   between: [a, b]                one link between two device ids;
//   pairs: [[a, b], [c, d], ...]   one link per pair;
//   from: A, to: B                 one link from every device of A to every device of B (A and B
//                                  must not share a device);
//   mesh: A                        one link between every two devices of A (a full mesh).
// A and B are a device reference or a list of them; a reference is a device id, or `name*`,
// which matches every device whose id is `name` followed by one or more digits (so `gpu*`
// matches gpu0 .. gpu7), in declaration order. A reference that matches nothing is an error. Two
// links between the same two devices are an error (use `count`), and so is a link from a device
// to itself. Limits: bandwidth is finite and at least 1 MB/s, latency at most 1 s.
//
// Ids: with `nodes: 1` device ids are used as written. With more nodes, the template is built
// once per node k = 0 .. nodes-1 and every template id becomes `node<k>/<id>` (node1/gpu3).
// Template devices belong to node k; network switches belong to no node (kNoNode).
//
// GPU order: Fabric::gpus() lists GPUs in declaration order within the template, node by node
// (node 0's GPUs, then node 1's ...). Rank r of a workload runs on the r-th GPU.
//
// Network: connects the NICs of all nodes with a two-level Clos built as follows. Let N = nodes,
// R = the NICs of the template (in declaration order; NIC r is rail r) and P = nodes_per_leaf.
// Nodes are cut into G = ceil(N / P) groups of P consecutive nodes (the last may be smaller).
//   - fat_tree / leaf_spine (two names for the same thing): one leaf switch per group, `leaf<g>`,
//     linked to every NIC of every node in group g.
//   - rail_optimized: R leaf switches per group, `leaf<g*R + r>` links NIC r of every node in
//     group g (NVIDIA DGX SuperPOD style: NIC r of every server sits on rail r).
//   Every NIC gets one `nic_link` to its leaf. With a single leaf there is no spine layer.
//   Otherwise each leaf l with NICs of total bandwidth D_l gets C_l = ceil(D_l / oversubscription
//   / switch_link.bandwidth) uplink cables. S = min(spines, max C_l) spine switches `spine<s>`
//   are built; leaf l deals its C_l cables round robin over spines 0, 1, ..., and the cables
//   between a leaf and a spine form one link of (cables x switch_link.bandwidth). Every leaf
//   reaches spine 0, so any NIC reaches any other; routes pick among equal spines by ECMP (see
//   fabric.h). Between rails of a rail-optimised network the cheapest route (fabric.h cost) may
//   cross a spine or, as with DGX-like nodes, the destination node's PCIe tree (NIC r -> PCIe
//   switch -> CPU -> PCIe switch -> GPU); NCCL avoids both with rail-matched channels. Three-level
//   Clos networks are not generated.
//
// The GPU's own PCIe interface (FabricOptions::gpu_pcie_rate, from the hardware profile's
// pcie_generation): a link whose kind names PCIe (starts with `pcie`, as pcie4 or pcie5; the
// same test as the tuning's PCI family, nccl_tuning.h) with a GPU at one end runs at the slower
// of its stated bandwidth (x count) and the GPU's rate, as a PCIe link trains at the lower
// generation of its two ends (PCI Express Base Specification, link training). Links further up
// (switch to CPU) keep their stated bandwidth: they are the switch's.
//
// Uses (ConfigNode::read_for): the keys that set link capacities -- `bandwidth`, `latency` and
// `count` of links and link_kinds, nic_link and switch_link bandwidth and latency,
// oversubscription and spines -- are read for kFabricLinkCapacityUse; only a network model that
// moves bytes over the links (the flow network) reads them. Devices, link endpoints and kinds
// are read unconditionally (GPU count, nodes and routes need them).
//
// Validation: every error is a ConfigError naming file, line and key path of the value at
// fault: unknown keys or kinds, unitless or non-positive bandwidths, links to unknown devices,
// duplicate ids or links, a bad node count, a multi-node fabric without a network, GPUs that
// cannot reach each other (routes never pass through a GPU) or, when the fabric has CPUs, any
// CPU. Sizes are bounded (kMax* below) so that no input can exhaust memory or overflow route
// costs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "topology/fabric.h"

namespace upsim {

/// Limits on what a fabric file may ask for (each exceeded limit is a ConfigError).
inline constexpr int64_t kMaxNodes = 16384;
inline constexpr int64_t kMaxDeviceCount = 4096;  ///< `count` of one devices entry
/// network.oversubscription: deployed fat trees run 1:1 to 1:8 (tapered); the range leaves room
/// for what-ifs either way (uplinks 64x the downlinks, or 1/1024 of them).
inline constexpr double kMinOversubscription = 1.0 / 64.0;
inline constexpr double kMaxOversubscription = 1024.0;
inline constexpr int64_t kMaxParallelLinks = 4096;  ///< `count` of one links entry
inline constexpr int64_t kMaxSpines = 4096;
inline constexpr int64_t kMaxFabricDevices = 1'000'000;
inline constexpr int64_t kMaxFabricLinks = 4'000'000;  ///< full-duplex links

/// The use of the keys that set link capacities (see the header).
inline constexpr std::string_view kFabricLinkCapacityUse = "fabric link capacity";

/// What the platform adds to the links a fabric file states.
struct FabricOptions {
  /// The GPU's PCIe rate per direction (x16 of its generation; see the header); nullopt: PCIe
  /// links at GPUs as stated.
  std::optional<Bandwidth> gpu_pcie_rate;
};

/// A PCIe link at a GPU as the fabric file states it: one per link of the node template (every
/// node has the same).
struct GpuPcieLink {
  std::string name;       ///< "gpu0 -- pcie0 (pcie4)"
  Bandwidth stated;       ///< bandwidth x count, before the GPU's rate caps it
  std::string stated_at;  ///< "`node.link_kinds.pcie4.bandwidth` (file:line)", or "(--set)"
};

/// Reads the fabric document whose root is `root` (a scenario calls
/// `platform.load_reference("topology")` and passes the result), builds it and seals it.
/// Throws ConfigError; never FabricError. Keys it does not know are left unread, so the caller's
/// ConfigDocument::check_all_keys_used() reports them. `gpu_pcie_links`, when given, receives
/// the PCIe links at GPUs as stated (for a caller that says when the GPU's rate changes none).
Fabric load_fabric(const ConfigNode& root, const FabricOptions& options = {},
                   std::vector<GpuPcieLink>* gpu_pcie_links = nullptr);

/// What each key of a fabric document means, one line each (sim/config/key_meaning.h).
std::span<const KeyMeaning> fabric_key_meanings();

}  // namespace upsim

// The fabric: devices and the links between them, validated and sealed, with routes.
//
// Contract:
//  - Devices are GPUs, CPU sockets, PCIe switches, NVSwitches, NICs and network switches; each
//    belongs to a node (a server) or, for network switches, to none (node = kNoNode).
//  - Every physical link is full duplex: FabricBuilder::add_link creates two directed links,
//    one per direction, each with the given bandwidth; `reverse` names the other one.
//  - After FabricBuilder::seal the fabric is immutable, but for the route cache that route()
//    fills: one fabric serves one thread at a time (clone() gives each thread its own). Sealing
//    checks it (duplicate ids, links to unknown devices, self-links, non-positive bandwidth,
//    negative latency, no GPU, GPUs that cannot reach each other or a CPU) and throws
//    FabricError naming what is wrong.
//  - Routes are sequences of directed LinkIds. A route never passes *through* a GPU (GPUs only
//    start and end routes). A route between devices of different nodes avoids passing through
//    CPUs when any other route exists (inter-node traffic goes NIC to NIC over the network, as
//    RDMA does; within a node, PCIe peer traffic may cross the CPUs' root complexes). Among routes,
//    the one with the least cost wins, cost of a link = route_cost_ps (latency + the time to move
//    kRouteReferenceBytes at its bandwidth: NVLink beats PCIe and fewer hops beat more); ties
//    between equal-cost next hops (ECMP, e.g. the spines of a fat-tree) are broken by a hash of
//    (source, destination), so different pairs spread over equal paths and the same pair always
//    takes the same one.
//  - Boost.Graph is an implementation detail of fabric.cpp; it never appears in a header.
//  - The engine sees only LinkIds and routes (through topology/flow_network.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/time.h"
#include "sim/units.h"

namespace upsim {

using DeviceIndex = uint32_t;
using LinkId = uint32_t;
inline constexpr int32_t kNoNode = -1;

enum class DeviceKind : uint8_t { kGpu, kCpu, kPcieSwitch, kNvSwitch, kNic, kNetworkSwitch };
std::string_view device_kind_name(DeviceKind kind);
std::optional<DeviceKind> parse_device_kind(std::string_view name);

/// A fabric that cannot be built; the message names the device or link at fault.
class FabricError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FabricDevice {
  std::string id;
  DeviceKind kind;
  int32_t node;
};

/// One direction of a full-duplex link.
struct FabricLink {
  DeviceIndex from;
  DeviceIndex to;
  std::string kind;  ///< technology, e.g. "nvlink3", "pcie4", "ib_ndr", "ethernet_200g"
  Bandwidth bandwidth;
  Duration latency;
  LinkId reverse;
};

/// Bytes used to weigh bandwidth against latency when choosing routes (1 MiB: large enough that
/// bandwidth decides between technologies, small enough that hop latency still counts).
inline constexpr double kRouteReferenceBytes = 1024.0 * 1024.0;

/// A link's routing cost in picoseconds: its latency + the time to move kRouteReferenceBytes at
/// its bandwidth, and at least 1 ps, so that equal-cost next hops always lead closer to the
/// destination (a free link would let a route loop between two devices of equal cost).
int64_t route_cost_ps(const FabricLink& link);

class Fabric {
 public:
  Fabric(Fabric&&) noexcept;
  Fabric& operator=(Fabric&&) noexcept;
  ~Fabric();

  /// A deep copy, route cache included. route() fills that cache although it is const, so one
  /// fabric must not be used by several threads at once: give each thread its own clone.
  Fabric clone() const;

  const std::string& name() const;
  std::span<const FabricDevice> devices() const;
  std::span<const FabricLink> links() const;
  const FabricDevice& device(DeviceIndex d) const { return devices()[d]; }
  const FabricLink& link(LinkId l) const { return links()[l]; }
  /// "gpu0 -> nvswitch1 (nvlink4)"
  std::string link_name(LinkId l) const;

  /// GPUs in declaration order: rank r of a workload runs on gpus()[r].
  std::span<const DeviceIndex> gpus() const;
  /// Number of nodes (servers).
  uint32_t node_count() const;
  /// The node of each of the first `gpus` GPUs (at most gpus().size()), renumbered 0, 1, ... in
  /// order of first appearance.
  std::vector<uint32_t> gpu_nodes(size_t gpus) const;
  std::optional<DeviceIndex> find(std::string_view id) const;

  /// The directed links from `from` to `to`, in order. Empty when from == to. Throws
  /// FabricError if `to` is unreachable from `from` (sealing guarantees GPU-GPU and GPU-CPU
  /// routes). Each route is computed on first use by a search from `to` that stops once every
  /// device as near as `from` is settled (a route inside a node costs what the node costs),
  /// and cached per (from, to).
  std::vector<LinkId> route(DeviceIndex from, DeviceIndex to) const;
  /// Sum of latencies along route(from, to).
  Duration route_latency(DeviceIndex from, DeviceIndex to) const;
  /// The CPU socket nearest to `gpu` (host memory for host<->device copies).
  DeviceIndex host_of(DeviceIndex gpu) const;

 private:
  friend class FabricBuilder;
  struct State;
  explicit Fabric(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class FabricBuilder {
 public:
  explicit FabricBuilder(std::string name);
  FabricBuilder(FabricBuilder&&) noexcept;
  ~FabricBuilder();

  /// Throws FabricError for a duplicate id.
  DeviceIndex add_device(std::string id, DeviceKind kind, int32_t node);
  /// A full-duplex link with `bandwidth` in each direction. Returns the a->b LinkId (b->a is
  /// that + 1). Throws FabricError for a self-link, an unknown device, bandwidth <= 0 or
  /// latency < 0.
  LinkId add_link(DeviceIndex a, DeviceIndex b, std::string kind, Bandwidth bandwidth,
                  Duration latency);
  std::optional<DeviceIndex> find(std::string_view id) const;
  size_t device_count() const;

  /// Validates and seals. Throws FabricError.
  Fabric seal() &&;

 private:
  std::unique_ptr<Fabric::State> state_;
};

}  // namespace upsim

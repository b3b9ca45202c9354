// FabricPaths: the paths NCCL's channels take on a fabric, and the link facts the collective
// planner prices flows with. Part of the collective planner (collective_planner.h); its
// algorithms and layouts read the fabric through it.
//
// Contract:
//  - Inside a node, paths are the cheapest by the fabric's own link cost (fabric.h: latency +
//    the time to move kRouteReferenceBytes), computed here over the node's devices and never
//    through another GPU, so a plan needs no fabric-wide route tables; equal-cost ties go to
//    the lower link id. Other paths are Fabric::route.
//  - Between two GPUs of one node whose direct path leaves NVLink, path() goes through the
//    intermediate GPU NVLink joins to both, when there is one (NCCL's PATH_NVB).
//  - Link capacity = bandwidth x its family's efficiency (CollectiveTuning).
//  - Results are cached per device (pair); the fabric must outlive this object.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "topology/fabric.h"
#include "topology/nccl_tuning.h"

namespace upsim::collectives {

/// "None" for member indices, device indices and link ids alike.
inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

class FabricPaths {
 public:
  /// `tuning` must have been validated (validate_tuning); only its link families are read.
  FabricPaths(const Fabric& fabric, const CollectiveTuning& tuning);

  const Fabric& fabric() const { return fabric_; }
  /// Efficiency of a fabric link's family (capacity = bandwidth x this).
  double link_efficiency(LinkId link) const { return link_efficiency_[link]; }
  /// Bytes per second a flow network shares on each fabric link, by link id.
  std::span<const double> link_capacity() const { return link_capacity_; }
  const LinkFamily& link_family(LinkId link) const { return *link_family_[link]; }
  /// The links that end at each device, by device index.
  std::span<const std::vector<LinkId>> in_links() const { return in_links_; }

  /// Links from one device to another: inside a node (one end a GPU) the cheapest node-local
  /// path by the fabric's cost; otherwise Fabric::route.
  std::vector<LinkId> direct_path(DeviceIndex from, DeviceIndex to);
  /// direct_path, except between two GPUs of one node whose direct path leaves NVLink: then
  /// through the intermediate GPU NVLink joins to both, when there is one (NCCL's PATH_NVB).
  std::vector<LinkId> path(DeviceIndex from, DeviceIndex to);
  bool all_nvlink(std::span<const LinkId> links) const;
  /// The NICs of `gpu`'s node nearest to it (fewest hops, then least latency), in device
  /// order; empty when its node has none.
  std::vector<DeviceIndex> nearest_nics(DeviceIndex gpu);
  /// The NICs `gpu` sends through when every GPU of its node uses the network: GPUs with the
  /// same nearest NICs split them in order (GPU i of a DGX gets NIC i), whatever the group, as
  /// NCCL's point-to-point does. Empty when its node has no NIC.
  const std::vector<DeviceIndex>& own_nics(DeviceIndex gpu);

 private:
  /// Cheapest paths from one GPU to every device of its node (see the contract).
  struct LocalTree {
    std::vector<LinkId> via;  // per node position: the link that reaches it (none: unreached)
  };
  const LocalTree& local_tree(DeviceIndex gpu);

  const Fabric& fabric_;
  std::vector<double> link_efficiency_;
  std::vector<double> link_capacity_;  // bytes/s, bandwidth x efficiency
  std::vector<const LinkFamily*> link_family_;
  std::vector<std::vector<LinkId>> in_links_;  // per device, the links that end there
  std::vector<int64_t> route_cost_ps_;         // per link, the fabric's routing cost
  std::map<int32_t, std::vector<DeviceIndex>> node_devices_;  // devices of each node id
  std::vector<uint32_t> node_position_;  // position of a device in its node's list
  std::map<DeviceIndex, LocalTree> local_trees_;
  /// path()'s NVLink relays per (from, to); empty: none (the direct path is used).
  std::map<std::pair<DeviceIndex, DeviceIndex>, std::vector<LinkId>> relays_;
  std::map<DeviceIndex, std::vector<DeviceIndex>> own_nics_;  // per GPU, see own_nics()
};

/// Sharer j of m of the equally near `nics` (GPUs under one PCIe switch): its slice in order,
/// at least one NIC, so GPU i of a DGX H100 gets NIC i and GPU i of an OCI BM.GPU4.8 gets NICs
/// 2i and 2i+1 -- the rail of its own PCIe switch, as NCCL's channels use them.
std::vector<DeviceIndex> share_of(const std::vector<DeviceIndex>& nics, size_t j, size_t m);

}  // namespace upsim::collectives

// FlowBatch: the flows of one network operation (a planned collective, a copy), as the flow
// network (topology/flow_network.h) runs them and the collective planner
// (topology/collectives/collective_planner.h) produces them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/units.h"

namespace upsim {

/// Flows that start together and complete as one operation. Flow i crosses
/// links[offsets[i] .. offsets[i + 1]). A link id below the fabric's link count is a fabric
/// link; id fabric.links().size() + k names this batch's k-th virtual link, whose capacity is
/// virtual_capacities[k] (a private cap shared by the flows that name it).
struct FlowBatch {
  std::vector<uint32_t> links;
  std::vector<uint32_t> offsets{0};
  std::vector<double> bytes;
  std::vector<Bandwidth> virtual_capacities;

  void add_flow(std::span<const uint32_t> route, double flow_bytes) {
    links.insert(links.end(), route.begin(), route.end());
    offsets.push_back(static_cast<uint32_t>(links.size()));
    bytes.push_back(flow_bytes);
  }
  size_t size() const { return bytes.size(); }
};

}  // namespace upsim

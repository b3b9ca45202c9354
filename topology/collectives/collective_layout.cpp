#include "topology/collectives/collective_layout.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "topology/collectives/ring_cycles.h"

namespace upsim::collectives {
namespace {

LinkClass worse(LinkClass a, LinkClass b) {
  auto rank = [](LinkClass c) {
    switch (c) {
      case LinkClass::kNvlink:
        return 0;
      case LinkClass::kPci:
        return 1;
      case LinkClass::kNet:
        return 2;
    }
    return 2;
  };
  return rank(a) >= rank(b) ? a : b;
}

/// Direct GPU -> device links of every member, for meshes and NVLS.
struct MemberLinks {
  std::vector<uint32_t> member_of_device;      // per device: the member on it, else kNone
  std::vector<std::vector<LinkId>> out_links;  // per member, its links out
};

MemberLinks member_links(const CollectiveLayout& lay, FabricPaths& paths) {
  const Fabric& fabric = paths.fabric();
  const auto links = fabric.links();
  const auto in_links = paths.in_links();
  const size_t n = lay.size();
  MemberLinks m;
  m.member_of_device.assign(fabric.devices().size(), kNone);
  for (uint32_t i = 0; i < n; ++i)
    m.member_of_device[lay.gpu[i]] = i;
  // A member's links out are the reverses of its links in (in link-id order, as pairs are).
  m.out_links.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (LinkId in : in_links[lay.gpu[i]])
      m.out_links[i].push_back(links[in].reverse);
  }
  return m;
}

/// Nodes, each member's node and local position, max_per_node and uniform.
void group_nodes(CollectiveLayout& lay, const Fabric& fabric) {
  const size_t n = lay.size();
  // Nodes in id order; members keep their order inside a node.
  std::vector<std::pair<int32_t, uint32_t>> by_node;
  for (uint32_t i = 0; i < n; ++i)
    by_node.emplace_back(fabric.device(lay.gpu[i]).node, i);
  std::stable_sort(by_node.begin(), by_node.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  lay.node_of.assign(n, 0);
  lay.local_of.assign(n, 0);
  for (size_t k = 0; k < by_node.size(); ++k) {
    if (k == 0 || by_node[k].first != by_node[k - 1].first) lay.nodes.emplace_back();
    const uint32_t i = by_node[k].second;
    lay.node_of[i] = static_cast<uint32_t>(lay.nodes.size() - 1);
    lay.local_of[i] = static_cast<uint32_t>(lay.nodes.back().size());
    lay.nodes.back().push_back(i);
  }
  for (const auto& node : lay.nodes)
    lay.max_per_node = std::max(lay.max_per_node, static_cast<uint32_t>(node.size()));
  for (const auto& node : lay.nodes)
    lay.uniform = lay.uniform && node.size() == lay.max_per_node;
}

/// Ring cycles per node: member order, or Hamiltonian cycles over direct links (ring_cycles.h).
void choose_rings(CollectiveLayout& lay, FabricPaths& paths, const MemberLinks& member) {
  const auto links = paths.fabric().links();
  const auto capacity = paths.link_capacity();
  const auto& member_of_device = member.member_of_device;
  const auto& out_links = member.out_links;
  // Ring cycles per node.
  lay.cycles.resize(lay.nodes.size());
  for (size_t v = 0; v < lay.nodes.size(); ++v) {
    const std::vector<uint32_t>& node = lay.nodes[v];
    const size_t p = node.size();
    std::vector<std::vector<uint32_t>>& chosen = lay.cycles[v];
    chosen.push_back(node);  // member order unless direct links give better rings
    if (p < 3) continue;
    // Capacity of direct arcs between the node's members (local indices).
    std::vector<double> cap(p * p, 0.0);
    bool any_direct = false;
    for (size_t a = 0; a < p; ++a) {
      for (LinkId l : out_links[node[a]]) {
        const uint32_t to = member_of_device[links[l].to];
        if (to == kNone || lay.node_of[to] != v) continue;
        cap[a * p + lay.local_of[to]] += capacity[l];
        any_direct = true;
      }
    }
    if (!any_direct) continue;
    const std::vector<std::vector<uint32_t>> local_cycles = choose_ring_cycles(p, cap);
    if (local_cycles.empty()) continue;
    chosen.clear();
    for (const std::vector<uint32_t>& cycle : local_cycles) {
      std::vector<uint32_t> order;
      for (uint32_t local : cycle)
        order.push_back(node[local]);
      chosen.push_back(std::move(order));
    }
  }
}

/// NICs of each member across nodes, and the channel count.
void assign_nics(CollectiveLayout& lay, FabricPaths& paths) {
  const size_t n = lay.size();
  // NICs of each member across nodes: the NICs of its node with the shortest route from it (by
  // hops, then latency); members with the same nearest NICs (GPUs under one PCIe switch) split
  // them in order, so GPU i of a DGX H100 gets NIC i and GPU i of an OCI BM.GPU4.8 gets NICs 2i
  // and 2i+1 -- the rail of its own PCIe switch, as NCCL's channels use them.
  lay.nics_of.assign(n, {});
  if (lay.nodes.size() > 1) {
    for (const auto& node : lay.nodes) {
      std::map<std::vector<DeviceIndex>, std::vector<uint32_t>> sharing;  // nearest NICs -> members
      for (uint32_t i : node) {
        std::vector<DeviceIndex> nearest = paths.nearest_nics(lay.gpu[i]);
        if (!nearest.empty()) sharing[std::move(nearest)].push_back(i);
      }
      for (const auto& [nics, sharers] : sharing) {
        for (size_t j = 0; j < sharers.size(); ++j)
          lay.nics_of[sharers[j]] = share_of(nics, j, sharers.size());
      }
    }
    for (const auto& mine : lay.nics_of)
      lay.max_nics = std::max(lay.max_nics, static_cast<uint32_t>(mine.size()));
  }

  uint32_t max_cycles = 1;
  for (const auto& c : lay.cycles)
    max_cycles = std::max(max_cycles, static_cast<uint32_t>(c.size()));
  // Across nodes NCCL runs a channel per (GPU, NIC) so that every NIC carries traffic.
  lay.channels = lay.nodes.size() > 1
                     ? std::max(max_cycles, lay.max_per_node * std::max(lay.max_nics, 1u))
                     : max_cycles;
}

/// Latency classes, GPU generation and injection caps of the ring arcs and inter-node routes.
void latency_classes(CollectiveLayout& lay, FabricPaths& paths, const CollectiveTuning& tuning) {
  const Fabric& fabric = paths.fabric();
  const auto links = fabric.links();
  const auto in_links = paths.in_links();
  // Latency classes, generation and single-node injection caps: intra-node ring arcs,
  // inter-node routes.
  double latency_factor = 0.0;
  const bool one_node = lay.nodes.size() == 1;
  std::array<bool, kCollectiveProtocolCount> capped_by_arcs{};
  for (size_t p = 0; p < kCollectiveProtocolCount; ++p)
    lay.injection_cap[p] = tuning.protocols[p].injection_cap;
  for (size_t v = 0; v < lay.nodes.size(); ++v) {
    for (const auto& cyc : lay.cycles[v]) {
      for (size_t j = 0; cyc.size() > 1 && j < cyc.size(); ++j) {
        for (LinkId l : paths.path(lay.gpu[cyc[j]], lay.gpu[cyc[(j + 1) % cyc.size()]])) {
          lay.intra_class = worse(lay.intra_class, paths.link_family(l).link_class);
          latency_factor = std::max(latency_factor, tuning.latency_factor_for(links[l].kind));
          for (size_t p = 0; one_node && p < kCollectiveProtocolCount; ++p) {
            const Bandwidth cap = tuning.single_node_injection_cap_for(
                static_cast<CollectiveProtocol>(p), links[l].kind);
            // The tightest cap over the arcs; zero is no cap.
            Bandwidth& mine = lay.injection_cap[p];
            if (!capped_by_arcs[p] || mine.bytes_per_second() <= 0.0 ||
                (cap.bytes_per_second() > 0.0 && cap < mine))
              mine = cap;
            capped_by_arcs[p] = true;
          }
        }
      }
    }
  }
  lay.latency_factor = latency_factor > 0.0 ? latency_factor : 1.0;
  if (lay.nodes.size() > 1) {
    lay.inter_class = LinkClass::kNvlink;
    for (size_t v = 0; v < lay.nodes.size(); ++v) {
      // A node's way out: the first member's path to its NIC and that NIC's network links, or,
      // without NICs, the fabric's route to the next node.
      const uint32_t first = lay.nodes[v].front();
      std::vector<LinkId> way_out;
      if (!lay.nics_of[first].empty()) {
        const DeviceIndex nic = lay.nics_of[first].front();
        way_out = paths.path(lay.gpu[first], nic);
        for (LinkId in : in_links[nic]) {
          if (fabric.device(links[in].from).kind == DeviceKind::kNetworkSwitch)
            way_out.push_back(in);
        }
      } else {
        const uint32_t next = lay.nodes[(v + 1) % lay.nodes.size()].front();
        way_out = fabric.route(lay.gpu[first], lay.gpu[next]);
      }
      for (LinkId l : way_out) {
        const LinkFamily& f = paths.link_family(l);
        lay.inter_class = worse(lay.inter_class, f.link_class);
        for (size_t p = 0; p < kCollectiveProtocolCount; ++p)
          lay.inter_extra[p] = std::max(lay.inter_extra[p], f.extra_hop_latency[p]);
      }
    }
  }
}

/// NVLS planes, efficiency and pipeline fill when NVLS applies (see the header's contract).
void nvls_planes(CollectiveLayout& lay, FabricPaths& paths, const CollectiveTuning& tuning,
                 const MemberLinks& member) {
  const Fabric& fabric = paths.fabric();
  const auto links = fabric.links();
  const auto capacity = paths.link_capacity();
  const auto& out_links = member.out_links;
  const size_t n = lay.size();
  // NVLS: every node's members attach directly to the same NVSwitch(es) over NVLS-capable links,
  // and a node holds at least kNvlsMinGpusPerNode of them: NCCL leaves NVLS off when the
  // communicator has two or fewer GPUs in the node (NVIDIA/nccl src/transport/nvls.cc,
  // ncclNvlsInit: no NVLS support for gpuCount <= 2, NCCL 2.18.1 to 2.28.6, the versions of the
  // measured sweeps; NCCL 2.28.7 lowered it to gpuCount < 2).
  if (lay.uniform && lay.max_per_node >= kNvlsMinGpusPerNode &&
      !tuning.nvls_link_prefixes.empty()) {
    auto nvls_capable = [&](const FabricLink& link) {
      if (fabric.device(link.to).kind != DeviceKind::kNvSwitch) return false;
      for (const std::string& prefix : tuning.nvls_link_prefixes) {
        if (link.kind.compare(0, prefix.size(), prefix) == 0) return true;
      }
      return false;
    };
    std::vector<std::vector<std::pair<DeviceIndex, double>>> planes(n);
    bool ok = true;
    double nvls_efficiency = 1.0;
    double nvls_fill_bytes = 0.0;
    for (const auto& node : lay.nodes) {
      // Switches every member of the node reaches directly.
      std::vector<DeviceIndex> common;
      for (size_t k = 0; k < node.size(); ++k) {
        std::vector<DeviceIndex> mine;
        for (LinkId l : out_links[node[k]]) {
          if (nvls_capable(links[l])) mine.push_back(links[l].to);
        }
        std::sort(mine.begin(), mine.end());
        mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
        if (k == 0) {
          common = mine;
        } else {
          std::vector<DeviceIndex> both;
          std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                                std::back_inserter(both));
          common = std::move(both);
        }
      }
      if (common.empty()) {
        ok = false;
        break;
      }
      for (uint32_t i : node) {
        double total = 0.0;
        for (LinkId l : out_links[i]) {
          if (std::binary_search(common.begin(), common.end(), links[l].to) &&
              nvls_capable(links[l]))
            total += capacity[l];
        }
        for (DeviceIndex sw : common) {
          double share = 0.0;
          for (LinkId l : out_links[i]) {
            if (links[l].to == sw && nvls_capable(links[l])) {
              share += capacity[l];
              nvls_efficiency = std::min(
                  nvls_efficiency, tuning.nvls_efficiency_for(links[l].kind, lay.nodes.size() > 1));
              nvls_fill_bytes =
                  std::max(nvls_fill_bytes, tuning.nvls_pipeline_fill_bytes_for(links[l].kind));
            }
          }
          planes[i].emplace_back(sw, share / total);
        }
      }
    }
    if (ok) {
      lay.nvls_planes = std::move(planes);
      lay.nvls_efficiency = nvls_efficiency;
      lay.nvls_fill_bytes = nvls_fill_bytes;
    }
  }
}

}  // namespace

std::unique_ptr<CollectiveLayout> build_layout(const std::vector<RankId>& members,
                                               FabricPaths& paths, const CollectiveTuning& tuning) {
  auto lay = std::make_unique<CollectiveLayout>();
  lay->members = members;
  lay->gpu.resize(members.size());
  for (size_t i = 0; i < members.size(); ++i)
    lay->gpu[i] = paths.fabric().gpus()[members[i]];
  group_nodes(*lay, paths.fabric());
  const MemberLinks member = member_links(*lay, paths);
  choose_rings(*lay, paths, member);
  assign_nics(*lay, paths);
  latency_classes(*lay, paths, tuning);
  nvls_planes(*lay, paths, tuning, member);
  return lay;
}

}  // namespace upsim::collectives

// Fabric::route against a reference: the whole-table routing it replaced (one Dijkstra over
// every device per destination, the equal-cost next links of every device kept, a hash of
// (source, destination) picking among them), written here from fabric.h's contract on the
// public Fabric API. The bounded search must give the very same links for every pair, on the
// shipped fabrics and on fabrics built to stress ties (ECMP) and zero-cost links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_node.h"
#include "topology/fabric.h"
#include "topology/fabric_loader.h"

namespace upsim {
namespace {

constexpr int64_t kUnreachable = std::numeric_limits<int64_t>::max() / 4;

const std::filesystem::path kTopologies = std::filesystem::path(UPSIM_CONFIGS_DIR) / "topologies";

/// splitmix64, the fabric's ECMP hash (fabric.cpp).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The reference: full cost tables per destination, as fabric.h specifies routes.
class ReferenceRouter {
 public:
  explicit ReferenceRouter(const Fabric& f) : f_(f) {
    const auto links = f.links();
    out_.resize(f.devices().size());
    in_.resize(f.devices().size());
    cost_.resize(links.size());
    for (LinkId l = 0; l < links.size(); ++l) {
      out_[links[l].from].push_back(l);
      in_[links[l].to].push_back(l);
      cost_[l] = std::max<int64_t>(
          1, links[l].latency.ps() +
                 std::llround(kRouteReferenceBytes / links[l].bandwidth.bytes_per_second() * 1e12));
    }
  }

  std::vector<LinkId> route(DeviceIndex from, DeviceIndex to) const {
    if (from == to) return {};
    const bool between = f_.device(from).node != f_.device(to).node;
    std::vector<int64_t> cost = costs_toward(to, between);
    bool avoid = between;
    if (cost[from] >= kUnreachable && between) {
      cost = costs_toward(to, false);
      avoid = false;
    }
    if (cost[from] >= kUnreachable) throw FabricError("unreachable");
    std::vector<LinkId> path;
    const uint64_t pair_hash = mix((uint64_t{from} << 32) | to);
    for (DeviceIndex v = from; v != to;) {
      std::vector<LinkId> next;
      for (LinkId l : out_[v]) {
        const DeviceIndex w = f_.link(l).to;
        if (forbidden(w, to, avoid) || cost[w] >= kUnreachable) continue;
        if (cost[w] + cost_[l] == cost[v]) next.push_back(l);
      }
      const LinkId l = next[next.size() == 1 ? 0 : mix(pair_hash ^ v) % next.size()];
      path.push_back(l);
      v = f_.link(l).to;
    }
    return path;
  }

 private:
  bool forbidden(DeviceIndex v, DeviceIndex dst, bool avoid_cpus) const {
    if (v == dst) return false;
    const DeviceKind k = f_.device(v).kind;
    return k == DeviceKind::kGpu || (avoid_cpus && k == DeviceKind::kCpu);
  }
  std::vector<int64_t> costs_toward(DeviceIndex dst, bool avoid_cpus) const {
    std::vector<int64_t> cost(f_.devices().size(), kUnreachable);
    using Entry = std::pair<int64_t, DeviceIndex>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    cost[dst] = 0;
    queue.emplace(0, dst);
    while (!queue.empty()) {
      const auto [c, v] = queue.top();
      queue.pop();
      if (c != cost[v] || forbidden(v, dst, avoid_cpus)) continue;
      for (LinkId l : in_[v]) {
        const DeviceIndex u = f_.link(l).from;
        if (c + cost_[l] < cost[u]) {
          cost[u] = c + cost_[l];
          queue.emplace(cost[u], u);
        }
      }
    }
    return cost;
  }

  const Fabric& f_;
  std::vector<std::vector<LinkId>> out_;
  std::vector<std::vector<LinkId>> in_;
  std::vector<int64_t> cost_;
};

Fabric load(const std::string& file) {
  ConfigDocument doc = ConfigDocument::load_file(kTopologies / file);
  return load_fabric(doc.root());
}

/// Devices whose routes matter: GPUs, CPUs (host copies) and NICs (collective paths).
std::vector<DeviceIndex> endpoints(const Fabric& f) {
  std::vector<DeviceIndex> out;
  for (DeviceIndex d = 0; d < f.devices().size(); ++d) {
    const DeviceKind k = f.device(d).kind;
    if (k == DeviceKind::kGpu || k == DeviceKind::kCpu || k == DeviceKind::kNic) out.push_back(d);
  }
  return out;
}

/// Every pair of endpoints, or `samples` random pairs (fixed seed) when there are more.
void expect_same_routes(const Fabric& f, size_t samples) {
  const ReferenceRouter reference(f);
  const std::vector<DeviceIndex> ends = endpoints(f);
  size_t compared = 0;
  auto compare = [&](DeviceIndex a, DeviceIndex b) {
    ASSERT_EQ(f.route(a, b), reference.route(a, b))
        << f.name() << ": " << f.device(a).id << " -> " << f.device(b).id;
    ++compared;
  };
  if (ends.size() * ends.size() <= samples) {
    for (DeviceIndex a : ends) {
      for (DeviceIndex b : ends)
        compare(a, b);
    }
  } else {
    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<size_t> pick(0, ends.size() - 1);
    for (size_t k = 0; k < samples; ++k)
      compare(ends[pick(rng)], ends[pick(rng)]);
    // Host copies: GPUs to and from their host CPU, a sample of them.
    for (size_t k = 0; k < samples / 8; ++k) {
      const DeviceIndex g = f.gpus()[pick(rng) % f.gpus().size()];
      compare(f.host_of(g), g);
      compare(g, f.host_of(g));
    }
  }
  EXPECT_GT(compared, 0u);
}

TEST(FabricRouting, SameRoutesAsWholeTableRoutingOnShippedSingleNodes) {
  for (const char* file : {"a100x4_nvlink.yaml", "dgx1_v100.yaml", "dgx_a100.yaml", "dgx_h100.yaml",
                           "gv100x4_nvlink_bridge.yaml", "h100_pcie_x8.yaml", "hgx_h200.yaml",
                           "oci_bm_gpu4_a100_1node.yaml"}) {
    SCOPED_TRACE(file);
    expect_same_routes(load(file), 1'000'000);
  }
}

TEST(FabricRouting, SameRoutesAsWholeTableRoutingOnShippedClusters) {
  // Two-node fabrics pair by pair; clusters of 8 to 128 nodes (several leaf groups and spines:
  // ECMP) on a fixed random sample of pairs and of host copies.
  for (const char* file : {"dgx_h100_cluster_2.yaml", "gcp_a3mega_h100_2node.yaml",
                           "oci_bm_gpu4_a100_2node.yaml", "oci_bm_gpu_h100_2node.yaml"}) {
    SCOPED_TRACE(file);
    expect_same_routes(load(file), 1'000'000);
  }
  for (const char* file :
       {"dgx_h100_cluster_16.yaml", "a100_roce_cluster.yaml", "dgx_a100_cluster.yaml"}) {
    SCOPED_TRACE(file);
    expect_same_routes(load(file), 200);
  }
}

TEST(FabricRouting, SameRoutesWithTiesAndZeroCostLinks) {
  // Two nodes of two GPUs behind two NICs each, leaves under four spines (equal-cost paths
  // everywhere), and links so fast with no latency that their cost is the 1 ps floor: the
  // bounded search must still settle every equal-cost next hop, and no route may loop.
  FabricBuilder b("ties");
  const Bandwidth fast = Bandwidth::gigabytes_per_second(1e12);
  const Bandwidth ib = Bandwidth::gigabytes_per_second(50);
  std::vector<DeviceIndex> spines;
  for (int s = 0; s < 4; ++s) {
    spines.push_back(
        b.add_device("spine" + std::to_string(s), DeviceKind::kNetworkSwitch, kNoNode));
  }
  for (int n = 0; n < 3; ++n) {
    const std::string k = std::to_string(n);
    const DeviceIndex cpu = b.add_device("cpu" + k, DeviceKind::kCpu, n);
    const DeviceIndex sw = b.add_device("pcie" + k, DeviceKind::kPcieSwitch, n);
    b.add_link(cpu, sw, "pcie5", fast, Duration::zero());
    for (int g = 0; g < 2; ++g) {
      const std::string id = k + "_" + std::to_string(g);
      const DeviceIndex gpu = b.add_device("gpu" + id, DeviceKind::kGpu, n);
      const DeviceIndex nic = b.add_device("nic" + id, DeviceKind::kNic, n);
      const DeviceIndex leaf = b.add_device("leaf" + id, DeviceKind::kNetworkSwitch, kNoNode);
      b.add_link(gpu, sw, "pcie5", fast, Duration::zero());
      b.add_link(nic, sw, "pcie5", fast, Duration::zero());
      b.add_link(nic, leaf, "ib_ndr", ib, Duration::from_ns(500));
      for (DeviceIndex s : spines)
        b.add_link(leaf, s, "ib_ndr", ib, Duration::from_ns(300));
    }
  }
  const Fabric f = std::move(b).seal();
  expect_same_routes(f, 1'000'000);
}

}  // namespace
}  // namespace upsim

// FabricBuilder validation and routing on small hand-built fabrics.
#include "topology/fabric.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace upsim {
namespace {

Bandwidth gbps(double v) {
  return Bandwidth::gigabytes_per_second(v);
}
Duration ns(int64_t v) {
  return Duration::from_ns(v);
}

/// Two GPUs under one PCIe switch with a CPU, plus an NVLink between them.
Fabric two_gpus(bool nvlink) {
  FabricBuilder b("two");
  const DeviceIndex cpu = b.add_device("cpu0", DeviceKind::kCpu, 0);
  const DeviceIndex sw = b.add_device("pcie0", DeviceKind::kPcieSwitch, 0);
  const DeviceIndex g0 = b.add_device("gpu0", DeviceKind::kGpu, 0);
  const DeviceIndex g1 = b.add_device("gpu1", DeviceKind::kGpu, 0);
  b.add_link(cpu, sw, "pcie4", gbps(32), ns(500));
  b.add_link(g0, sw, "pcie4", gbps(32), ns(500));
  b.add_link(g1, sw, "pcie4", gbps(32), ns(500));
  if (nvlink) b.add_link(g0, g1, "nvlink3", gbps(300), ns(700));
  return std::move(b).seal();
}

TEST(Fabric, PrefersNvlinkOverPcie) {
  const Fabric f = two_gpus(true);
  const auto r = f.route(*f.find("gpu0"), *f.find("gpu1"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(f.link(r[0]).kind, "nvlink3");
  EXPECT_EQ(f.route_latency(*f.find("gpu0"), *f.find("gpu1")), ns(700));
}

TEST(Fabric, FallsBackToPcieThroughTheSwitch) {
  const Fabric f = two_gpus(false);
  const auto r = f.route(*f.find("gpu0"), *f.find("gpu1"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(f.link_name(r[0]), "gpu0 -> pcie0 (pcie4)");
  EXPECT_EQ(f.link_name(r[1]), "pcie0 -> gpu1 (pcie4)");
  EXPECT_EQ(f.host_of(*f.find("gpu1")), *f.find("cpu0"));
  EXPECT_EQ(f.link(r[0]).reverse, r[0] + 1);
}

TEST(Fabric, RoutesNeverPassThroughAGpu) {
  // gpu0 - gpu1 - gpu2 chain by NVLink plus a slow PCIe star: gpu0 -> gpu2 must use PCIe.
  FabricBuilder b("chain");
  const DeviceIndex cpu = b.add_device("cpu0", DeviceKind::kCpu, 0);
  DeviceIndex g[3];
  for (int i = 0; i < 3; ++i) {
    g[i] = b.add_device("gpu" + std::to_string(i), DeviceKind::kGpu, 0);
    b.add_link(g[i], cpu, "pcie3", gbps(16), ns(1000));
  }
  b.add_link(g[0], g[1], "nvlink2", gbps(50), ns(700));
  b.add_link(g[1], g[2], "nvlink2", gbps(50), ns(700));
  const Fabric f = std::move(b).seal();
  for (LinkId l : f.route(g[0], g[2]))
    EXPECT_EQ(f.link(l).kind, "pcie3");
}

TEST(Fabric, EcmpSpreadsPairsOverEqualSpines) {
  // 4 leaves x 2 spines; one GPU per leaf (via a NIC). Pairs should use both spines.
  FabricBuilder b("fat-tree");
  const DeviceIndex s0 = b.add_device("spine0", DeviceKind::kNetworkSwitch, kNoNode);
  const DeviceIndex s1 = b.add_device("spine1", DeviceKind::kNetworkSwitch, kNoNode);
  std::vector<DeviceIndex> gpus;
  for (int n = 0; n < 4; ++n) {
    const std::string k = std::to_string(n);
    const DeviceIndex leaf = b.add_device("leaf" + k, DeviceKind::kNetworkSwitch, kNoNode);
    const DeviceIndex cpu = b.add_device("cpu" + k, DeviceKind::kCpu, n);
    const DeviceIndex nic = b.add_device("nic" + k, DeviceKind::kNic, n);
    const DeviceIndex gpu = b.add_device("gpu" + k, DeviceKind::kGpu, n);
    b.add_link(gpu, nic, "pcie5", gbps(64), ns(500));
    b.add_link(cpu, nic, "pcie5", gbps(64), ns(500));
    b.add_link(nic, leaf, "ib_ndr", gbps(50), ns(600));
    b.add_link(leaf, s0, "ib_ndr", gbps(50), ns(600));
    b.add_link(leaf, s1, "ib_ndr", gbps(50), ns(600));
    gpus.push_back(gpu);
  }
  const Fabric f = std::move(b).seal();
  EXPECT_EQ(f.node_count(), 4u);
  std::set<DeviceIndex> spines_used;
  for (DeviceIndex a : gpus) {
    for (DeviceIndex c : gpus) {
      if (a == c) continue;
      const auto r = f.route(a, c);
      ASSERT_EQ(r.size(), 6u);
      spines_used.insert(f.link(r[2]).to);
      EXPECT_EQ(f.route(a, c), r) << "the same pair always takes the same path";
    }
  }
  EXPECT_EQ(spines_used, (std::set<DeviceIndex>{s0, s1}));
}

TEST(Fabric, BuilderRejectsBadInput) {
  FabricBuilder b("bad");
  const DeviceIndex g = b.add_device("gpu0", DeviceKind::kGpu, 0);
  EXPECT_THROW(b.add_device("gpu0", DeviceKind::kGpu, 0), FabricError);
  EXPECT_THROW(b.add_link(g, g, "nvlink3", gbps(1), ns(1)), FabricError);
  const DeviceIndex h = b.add_device("gpu1", DeviceKind::kGpu, 0);
  EXPECT_THROW(b.add_link(g, h, "nvlink3", gbps(0), ns(1)), FabricError);
  EXPECT_THROW(b.add_link(g, h, "nvlink3", gbps(1), ns(-1)), FabricError);
  EXPECT_THROW(b.add_link(g, 99, "nvlink3", gbps(1), ns(1)), FabricError);
}

TEST(Fabric, DisconnectedGpuIsAnErrorNamingIt) {
  FabricBuilder b("split");
  const DeviceIndex cpu = b.add_device("cpu0", DeviceKind::kCpu, 0);
  const DeviceIndex g0 = b.add_device("gpu0", DeviceKind::kGpu, 0);
  b.add_device("gpu7", DeviceKind::kGpu, 0);
  b.add_link(cpu, g0, "pcie4", gbps(32), ns(500));
  try {
    std::move(b).seal();
    FAIL() << "expected FabricError";
  } catch (const FabricError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu7"), std::string::npos) << e.what();
  }
}

TEST(Fabric, NoGpuIsAnError) {
  FabricBuilder b("empty");
  b.add_device("cpu0", DeviceKind::kCpu, 0);
  EXPECT_THROW(std::move(b).seal(), FabricError);
}

}  // namespace
}  // namespace upsim

// load_fabric: the shipped fabrics in configs/topologies/, the generated networks, and clear
// errors (file, line, key path) for bad fabrics in data/.
#include "topology/fabric_loader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace upsim {
namespace {

const std::filesystem::path kTopologies = std::filesystem::path(UPSIM_CONFIGS_DIR) / "topologies";
const std::filesystem::path kData = UPSIM_TOPOLOGY_TEST_DATA;

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

/// Loads a fabric file the way a scenario does, and checks that every key was read.
Fabric load_file(const std::filesystem::path& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  Fabric fabric = load_fabric(doc.root());
  doc.check_all_keys_used();
  return fabric;
}

Fabric load_text(std::string_view yaml) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "inline.yaml");
  Fabric fabric = load_fabric(doc.root());
  doc.check_all_keys_used();
  return fabric;
}

/// The ConfigError that `f` throws; fails the test when it throws nothing or something else.
template <typename F>
ConfigError config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a ConfigError, got: " << e.what();
    return ConfigError("", 0, "", "wrong exception");
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", 0, "", "nothing was thrown");
}

DeviceIndex dev(const Fabric& f, std::string_view id) {
  const auto d = f.find(id);
  EXPECT_TRUE(d.has_value()) << "no device " << id;
  return d.value_or(0);
}

/// Device kinds along route(from, to), endpoints included.
std::vector<DeviceKind> route_kinds(const Fabric& f, std::string_view from, std::string_view to) {
  std::vector<DeviceKind> kinds{f.device(dev(f, from)).kind};
  for (LinkId l : f.route(dev(f, from), dev(f, to)))
    kinds.push_back(f.device(f.link(l).to).kind);
  return kinds;
}

std::string kinds_text(const std::vector<DeviceKind>& kinds) {
  std::string out;
  for (DeviceKind k : kinds)
    out += std::string(out.empty() ? "" : " -> ") + std::string(device_kind_name(k));
  return out;
}

// ---- Shipped fabrics ----------------------------------------------------------------------

struct Expected {
  size_t gpus;
  uint32_t nodes;
  size_t links;  ///< full-duplex links (Fabric::links() holds two directed links each)
};

/// Every file in configs/topologies/ must be listed here (and load); the counts follow from the
/// files' device and link lists (see each file) and the network rules in fabric_loader.h.
const std::map<std::string, Expected, std::less<>> kShipped = {
    {"a100x4_nvlink.yaml", {4, 1, 6 + 4}},
    {"dgx1_v100.yaml", {8, 1, 16 + 1 + 4 + 8 + 4}},
    {"a100_roce_cluster.yaml", {64, 8, 232 + 64 + 64}},  // 8 rail leaves x 8 spines
    {"dgx_a100.yaml", {8, 1, 29}},
    // 16 GPU-switch + 1 switch-switch + 1 UPI + 8 PCIe-CPU + 16 GPU-PCIe + 8 NIC-PCIe.
    {"dgx2.yaml", {16, 1, 16 + 1 + 1 + 8 + 16 + 8}},
    // 128 x 29 + 1024 NIC links + 7 SUs x 8 rail leaves: 48 full leaves x 20 spines, 8 leaves
    // of the last SU (8 nodes, 8 uplink cables) x 8 spines.
    {"dgx_a100_cluster.yaml", {1024, 128, 3712 + 1024 + 960 + 64}},
    {"dgx_h100.yaml", {8, 1, 29}},
    {"dgx_b200.yaml", {8, 1, 29}},  // the node of superpod_b200_8k.yaml alone
    // One SU: 32 x 29 + 256 NIC links + 8 rail leaves x 32 uplink cables (one to each spine).
    {"dgx_b200_cluster_32.yaml", {256, 32, 928 + 256 + 256}},
    // 2 x 29 + 16 NIC links + 8 rail leaves x 2 spines (2 NICs each = 2 uplink cables).
    {"dgx_h100_cluster_2.yaml", {16, 2, 58 + 16 + 16}},
    // 16 x 29 + 128 NIC links + 8 rail leaves x 16 spines (16 cables each).
    {"dgx_h100_cluster_16.yaml", {128, 16, 464 + 128 + 128}},
    // 128 x 29 + 1024 NIC links + 32 leaves (4 SUs x 8 rails) x 16 spines (32 cables: 2 each).
    {"dgx_h100_cluster_128.yaml", {1024, 128, 3712 + 1024 + 512}},
    {"gcp_a3mega_h100_2node.yaml", {16, 2, 58 + 16 + 16}},
    {"gv100x4_nvlink_bridge.yaml", {4, 1, 2 + 2 + 4}},
    {"h100_pcie_x8.yaml", {8, 1, 21}},
    // As dgx_h100_cluster_2.yaml; the 4-node one: 4 x 29 + 32 NIC links + 8 rail leaves x 4
    // cables.
    {"hgx_h100_ib_2node.yaml", {16, 2, 58 + 16 + 16}},
    {"hgx_h100_ib_4node_vm.yaml", {32, 4, 116 + 32 + 32}},
    {"hgx_h200.yaml", {8, 1, 29}},
    {"oci_bm_gpu4_a100_1node.yaml", {8, 1, 37}},
    // One leaf (single switch): 2 x 37 + 32 NIC links.
    {"oci_bm_gpu4_a100_2node.yaml", {16, 2, 74 + 32}},
    {"oci_bm_gpu_h100_2node.yaml", {16, 2, 74 + 32}},
    // SuperPODs: 29 links per node, one NIC link per GPU, one leaf per SU and rail with 32
    // uplink cables dealt one to each of 32 spines.
    {"superpod_h100_1k.yaml", {1024, 128, 3712 + 1024 + 32 * 32}},
    {"superpod_h100_8k.yaml", {8192, 1024, 29696 + 8192 + 256 * 32}},
    {"superpod_h100_32k.yaml", {32768, 4096, 118784 + 32768 + 1024 * 32}},
    // 390 full SUs and one of 20 nodes, whose 8 leaves have 20 NICs and so 20 uplink cables.
    {"superpod_h100_100k.yaml", {100000, 12500, 362500 + 100000 + 3120 * 32 + 8 * 20}},
    {"superpod_b200_8k.yaml", {8192, 1024, 29696 + 8192 + 256 * 32}},
};

/// Fabrics above 8,192 GPUs (superpod_h100_32k/100k.yaml) take 0.1 - 0.5 s to load in a Release
/// build; unoptimised and sanitizer builds skip them to keep the suite fast.
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
constexpr size_t kMaxGpusLoaded = 1'000'000;
#else
constexpr size_t kMaxGpusLoaded = 8192;
#endif

std::vector<std::filesystem::path> yaml_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ShippedFabrics, EveryFileLoadsWithItsExpectedShape) {
  const auto files = yaml_files(kTopologies);
  ASSERT_FALSE(files.empty());
  std::set<std::string> seen;
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    const std::string file = path.filename().string();
    seen.insert(file);
    const auto expected = kShipped.find(file);
    ASSERT_NE(expected, kShipped.end()) << "add " << file << " to kShipped";
    if (expected->second.gpus > kMaxGpusLoaded) continue;
    const Fabric f = load_file(path);
    EXPECT_FALSE(f.name().empty());
    EXPECT_EQ(f.gpus().size(), expected->second.gpus);
    EXPECT_EQ(f.node_count(), expected->second.nodes);
    EXPECT_EQ(f.links().size(), 2 * expected->second.links);
    // Every GPU can reach every other (spot check: first to last) and its host.
    const DeviceIndex first = f.gpus().front();
    const DeviceIndex last = f.gpus().back();
    EXPECT_FALSE(f.route(first, last).empty());
    EXPECT_EQ(f.device(f.host_of(last)).kind, DeviceKind::kCpu);
  }
  for (const auto& [file, expected] : kShipped)
    EXPECT_TRUE(seen.count(file)) << file << " is expected but missing";
}

TEST(ShippedFabrics, EveryNodeTemplateIsUsed) {
  std::string all;
  for (const auto& path : yaml_files(kTopologies)) {
    std::ifstream in(path);
    all.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const auto& path : yaml_files(kTopologies / "nodes")) {
    EXPECT_TRUE(contains(all, "node: nodes/" + path.filename().string()))
        << path.filename() << " is referenced by no fabric";
  }
}

TEST(ShippedFabrics, Dgx1NvlinkCubeMeshAndPcieFallback) {
  const Fabric f = load_file(kTopologies / "dgx1_v100.yaml");
  // gpu0-gpu1: one NVLink2 link; gpu0-gpu3: two (50 GB/s).
  auto r = f.route(dev(f, "gpu0"), dev(f, "gpu1"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(f.link(r[0]).kind, "nvlink2");
  EXPECT_DOUBLE_EQ(f.link(r[0]).bandwidth.gigabytes_per_second(), 25.0);
  r = f.route(dev(f, "gpu0"), dev(f, "gpu3"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_DOUBLE_EQ(f.link(r[0]).bandwidth.gigabytes_per_second(), 50.0);
  // Every GPU has 6 NVLink2 links of 25 GB/s.
  for (DeviceIndex g : f.gpus()) {
    double nvlink_gbps = 0;
    for (const FabricLink& l : f.links()) {
      if (l.from == g && l.kind == "nvlink2") nvlink_gbps += l.bandwidth.gigabytes_per_second();
    }
    EXPECT_DOUBLE_EQ(nvlink_gbps, 150.0) << f.device(g).id;
  }
  // gpu0-gpu6 have no NVLink: PCIe switch -> CPU -> QPI -> CPU -> PCIe switch, no GPU between.
  EXPECT_EQ(kinds_text(route_kinds(f, "gpu0", "gpu6")),
            "gpu -> pcie_switch -> cpu -> cpu -> pcie_switch -> gpu");
  for (LinkId l : f.route(dev(f, "gpu0"), dev(f, "gpu6")))
    EXPECT_EQ(f.link(l).kind.rfind("nvlink", 0), std::string::npos) << f.link_name(l);
}

TEST(ShippedFabrics, Dgx2EveryGpuPairRoutesOverNvlinkAndTheBisectionIsTheDatasheets) {
  const Fabric f = load_file(kTopologies / "dgx2.yaml");
  ASSERT_EQ(f.gpus().size(), 16u);
  // Every ordered GPU pair: NVLink2 only, through its baseboard's switch (2 hops) or both
  // baseboards' switches (3 hops), never PCIe, never through a third GPU.
  for (size_t i = 0; i < 16; ++i) {
    for (size_t j = 0; j < 16; ++j) {
      if (i == j) continue;
      const std::string from = fmt::format("gpu{}", i);
      const std::string to = fmt::format("gpu{}", j);
      const std::vector<LinkId> r = f.route(dev(f, from), dev(f, to));
      const bool same_board = (i < 8) == (j < 8);
      ASSERT_EQ(r.size(), same_board ? 2u : 3u) << from << " -> " << to;
      for (LinkId l : r)
        EXPECT_EQ(f.link(l).kind, "nvlink2") << f.link_name(l);
      EXPECT_EQ(kinds_text(route_kinds(f, from, to)),
                same_board ? "gpu -> nvswitch -> gpu" : "gpu -> nvswitch -> nvswitch -> gpu");
    }
  }
  // [WP] 6 NVLink2 links of 25 GB/s per GPU per direction.
  for (DeviceIndex g : f.gpus()) {
    double nvlink_gbps = 0;
    for (const FabricLink& l : f.links()) {
      if (l.from == g && l.kind == "nvlink2") nvlink_gbps += l.bandwidth.gigabytes_per_second();
    }
    EXPECT_DOUBLE_EQ(nvlink_gbps, 150.0) << f.device(g).id;
  }
  // [DS] 2.4 TB/s bisection bandwidth: the directed links crossing from baseboard 0 (GPUs 0-7,
  // nvswitch0) to baseboard 1 and back, summed.
  std::set<DeviceIndex> board0{dev(f, "nvswitch0")};
  for (int g = 0; g < 8; ++g)
    board0.insert(dev(f, fmt::format("gpu{}", g)));
  const DeviceIndex switch1 = dev(f, "nvswitch1");
  double cut_gbps = 0;
  for (const FabricLink& l : f.links()) {
    if (l.kind != "nvlink2") continue;
    const bool from0 = board0.count(l.from) > 0;
    const bool to0 = board0.count(l.to) > 0;
    if (from0 != to0) cut_gbps += l.bandwidth.gigabytes_per_second();
  }
  EXPECT_DOUBLE_EQ(cut_gbps, 2400.0);
  // Cross-baseboard GPU pairs share the 48 aggregated links (1200 GB/s per direction).
  const std::vector<LinkId> cross = f.route(dev(f, "gpu0"), dev(f, "gpu8"));
  ASSERT_EQ(cross.size(), 3u);
  EXPECT_EQ(f.link(cross[1]).to, switch1);
  EXPECT_DOUBLE_EQ(f.link(cross[1]).bandwidth.gigabytes_per_second(), 1200.0);
  // Host of gpu9 is the socket of its PCIe switch.
  EXPECT_EQ(f.device(f.host_of(dev(f, "gpu9"))).id, "cpu1");
}

TEST(ShippedFabrics, DgxH100GpusMeetAtTheNvswitchAt450GBps) {
  const Fabric f = load_file(kTopologies / "dgx_h100.yaml");
  const auto r = f.route(dev(f, "gpu0"), dev(f, "gpu5"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(f.device(f.link(r[0]).to).kind, DeviceKind::kNvSwitch);
  for (LinkId l : r) {
    EXPECT_EQ(f.link(l).kind, "nvlink4");
    EXPECT_DOUBLE_EQ(f.link(l).bandwidth.gigabytes_per_second(), 450.0);
  }
  EXPECT_EQ(f.route_latency(dev(f, "gpu0"), dev(f, "gpu5")), Duration::from_ns(700));
  // Host of gpu5 is the socket of its PCIe switch.
  EXPECT_EQ(f.device(f.host_of(dev(f, "gpu5"))).id, "cpu1");
}

TEST(ShippedFabrics, TwoNodeClusterCrossesNodesThroughNicsAndSwitches) {
  const Fabric f = load_file(kTopologies / "dgx_h100_cluster_2.yaml");
  EXPECT_EQ(f.device(f.gpus()[8]).id, "node1/gpu0");  // rank 8 = first GPU of node 1
  const auto kinds = route_kinds(f, "node0/gpu0", "node1/gpu0");
  EXPECT_EQ(kinds_text(kinds),
            "gpu -> pcie_switch -> nic -> network_switch -> nic -> pcie_switch -> gpu");
  for (LinkId l : f.route(dev(f, "node0/gpu0"), dev(f, "node1/gpu0"))) {
    const FabricLink& link = f.link(l);
    if (link.kind == "ib_ndr") {
      EXPECT_DOUBLE_EQ(link.bandwidth.gigabytes_per_second(), 50.0);
    }
  }
  // Cross-rail: gpu0's NIC is on rail 0, node 1's gpu3 behind rail 3's NIC. The route climbs
  // to a spine between the rails instead of crossing node 1's CPUs.
  EXPECT_EQ(kinds_text(route_kinds(f, "node0/gpu0", "node1/gpu3")),
            "gpu -> pcie_switch -> nic -> network_switch -> network_switch -> network_switch -> "
            "nic -> pcie_switch -> gpu");
  // Network switches belong to no node; node devices to theirs.
  EXPECT_EQ(f.device(dev(f, "leaf0")).node, kNoNode);
  EXPECT_EQ(f.device(dev(f, "spine1")).node, kNoNode);
  EXPECT_FALSE(f.find("spine2").has_value());  // 2 uplink cables per leaf: 2 spines
  EXPECT_EQ(f.device(dev(f, "node1/nic7")).node, 1);
}

TEST(ShippedFabrics, Cluster128LoadsAndSealsQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const Fabric f = load_file(kTopologies / "dgx_h100_cluster_128.yaml");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("dgx_h100_cluster_128.yaml: %zu devices, %zu links, loaded and sealed in %.3f s\n",
              f.devices().size(), f.links().size() / 2, seconds);
  EXPECT_EQ(f.gpus().size(), 1024u);
  EXPECT_EQ(f.node_count(), 128u);
  // Nodes 0 and 127 sit in different scalable units: the route climbs to a spine.
  const auto kinds = route_kinds(f, "node0/gpu0", "node127/gpu0");
  EXPECT_EQ(kinds_text(kinds),
            "gpu -> pcie_switch -> nic -> network_switch -> network_switch -> network_switch -> "
            "nic -> pcie_switch -> gpu");
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(seconds, 2.0);
#endif
}

/// Loads a fabric file with `--set`-style overrides (as `--set platform.topology.KEY=VALUE`
/// reaches a scenario's referenced fabric), and times it.
Fabric load_file_with(const std::filesystem::path& path,
                      std::initializer_list<std::string_view> sets, double& seconds) {
  const auto start = std::chrono::steady_clock::now();
  ConfigDocument doc = ConfigDocument::load_file(path);
  for (std::string_view s : sets)
    doc.apply_override(s);
  Fabric fabric = load_fabric(doc.root());
  doc.check_all_keys_used();
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return fabric;
}

TEST(ShippedFabrics, DgxA100ClusterNodeCountIsOverridable) {
  double seconds = 0;
  const Fabric f = load_file_with(kTopologies / "dgx_a100_cluster.yaml", {"nodes=4"}, seconds);
  EXPECT_EQ(f.gpus().size(), 32u);
  EXPECT_EQ(f.node_count(), 4u);
  EXPECT_EQ(f.device(f.gpus()[31]).id, "node3/gpu7");
  // The GPUs' nodes, numbered in order; the first 12 GPUs fill one node and half of another.
  const std::vector<uint32_t> nodes = f.gpu_nodes(12);
  EXPECT_EQ(nodes, (std::vector<uint32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(f.gpu_nodes(100).size(), 32u);
  // One SU: one leaf per rail, joined by spines; GPU i of every node on rail i.
  EXPECT_TRUE(f.find("leaf7").has_value());
  EXPECT_FALSE(f.find("leaf8").has_value());
}

// A Megatron-LM SC21 size (3072 GPUs) and a larger one load, seal and route quickly: seal
// finds every GPU's host in one search, routes are computed per destination on first use.
TEST(ShippedFabrics, DgxA100ClusterAtSeleneScaleLoadsAndRoutesQuickly) {
  for (const int64_t nodes : {384, 1024}) {
    double seconds = 0;
    const Fabric f = load_file_with(kTopologies / "dgx_a100_cluster.yaml",
                                    {fmt::format("nodes={}", nodes)}, seconds);
    ASSERT_EQ(f.gpus().size(), static_cast<size_t>(nodes * 8));
    EXPECT_EQ(f.node_count(), static_cast<uint32_t>(nodes));
    // Cross-node: GPU -> its PCIe switch -> a NIC -> that rail's leaves (and a spine between
    // scalable units) -> the same rail's NIC -> GPU, over 200 Gb/s HDR links.
    const std::string last = fmt::format("node{}/gpu3", nodes - 1);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<LinkId> r = f.route(dev(f, "node0/gpu3"), dev(f, last));
    const double route_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(kinds_text(route_kinds(f, "node0/gpu3", last)),
              "gpu -> pcie_switch -> nic -> network_switch -> network_switch -> network_switch -> "
              "nic -> pcie_switch -> gpu");
    int hdr = 0;
    for (LinkId l : r) {
      const FabricLink& link = f.link(l);
      if (link.kind != "ib_hdr") continue;
      ++hdr;
      EXPECT_DOUBLE_EQ(link.bandwidth.gigabytes_per_second(), 25.0) << f.link_name(l);
    }
    EXPECT_EQ(hdr, 4);
    // gpu3 shares its PCIe switch with nic2 and nic3 (equal cost, ECMP picks one): the route
    // leaves on that NIC's rail and arrives on the same rail's NIC of the last node.
    const std::string& nic_out = f.device(f.link(r[2]).from).id;
    EXPECT_TRUE(nic_out == "node0/nic2" || nic_out == "node0/nic3") << nic_out;
    const std::string rail = nic_out.substr(nic_out.size() - 1);
    EXPECT_EQ(f.device(f.link(r[2]).to).id, "leaf" + rail);  // rail `rail` of SU 0
    EXPECT_EQ(f.device(f.link(r[5]).to).id, fmt::format("node{}/nic{}", nodes - 1, rail));
    EXPECT_EQ(f.device(f.host_of(dev(f, last))).id, fmt::format("node{}/cpu0", nodes - 1));
    std::printf(
        "dgx_a100_cluster.yaml nodes=%lld: %zu GPUs, %zu devices, %zu links, loaded and sealed "
        "in %.3f s, first cross-node route in %.4f s\n",
        static_cast<long long>(nodes), f.gpus().size(), f.devices().size(), f.links().size() / 2,
        seconds, route_seconds);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
    EXPECT_LT(seconds, 5.0);
    EXPECT_LT(route_seconds, 0.5);
#endif
  }
}

TEST(ShippedFabrics, A100RoceClusterRunsRailsOf200GbEthernet) {
  double seconds = 0;
  const Fabric f = load_file_with(kTopologies / "a100_roce_cluster.yaml", {"nodes=16"}, seconds);
  EXPECT_EQ(f.gpus().size(), 128u);  // llm-foundry's largest A100 40GB runs
  const auto r = f.route(dev(f, "node0/gpu5"), dev(f, "node15/gpu5"));
  double network_gbps = 0;
  for (LinkId l : r) {
    if (f.link(l).kind == "roce_200g") network_gbps = f.link(l).bandwidth.gigabytes_per_second();
  }
  EXPECT_DOUBLE_EQ(network_gbps, 25.0);
  EXPECT_EQ(kinds_text(route_kinds(f, "node0/gpu5", "node15/gpu5")),
            "gpu -> pcie_switch -> nic -> network_switch -> nic -> pcie_switch -> gpu");
}

TEST(ShippedFabrics, ClusterFilesDifferOnlyInNodeCount) {
  const auto read = [](const std::string& file) {
    std::ifstream in(kTopologies / file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("nodes:", 0) != 0) lines.push_back(line);
    }
    return lines;
  };
  EXPECT_EQ(read("dgx_h100_cluster_16.yaml"), read("dgx_h100_cluster_128.yaml"));
  EXPECT_EQ(read("dgx_h100_cluster_2.yaml"), read("dgx_h100_cluster_16.yaml"));
  for (const char* file :
       {"superpod_h100_8k.yaml", "superpod_h100_32k.yaml", "superpod_h100_100k.yaml"})
    EXPECT_EQ(read("superpod_h100_1k.yaml"), read(file)) << file;
}

// 32 SUs of DGX H100 / B200: ranks go node by node, GPUs of different SUs meet at a spine,
// GPUs of one SU and rail at their leaf, and the B200 node's NVLink 5 gives 900 GB/s per
// direction.
TEST(ShippedFabrics, SuperPodsCrossScalableUnitsThroughASpine) {
  for (const char* file : {"superpod_h100_8k.yaml", "superpod_b200_8k.yaml"}) {
    SCOPED_TRACE(file);
    double seconds = 0;
    const Fabric f = load_file_with(kTopologies / file, {}, seconds);
    ASSERT_EQ(f.gpus().size(), 8192u);
    EXPECT_EQ(f.device(f.gpus()[8191]).id, "node1023/gpu7");
    EXPECT_TRUE(f.find("leaf255").has_value());  // 32 SUs x 8 rails
    EXPECT_FALSE(f.find("leaf256").has_value());
    EXPECT_TRUE(f.find("spine31").has_value());
    EXPECT_FALSE(f.find("spine32").has_value());
    // node0 (SU 0) and node1023 (SU 31): gpu5 shares its PCIe switch with nic4 and nic5 (equal
    // cost, ECMP picks one) at both ends. The route leaves on rail a's leaf, crosses a spine
    // (every leaf reaches every spine, so the spine may also switch rails) and arrives through
    // rail b's leaf of SU 31 and rail b's NIC, with a and b in {4, 5}.
    const std::vector<LinkId> r = f.route(dev(f, "node0/gpu5"), dev(f, "node1023/gpu5"));
    EXPECT_EQ(kinds_text(route_kinds(f, "node0/gpu5", "node1023/gpu5")),
              "gpu -> pcie_switch -> nic -> network_switch -> network_switch -> network_switch -> "
              "nic -> pcie_switch -> gpu");
    ASSERT_EQ(r.size(), 8u);
    const std::string& nic_out = f.device(f.link(r[2]).from).id;
    ASSERT_TRUE(nic_out == "node0/nic4" || nic_out == "node0/nic5") << nic_out;
    EXPECT_EQ(f.device(f.link(r[2]).to).id, fmt::format("leaf{}", nic_out.back()));
    EXPECT_EQ(f.device(f.link(r[3]).to).id.rfind("spine", 0), 0u) << f.link_name(r[3]);
    const std::string& leaf_in = f.device(f.link(r[4]).to).id;
    ASSERT_TRUE(leaf_in == "leaf252" || leaf_in == "leaf253") << leaf_in;  // 31 * 8 + 4, + 5
    EXPECT_EQ(f.device(f.link(r[5]).to).id,
              fmt::format("node1023/nic{}", leaf_in == "leaf252" ? 4 : 5));
    for (LinkId l : r) {
      if (f.link(l).kind == "ib_ndr") {
        EXPECT_DOUBLE_EQ(f.link(l).bandwidth.gigabytes_per_second(), 50.0) << f.link_name(l);
      }
    }
    // Within an SU, the same rail meets at its leaf without a spine.
    EXPECT_EQ(kinds_text(route_kinds(f, "node0/gpu5", "node31/gpu5")),
              "gpu -> pcie_switch -> nic -> network_switch -> nic -> pcie_switch -> gpu");
    const auto nvlink = f.route(dev(f, "node7/gpu0"), dev(f, "node7/gpu6"));
    ASSERT_EQ(nvlink.size(), 2u);
    EXPECT_DOUBLE_EQ(f.link(nvlink[0]).bandwidth.gigabytes_per_second(),
                     std::string_view(file) == "superpod_b200_8k.yaml" ? 900.0 : 450.0);
  }
}

// The benchmark's 100,000-GPU fabric loads, seals and routes across scalable units (Release
// builds without sanitizers only; see kMaxGpusLoaded). The times are printed, not asserted: a
// shared CI machine makes wall-clock bounds flaky; bench/network_bench measures them.
TEST(ShippedFabrics, SuperPod100kLoadsSealsAndRoutes) {
  if (kMaxGpusLoaded < 100000) GTEST_SKIP() << "100,000-GPU fabric: Release builds only";
  double seconds = 0;
  const Fabric f = load_file_with(kTopologies / "superpod_h100_100k.yaml", {}, seconds);
  const auto start = std::chrono::steady_clock::now();
  const auto kinds = route_kinds(f, "node0/gpu0", "node12499/gpu0");
  const double route_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "superpod_h100_100k.yaml: %zu GPUs, %zu devices, %zu links, loaded and sealed in %.3f s, "
      "first cross-SU route in %.4f s\n",
      f.gpus().size(), f.devices().size(), f.links().size() / 2, seconds, route_seconds);
  EXPECT_EQ(f.gpus().size(), 100000u);
  EXPECT_EQ(kinds_text(kinds),
            "gpu -> pcie_switch -> nic -> network_switch -> network_switch -> network_switch -> "
            "nic -> pcie_switch -> gpu");
}

// ---- Schema and generator details -------------------------------------------------------

constexpr std::string_view kTwoGpuNode = R"(
node:
  link_kinds:
    pcie5: {bandwidth: 64GB/s, latency: 500ns}
  devices:
    - {id: cpu, kind: cpu}
    - {id: sw, kind: pcie_switch}
    - {id: gpu, kind: gpu, count: 2}
    - {id: nic, kind: nic}
  links:
    - {from: [cpu, gpu*, nic], to: sw, kind: pcie5}
)";

TEST(FabricLoader, TheHeaderExampleLoads) {
  // The single-node example at the top of fabric_loader.h, verbatim.
  const Fabric f = load_text(R"(
name: 4x A100 NVLink3
nodes: 1
node:
  link_kinds:
    nvlink3: {bandwidth: 25GB/s, latency: 700ns}
    pcie4: {bandwidth: 31.5GB/s, latency: 500ns}
  devices:
    - {id: cpu, kind: cpu}
    - {id: pcie, kind: pcie_switch, count: 2}
    - {id: gpu, kind: gpu, count: 4}
  links:
    - {mesh: gpu*, kind: nvlink3, count: 4}
    - {from: [pcie0, pcie1], to: cpu, kind: pcie4, latency: 300ns}
    - {pairs: [[gpu0, pcie0], [gpu1, pcie0], [gpu2, pcie1], [gpu3, pcie1]], kind: pcie4}
)");
  EXPECT_EQ(f.links().size(), 2u * (6 + 2 + 4));
  EXPECT_EQ(f.link(f.route(dev(f, "pcie0"), dev(f, "cpu"))[0]).latency, Duration::from_ns(300));
  EXPECT_DOUBLE_EQ(
      f.link(f.route(dev(f, "gpu1"), dev(f, "gpu2"))[0]).bandwidth.gigabytes_per_second(), 100.0);
}

TEST(FabricLoader, ReplicatedNodesArePrefixedAndRanksGoNodeByNode) {
  const Fabric f = load_text(std::string("name: t\nnodes: 3\n") + std::string(kTwoGpuNode) + R"(
network:
  topology: fat_tree
  nic_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 500ns}
)");
  ASSERT_EQ(f.gpus().size(), 6u);
  const std::vector<std::string> want = {"node0/gpu0", "node0/gpu1", "node1/gpu0",
                                         "node1/gpu1", "node2/gpu0", "node2/gpu1"};
  for (size_t r = 0; r < want.size(); ++r)
    EXPECT_EQ(f.device(f.gpus()[r]).id, want[r]);
  EXPECT_EQ(f.device(dev(f, "node2/gpu1")).node, 2);
  EXPECT_EQ(f.node_count(), 3u);
  // nodes_per_leaf defaults to all nodes: one leaf, no spine.
  EXPECT_TRUE(f.find("leaf0").has_value());
  EXPECT_FALSE(f.find("leaf1").has_value());
  EXPECT_FALSE(f.find("spine0").has_value());
}

TEST(FabricLoader, SingleNodeIdsAreUsedAsWritten) {
  const Fabric f = load_text(std::string("name: t\n") + std::string(kTwoGpuNode));
  EXPECT_TRUE(f.find("gpu1").has_value());
  EXPECT_EQ(f.node_count(), 1u);
  EXPECT_EQ(f.links().size(), 2u * 4u);
}

TEST(FabricLoader, CountAggregatesParallelLinksAndOverridesTableValues) {
  const Fabric f = load_text(R"(
name: t
node:
  link_kinds:
    nvlink3: {bandwidth: 25GB/s, latency: 700ns}
  devices:
    - {id: gpu, kind: gpu, count: 4}
  links:
    - {mesh: [gpu0, gpu1, gpu2], kind: nvlink3, count: 4}
    - {from: gpu3, to: [gpu0, gpu1, gpu2], kind: nvlink3, bandwidth: 10GB/s, latency: 1us}
)");
  auto r = f.route(dev(f, "gpu0"), dev(f, "gpu2"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_DOUBLE_EQ(f.link(r[0]).bandwidth.gigabytes_per_second(), 100.0);
  EXPECT_EQ(f.link(r[0]).latency, Duration::from_ns(700));
  r = f.route(dev(f, "gpu3"), dev(f, "gpu1"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_DOUBLE_EQ(f.link(r[0]).bandwidth.gigabytes_per_second(), 10.0);
  EXPECT_EQ(f.link(r[0]).latency, Duration::from_us(1));
}

// The GPU's own PCIe interface (its profile's pcie_generation) caps the PCIe links at it, as a
// link trains at the lower generation of its ends; links further up and NVLink keep theirs.
constexpr std::string_view kPcieTree = R"(name: t
node:
  link_kinds:
    pcie4: {bandwidth: 31.5GB/s, latency: 500ns}
    nvlink3: {bandwidth: 25GB/s, latency: 700ns}
  devices:
    - {id: cpu, kind: cpu}
    - {id: sw, kind: pcie_switch}
    - {id: gpu, kind: gpu, count: 2}
  links:
    - {between: [gpu0, gpu1], kind: nvlink3}
    - {from: gpu*, to: sw, kind: pcie4}
    - {between: [sw, cpu], kind: pcie4, bandwidth: 63GB/s}
)";

TEST(FabricLoader, TheGpusPcieRateCapsThePcieLinksAtTheGpusOnly) {
  const auto bandwidth = [](const Fabric& f, std::string_view a, std::string_view b) {
    for (const FabricLink& l : f.links()) {
      if (l.from == dev(f, a) && l.to == dev(f, b)) return l.bandwidth.gigabytes_per_second();
    }
    ADD_FAILURE() << "no link " << a << " -> " << b;
    return 0.0;
  };
  ConfigDocument doc = ConfigDocument::parse_string(kPcieTree, "tree.yaml");
  FabricOptions gen3;
  gen3.gpu_pcie_rate = Bandwidth::gigabytes_per_second(15.754);
  std::vector<GpuPcieLink> stated;
  const Fabric f = load_fabric(doc.root(), gen3, &stated);
  EXPECT_DOUBLE_EQ(bandwidth(f, "gpu0", "sw"), 15.754);
  EXPECT_DOUBLE_EQ(bandwidth(f, "sw", "gpu1"), 15.754);
  EXPECT_DOUBLE_EQ(bandwidth(f, "sw", "cpu"), 63.0);     // the switch's uplink
  EXPECT_DOUBLE_EQ(bandwidth(f, "gpu0", "gpu1"), 25.0);  // NVLink
  ASSERT_EQ(stated.size(), 2u);
  EXPECT_EQ(stated[0].name, "gpu0 -- sw (pcie4)");
  EXPECT_DOUBLE_EQ(stated[0].stated.gigabytes_per_second(), 31.5);
  EXPECT_EQ(stated[0].stated_at, "`node.link_kinds.pcie4.bandwidth` (tree.yaml:4)");
  // A faster GPU than its links (Gen5 in a Gen4 slot) runs at the links' rate.
  ConfigDocument again = ConfigDocument::parse_string(kPcieTree, "tree.yaml");
  FabricOptions gen5;
  gen5.gpu_pcie_rate = Bandwidth::gigabytes_per_second(63.015);
  EXPECT_DOUBLE_EQ(bandwidth(load_fabric(again.root(), gen5), "gpu0", "sw"), 31.5);
}

TEST(FabricLoader, LinkCapacitiesAreReadForTheFlowNetworkOnly) {
  ConfigDocument doc = ConfigDocument::parse_string(kPcieTree, "tree.yaml");
  load_fabric(doc.root());
  doc.check_all_keys_used();
  const std::array<InactiveUse, 1> no_flow{
      InactiveUse{std::string(kFabricLinkCapacityUse), "no model moves bytes over the links"}};
  const std::vector<std::string> warnings = doc.unused_key_warnings(no_flow);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "no model moves bytes over the links, so these keys change nothing: "
            "`node.link_kinds.pcie4.bandwidth` (tree.yaml:4), `node.link_kinds.pcie4.latency` "
            "(tree.yaml:4), `node.link_kinds.nvlink3.bandwidth` (tree.yaml:5), "
            "`node.link_kinds.nvlink3.latency` (tree.yaml:5), `node.links[2].bandwidth` "
            "(tree.yaml:13)");
}

TEST(FabricLoader, FatTreeUplinksFollowTheOversubscription) {
  // 4 nodes, 2 per leaf, one 50 GB/s NIC each: leaves see 100 GB/s down; 2:1 leaves 50 GB/s up
  // = 2 cables of 25 GB/s, one to each of 2 spines.
  const Fabric f = load_text(std::string("name: t\nnodes: 4\n") + std::string(kTwoGpuNode) + R"(
network:
  topology: leaf_spine
  nic_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 500ns}
  switch_link: {kind: ib_hdr, bandwidth: 200Gbit/s, latency: 300ns}
  nodes_per_leaf: 2
  oversubscription: 2.0
)");
  EXPECT_FALSE(f.find("leaf2").has_value());
  EXPECT_FALSE(f.find("spine2").has_value());
  for (std::string_view leaf : {"leaf0", "leaf1"}) {
    double up = 0;
    int cables = 0;
    for (const FabricLink& l : f.links()) {
      if (l.from == dev(f, leaf) && f.device(l.to).id.rfind("spine", 0) == 0) {
        up += l.bandwidth.gigabytes_per_second();
        ++cables;
      }
    }
    EXPECT_DOUBLE_EQ(up, 50.0) << leaf;
    EXPECT_EQ(cables, 2) << leaf;
  }
  const auto kinds = route_kinds(f, "node0/gpu0", "node3/gpu1");
  EXPECT_EQ(kinds_text(kinds),
            "gpu -> pcie_switch -> nic -> network_switch -> network_switch -> network_switch -> "
            "nic -> pcie_switch -> gpu");
}

TEST(FabricLoader, RailOptimizedPutsNicROnRailR) {
  const Fabric f = load_text(R"(
name: t
nodes: 2
node:
  devices:
    - {id: gpu, kind: gpu, count: 2}
    - {id: nic, kind: nic, count: 2}
  links:
    - {pairs: [[gpu0, nic0], [gpu1, nic1]], kind: pcie5, bandwidth: 64GB/s, latency: 500ns}
    - {between: [gpu0, gpu1], kind: nvlink4, bandwidth: 450GB/s, latency: 700ns}
network:
  topology: rail_optimized
  nic_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 500ns}
  switch_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 300ns}
  spines: 8
)");
  // Rails: leaf0 holds nic0 of both nodes, leaf1 nic1. Two cables per leaf: 2 of the 8 spines.
  for (const FabricLink& l : f.links()) {
    if (f.device(l.to).id == "leaf0") {
      EXPECT_TRUE(f.device(l.from).id.ends_with("nic0") ||
                  f.device(l.from).id.starts_with("spine"));
    }
  }
  EXPECT_TRUE(f.find("spine1").has_value());
  EXPECT_FALSE(f.find("spine2").has_value());
  EXPECT_EQ(kinds_text(route_kinds(f, "node0/gpu1", "node1/gpu1")),
            "gpu -> nic -> network_switch -> nic -> gpu");
}

TEST(FabricLoader, NodeTemplateMayLiveInAnotherFile) {
  const Fabric f = load_file(kTopologies / "oci_bm_gpu4_a100_2node.yaml");
  EXPECT_EQ(f.device(dev(f, "node1/nic15")).kind, DeviceKind::kNic);
}

// ---- Errors -------------------------------------------------------------------------------

struct BadFabric {
  const char* file;     ///< under data/
  const char* in_file;  ///< the file the error names (differs for referenced templates)
  int line;
  const char* key_path;
  const char* message;  ///< a fragment of the message
};

const BadFabric kBadFabrics[] = {
    {"dangling_link.yaml", "dangling_link.yaml", 9, "node.links[1].between[1]",
     "unknown device `gpu9`; did you mean `gpu0`?"},
    {"duplicate_id.yaml", "duplicate_id.yaml", 6, "node.devices[1].id",
     "duplicate device id `gpu1`: already declared by node.devices[0] (line 5)"},
    {"unknown_device_kind.yaml", "unknown_device_kind.yaml", 6, "node.devices[1].kind",
     "unknown kind `tpu`"},
    {"unknown_link_kind.yaml", "unknown_link_kind.yaml", 10, "node.links[0].kind",
     "did you mean `nvlink4`?"},
    {"unitless_bandwidth.yaml", "unitless_bandwidth.yaml", 9, "node.links[0].bandwidth", "300"},
    {"zero_bandwidth.yaml", "zero_bandwidth.yaml", 5, "node.link_kinds.pcie4.bandwidth",
     "bandwidth must be positive"},
    {"bad_latency.yaml", "bad_latency.yaml", 7, "node.links[0].latency", "fast"},
    {"unreachable_gpu.yaml", "unreachable_gpu.yaml", 6, "node.devices[1]",
     "`gpu2` cannot reach `gpu0`"},
    {"gpu_transit_only.yaml", "gpu_transit_only.yaml", 7, "node.devices[2]",
     "`gpu2` cannot reach `gpu0`"},
    {"no_cpu_path.yaml", "no_cpu_path.yaml", 7, "node.devices[2]", "`gpu1` cannot reach any CPU"},
    {"malformed_node_count.yaml", "malformed_node_count.yaml", 3, "nodes", "two"},
    {"zero_nodes.yaml", "zero_nodes.yaml", 3, "nodes", "must be a positive integer"},
    {"too_many_nodes.yaml", "too_many_nodes.yaml", 3, "nodes", "at most 16384 nodes"},
    {"no_network.yaml", "no_network.yaml", 3, "nodes", "2 nodes need a `network` section"},
    {"network_without_nic.yaml", "network_without_nic.yaml", 8, "network", "declares no NIC"},
    {"nic_not_linked.yaml", "nic_not_linked.yaml", 9, "network",
     "`node1/gpu` cannot reach `node0/gpu`"},
    {"missing_switch_link.yaml", "missing_switch_link.yaml", 11, "network",
     "`switch_link` is required"},
    {"unknown_topology.yaml", "unknown_topology.yaml", 11, "network.topology",
     "unknown topology `torus`"},
    {"duplicate_link.yaml", "duplicate_link.yaml", 10, "node.links[1].between",
     "`gpu1` and `gpu0` are already linked by node.links[0] (line 9)"},
    {"self_link.yaml", "self_link.yaml", 7, "node.links[0].pairs[1]",
     "a link from `gpu1` to itself"},
    {"pattern_matches_nothing.yaml", "pattern_matches_nothing.yaml", 8, "node.links[0].to",
     "pattern `nvswitch*` matches no device"},
    {"two_link_forms.yaml", "two_link_forms.yaml", 7, "node.links[0]", "exactly one of"},
    {"misspelled_key.yaml", "misspelled_key.yaml", 9, "node.links[0].bandwdith",
     "did you mean `bandwidth`?"},
    {"bad_node_reference.yaml", "bad_kind.yaml", 3, "node.devices[0].kind",
     "unknown kind `gpuu`; did you mean `gpu`?"},
    {"missing_node_file.yaml", "missing_node_file.yaml", 3, "node", "cannot load referenced file"},
};

TEST(FabricLoaderErrors, EachBadFabricNamesFileLineAndKey) {
  for (const BadFabric& bad : kBadFabrics) {
    SCOPED_TRACE(bad.file);
    const ConfigError e = config_error([&] { load_file(kData / bad.file); });
    const std::string what = e.what();
    EXPECT_EQ(std::filesystem::path(e.file()).filename(), bad.in_file) << what;
    EXPECT_EQ(e.line(), bad.line) << what;
    EXPECT_EQ(e.key_path(), bad.key_path) << what;
    EXPECT_TRUE(contains(what, bad.in_file)) << what;
    EXPECT_TRUE(contains(what, fmt::format(":{}:", bad.line))) << what;
    EXPECT_TRUE(contains(what, bad.key_path)) << what;
    EXPECT_TRUE(contains(what, bad.message)) << what;
  }
}

TEST(FabricLoaderErrors, EveryFixtureIsCovered) {
  std::set<std::string> covered;
  for (const BadFabric& bad : kBadFabrics)
    covered.insert(bad.file);
  for (const auto& path : yaml_files(kData))
    EXPECT_TRUE(covered.count(path.filename().string())) << path.filename();
}

TEST(FabricLoaderErrors, MalformedInputGivesConfigErrorsNeverCrashes) {
  const std::string node = "node:\n  devices:\n    - {id: gpu, kind: gpu, count: 2}\n";
  const std::vector<std::string> inputs = {
      "",
      "name: x",
      "name: x\nnode: 3",
      "name: x\nnode: [1, 2]",
      "name: x\nnode: {}",
      "name: x\nnode:\n  devices: gpu",
      "name: x\nnode:\n  devices: [gpu]",
      "name: x\nnode:\n  devices: []",
      "name: ''\n" + node,
      "name: x\nnodes: -1\n" + node,
      "name: x\nnodes: 1.5\n" + node,
      "name: x\nnode:\n  devices:\n    - {id: gpu, kind: gpu, count: 99999999999999999999}",
      "name: x\nnode:\n  devices:\n    - {id: gpu, kind: gpu, count: 5000}",
      "name: x\nnode:\n  devices:\n    - {id: g/pu, kind: gpu}",
      "name: x\nnode:\n  devices:\n    - {id: 'gpu*', kind: gpu}",
      "name: x\nnode:\n  devices:\n    - {id: gpu, kind: [gpu]}",
      "name: x\nnodes: 20000\n" + node,
      "name: x\nnodes: 2000\n" + node + "network:\n  topology: fat_tree\n",
      "name: x\n" + node + "  links: {a: b}",
      "name: x\n" + node + "  links:\n    - {}",
      "name: x\n" + node +
          "  links:\n    - {between: gpu0, kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node +
          "  links:\n    - {between: [gpu0], kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node +
          "  links:\n    - {between: [gpu*, gpu1], kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {from: gpu*, kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {mesh: gpu0, kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {mesh: [], kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {mesh: '*', kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {mesh: 'g*u', kind: k, bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node +
          "  links:\n    - {mesh: gpu*, kind: 'n v', bandwidth: 1GB/s, latency: 1ns}",
      "name: x\n" + node +
          "  links:\n    - {mesh: gpu*, kind: k, bandwidth: 1e400GB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {mesh: gpu*, kind: k, bandwidth: 1kB/s, latency: 1ns}",
      "name: x\n" + node + "  links:\n    - {mesh: gpu*, kind: k, bandwidth: 1GB/s, latency: 2s}",
      "name: x\n" + node + "  links:\n    - {mesh: gpu*, kind: k, bandwidth: 1GB/s, latency: -1ns}",
      "name: x\n" + node +
          "  links:\n    - {mesh: gpu*, kind: k, bandwidth: 1GB/s, latency: 1ns, count: 0}",
      "name: x\n" + node +
          "  links:\n    - {mesh: gpu*, kind: k, bandwidth: 1GB/s, latency: 1ns, count: 100000}",
      "name: x\n" + node + "  link_kinds: [a]\n",
      "name: x\n" + node + "  link_kinds: {'a b': {bandwidth: 1GB/s, latency: 1ns}}\n",
      "name: x\nnodes: 2\n" + node + "network: fat_tree\n",
      "name: x\nnodes: 2\n" + node + "network:\n  topology: fat_tree\n  nic_link: 1GB/s\n",
  };
  for (const std::string& yaml : inputs) {
    SCOPED_TRACE(yaml);
    config_error([&] { load_text(yaml); });
  }
}

TEST(FabricLoaderErrors, NetworkSizeLimitsAreConfigErrors) {
  const std::string base = R"(
name: x
nodes: 4
node:
  devices:
    - {id: gpu, kind: gpu}
    - {id: nic, kind: nic}
  links:
    - {between: [gpu, nic], kind: pcie5, bandwidth: 64GB/s, latency: 500ns}
network:
  topology: fat_tree
  nodes_per_leaf: 1
  nic_link: {kind: ib_ndr, bandwidth: 400Gbit/s, latency: 500ns}
)";
  // One 1 MB/s cable per 50 GB/s: 50000 cables per leaf, fine as bundles; 5000 spines is not.
  config_error([&] {
    load_text(base + "  switch_link: {kind: x, bandwidth: 1MB/s, latency: 1ns}\n  spines: 5000\n");
  });
  // 800 Gbit/s NICs with uplinks 64 times their bandwidth in 1 MB/s cables: 6.4 M cables.
  std::string fast_nics = base;
  fast_nics.replace(fast_nics.find("400Gbit/s"), 9, "800Gbit/s");
  const ConfigError e = config_error([&] {
    load_text(fast_nics +
              "  switch_link: {kind: x, bandwidth: 1MB/s, latency: 1ns}\n"
              "  oversubscription: 0.015625\n");
  });
  EXPECT_TRUE(contains(e.what(), "uplink cables")) << e.what();
  // Outside the documented range (a 1e23 taper would leave the uplinks at 0 bytes per second).
  for (const char* value : {"0", "1e-9", "1e23", "-2", ".nan"}) {
    const ConfigError range = config_error([&] {
      load_text(base + "  switch_link: {kind: x, bandwidth: 1GB/s, latency: 1ns}\n" +
                "  oversubscription: " + value + "\n");
    });
    EXPECT_TRUE(
        contains(range.what(), "network.oversubscription: must be between 0.015625 and 1024, got"))
        << range.what();
  }
  // Link bandwidths stop at 1 PB/s.
  EXPECT_TRUE(contains(config_error([&] {
                         load_text(base +
                                   "  switch_link: {kind: x, bandwidth: 1e23GB/s, "
                                   "latency: 1ns}\n");
                       }).what(),
                       "bandwidth must be at most 1 PB/s"));
}

}  // namespace
}  // namespace upsim

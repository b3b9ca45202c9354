// FlowNetwork: max-min fair sharing, full duplex, completion times to the picosecond, observer
// reports, batching of simultaneous starts, transfers and their errors.
#include "topology/flow_network.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "topology/fabric.h"

namespace upsim {
namespace {

Bandwidth gbps(double v) {
  return Bandwidth::gigabytes_per_second(v);
}
Duration ns(int64_t v) {
  return Duration::from_ns(v);
}
Time at_ps(int64_t ps) {
  return Time::from_ps(ps);
}

/// The calibrated tuning with every link family at efficiency 1, so that capacities are the
/// nominal bandwidths of the hand computations below.
CollectiveTuning ideal_tuning() {
  CollectiveTuning t = nccl_like_tuning();
  for (LinkFamily& f : t.families)
    f.efficiency = 1.0;
  return t;
}

/// A CPU behind a PCIe switch whose uplink (16 GB/s) is shared by `gpus` GPUs (32 GB/s each).
struct PcieTree {
  Fabric fabric;
  LinkId uplink_down;  // cpu -> switch
};
PcieTree pcie_tree(int gpus) {
  FabricBuilder b("pcie tree");
  const DeviceIndex cpu = b.add_device("cpu0", DeviceKind::kCpu, 0);
  const DeviceIndex sw = b.add_device("pcie0", DeviceKind::kPcieSwitch, 0);
  const LinkId up = b.add_link(cpu, sw, "pcie4", gbps(16), ns(500));
  for (int g = 0; g < gpus; ++g) {
    const DeviceIndex gpu = b.add_device("gpu" + std::to_string(g), DeviceKind::kGpu, 0);
    b.add_link(gpu, sw, "pcie4", gbps(32), ns(500));
  }
  return {std::move(b).seal(), up};
}

/// Two GPUs joined by one 10 GB/s link without latency, for exact timing.
Fabric two_gpu_link() {
  FabricBuilder b("pair");
  const DeviceIndex g0 = b.add_device("gpu0", DeviceKind::kGpu, 0);
  const DeviceIndex g1 = b.add_device("gpu1", DeviceKind::kGpu, 0);
  b.add_link(g0, g1, "testlink", gbps(10), Duration::zero());
  return std::move(b).seal();
}

/// Records every link report.
class RateLog final : public Observer {
 public:
  struct Report {
    uint32_t link;
    Time at;
    double rate;
    uint32_t flows;
  };
  void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) override {
    reports.push_back(Report{link, at, rate.bytes_per_second(), flows});
  }
  std::vector<Report> reports;
};

FlowBatch one_flow(std::vector<uint32_t> route, double bytes) {
  FlowBatch batch;
  batch.add_flow(route, bytes);
  return batch;
}

TEST(FlowNetwork, TwoCopiesThroughOnePcieSwitchUplinkEachGetHalf) {
  const PcieTree tree = pcie_tree(2);
  FlowNetwork net(tree.fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  std::vector<Time> done(2);
  for (RankId r = 0; r < 2; ++r) {
    net.start_transfer(engine, TransferDesc{TransferKind::kHostToDevice, r, 1'600'000'000},
                       [&, r] { done[r] = engine.now(); });
  }
  // Both flows start after the route latency (2 hops x 500 ns) and share the 16 GB/s uplink.
  engine.run_until(at_ps(ns(1000).ps() + 1));
  EXPECT_EQ(net.link_flow_count(tree.uplink_down), 2u);
  EXPECT_DOUBLE_EQ(net.link_rate(tree.uplink_down).bytes_per_second(), 16e9);
  engine.run();
  // 1.6 GB at 8 GB/s = 200 ms, after 1 us of latency.
  const Time expected = at_ps(ns(1000).ps() + 200'000'000'000);
  EXPECT_EQ(done[0], expected);
  EXPECT_EQ(done[1], expected);
  EXPECT_EQ(net.link_flow_count(tree.uplink_down), 0u);
  EXPECT_EQ(net.link_rate(tree.uplink_down).bytes_per_second(), 0.0);
}

TEST(FlowNetwork, DirectionsOfALinkAreSeparate) {
  const PcieTree tree = pcie_tree(2);
  FlowNetwork net(tree.fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  std::vector<Time> done(2);
  net.start_transfer(engine, TransferDesc{TransferKind::kHostToDevice, 0, 1'600'000'000},
                     [&] { done[0] = engine.now(); });
  net.start_transfer(engine, TransferDesc{TransferKind::kDeviceToHost, 1, 1'600'000'000},
                     [&] { done[1] = engine.now(); });
  engine.run();
  // Opposite directions: each copy has the full 16 GB/s -> 100 ms.
  EXPECT_EQ(done[0], at_ps(ns(1000).ps() + 100'000'000'000));
  EXPECT_EQ(done[1], done[0]);
}

TEST(FlowNetwork, EightGpusBehindOneNicEachGetAnEighth) {
  FabricBuilder b("nic");
  const DeviceIndex sw = b.add_device("pcie", DeviceKind::kPcieSwitch, 0);
  const DeviceIndex nic = b.add_device("nic", DeviceKind::kNic, 0);
  const DeviceIndex net_switch = b.add_device("leaf", DeviceKind::kNetworkSwitch, kNoNode);
  const DeviceIndex remote = b.add_device("remote_gpu", DeviceKind::kGpu, 1);
  b.add_link(nic, sw, "pcie5", gbps(64), Duration::zero());
  const LinkId nic_up = b.add_link(nic, net_switch, "ib_ndr", gbps(50), Duration::zero());
  b.add_link(net_switch, remote, "ib_ndr", gbps(400), Duration::zero());
  std::vector<DeviceIndex> gpus;
  for (int g = 0; g < 8; ++g) {
    gpus.push_back(b.add_device("gpu" + std::to_string(g), DeviceKind::kGpu, 0));
    b.add_link(gpus.back(), sw, "pcie5", gbps(64), Duration::zero());
  }
  const Fabric fabric = std::move(b).seal();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  int finished = 0;
  Time last;
  FlowBatch batch;
  for (DeviceIndex g : gpus)
    batch.add_flow(fabric.route(g, remote), 1e9);
  net.start_flows(engine, Duration::zero(), std::move(batch), [&] {
    ++finished;
    last = engine.now();
  });
  engine.run_until(Time::zero());
  EXPECT_EQ(net.link_flow_count(nic_up), 8u);
  EXPECT_DOUBLE_EQ(net.link_rate(nic_up).bytes_per_second(), 50e9);
  EXPECT_EQ(net.active_flow_count(), 8u);
  engine.run();
  // Each flow moves 1 GB at 50/8 GB/s: 160 ms, all together.
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(last, at_ps(160'000'000'000));
}

TEST(FlowNetwork, LaterFlowSlowsTheFirstWhichSpeedsUpWhenItEnds) {
  const Fabric fabric = two_gpu_link();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  RateLog log;
  net.add_observer(&log);
  Engine engine;
  const LinkId link = fabric.route(fabric.gpus()[0], fabric.gpus()[1]).front();
  Time a_done;
  Time b_done;
  net.start_flows(engine, Duration::zero(), one_flow({link}, 1e9), [&] { a_done = engine.now(); });
  net.start_flows(engine, Duration::from_ms(50), one_flow({link}, 2.5e8),
                  [&] { b_done = engine.now(); });
  engine.run();
  // A alone at 10 GB/s for 50 ms (0.5 GB), then both at 5 GB/s: B's 0.25 GB take 50 ms, A sends
  // 0.25 GB more; A's last 0.25 GB at 10 GB/s take 25 ms.
  EXPECT_EQ(b_done, at_ps(100'000'000'000));
  EXPECT_EQ(a_done, at_ps(125'000'000'000));

  ASSERT_EQ(log.reports.size(), 4u);
  const std::vector<std::pair<int64_t, uint32_t>> expected{
      {0, 1}, {50'000'000'000, 2}, {100'000'000'000, 1}, {125'000'000'000, 0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(log.reports[i].link, link);
    EXPECT_EQ(log.reports[i].at, at_ps(expected[i].first));
    EXPECT_EQ(log.reports[i].flows, expected[i].second);
    EXPECT_DOUBLE_EQ(log.reports[i].rate, expected[i].second == 0 ? 0.0 : 10e9);
  }
}

TEST(FlowNetwork, CompletesExactlyAtTheComputedPicosecondNotOneBefore) {
  const Fabric fabric = two_gpu_link();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  const LinkId link = fabric.route(fabric.gpus()[0], fabric.gpus()[1]).front();
  bool done = false;
  // 3 bytes at 10 GB/s = 0.3 ns = 300 ps.
  net.start_flows(engine, Duration::zero(), one_flow({link}, 3.0), [&] { done = true; });
  engine.run_until(at_ps(299));
  EXPECT_FALSE(done);
  engine.run_until(at_ps(300));
  EXPECT_TRUE(done);
}

TEST(FlowNetwork, FlowsStartingAtTheSameInstantArePricedOnce) {
  const PcieTree tree = pcie_tree(4);
  FlowNetwork net(tree.fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  int done = 0;
  for (RankId r = 0; r < 4; ++r) {
    net.start_transfer(engine, TransferDesc{TransferKind::kHostToDevice, r, 1'000'000},
                       [&] { ++done; });
  }
  engine.run();
  EXPECT_EQ(done, 4);
  // One recomputation when the four start, one when they finish together.
  EXPECT_EQ(net.stats().recomputations, 2u);
  EXPECT_EQ(net.stats().flows_started, 4u);
  EXPECT_EQ(net.stats().flows_finished, 4u);
}

TEST(FlowNetwork, IndependentFlowsAreNotRepriced) {
  // Two GPU pairs through one switch on disjoint links: a flow starting on one pair does not
  // reprice the other.
  FabricBuilder b("disjoint");
  const DeviceIndex sw = b.add_device("sw", DeviceKind::kNvSwitch, 0);
  std::vector<DeviceIndex> g;
  for (int i = 0; i < 4; ++i) {
    g.push_back(b.add_device("gpu" + std::to_string(i), DeviceKind::kGpu, 0));
    b.add_link(g.back(), sw, "testlink", gbps(10), Duration::zero());
  }
  const Fabric fabric = std::move(b).seal();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  const auto a = fabric.route(g[0], g[1]);
  const auto c = fabric.route(g[2], g[3]);
  net.start_flows(engine, Duration::zero(), one_flow({a.begin(), a.end()}, 1e9), [] {});
  net.start_flows(engine, Duration::from_ms(1), one_flow({c.begin(), c.end()}, 1e9), [] {});
  engine.run();
  // Each start and each finish reprices only its own flow.
  EXPECT_EQ(net.stats().flows_repriced, 2u);
}

TEST(FlowNetwork, VirtualLinkCapsTheFlowsThatShareIt) {
  const Fabric fabric = two_gpu_link();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  const uint32_t link = fabric.route(fabric.gpus()[0], fabric.gpus()[1]).front();
  const auto cap = static_cast<uint32_t>(fabric.links().size());  // the batch's virtual link 0
  FlowBatch batch;
  batch.add_flow(std::vector<uint32_t>{link, cap}, 1e9);
  batch.add_flow(std::vector<uint32_t>{link, cap}, 1e9);
  batch.virtual_capacities.push_back(gbps(4));
  Time done;
  net.start_flows(engine, Duration::zero(), std::move(batch), [&] { done = engine.now(); });
  engine.run();
  // 2 GB through a 4 GB/s cap (the 10 GB/s link is not the bottleneck): 500 ms.
  EXPECT_EQ(done, at_ps(500'000'000'000));
}

TEST(FlowNetwork, DeviceToDeviceCopyMovesEveryByteTwiceThroughDeviceMemory) {
  const PcieTree tree = pcie_tree(1);
  FlowNetwork net(tree.fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  Time done;
  net.start_transfer(engine, TransferDesc{TransferKind::kDeviceToDevice, 0, 1'000'000'000},
                     [&] { done = engine.now(); });
  engine.run();
  EXPECT_EQ(done, at_ps(2'000'000'000));  // 2 GB at 1000 GB/s = 2 ms
}

TEST(FlowNetwork, EmptyOperationsCompleteFromAnEventAtTheCurrentInstant) {
  const PcieTree tree = pcie_tree(2);
  FlowNetwork net(tree.fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  int done = 0;
  net.start_transfer(engine, TransferDesc{TransferKind::kDeviceToDevice, 0, 0}, [&] { ++done; });
  CollectiveDesc single{CollectiveKind::kAllReduce, {1}, 1 << 20, {}};
  net.start_collective(engine, single, [&] { ++done; });
  EXPECT_EQ(done, 0) << "never called from inside start_*";
  engine.run();
  EXPECT_EQ(done, 2);
  EXPECT_EQ(engine.now(), Time::zero());
}

TEST(FlowNetwork, LinksAreDeclaredWithNamesAndNominalCapacity) {
  const PcieTree tree = pcie_tree(1);
  CollectiveTuning t = nccl_like_tuning();
  for (LinkFamily& f : t.families)
    f.efficiency = 0.5;
  FlowNetwork net(tree.fabric, t, gbps(1000));
  ASSERT_EQ(net.links().size(), tree.fabric.links().size());
  EXPECT_EQ(net.links()[0].name, tree.fabric.link_name(0));
  EXPECT_EQ(net.links()[0].capacity.bytes_per_second(), 16e9);
  EXPECT_EQ(net.link_capacity(0).bytes_per_second(), 8e9);
}

TEST(FlowNetwork, RejectsRanksOutsideTheFabricAndHostCopiesWithoutCpu) {
  const PcieTree tree = pcie_tree(2);
  FlowNetwork net(tree.fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  try {
    net.start_transfer(engine, TransferDesc{TransferKind::kHostToDevice, 2, 1}, [] {});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 GPUs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(net.start_transfer(engine, TransferDesc{TransferKind::kHostToDevice, 0, -1}, [] {}),
               std::invalid_argument);
  const Fabric no_cpu = two_gpu_link();
  FlowNetwork bare(no_cpu, ideal_tuning(), gbps(1000));
  EXPECT_THROW(bare.start_transfer(engine, TransferDesc{TransferKind::kDeviceToHost, 0, 1}, [] {}),
               std::invalid_argument);
  EXPECT_THROW(FlowNetwork(no_cpu, ideal_tuning(), gbps(0)), std::invalid_argument);
}

TEST(FlowNetwork, RejectsMalformedBatches) {
  const Fabric fabric = two_gpu_link();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  Engine engine;
  const auto unknown = static_cast<uint32_t>(fabric.links().size());  // no virtual links given
  EXPECT_THROW(net.start_flows(engine, Duration::zero(), one_flow({unknown}, 1.0), [] {}),
               std::invalid_argument);
  EXPECT_THROW(net.start_flows(engine, Duration::zero(), one_flow({0}, -1.0), [] {}),
               std::invalid_argument);
  EXPECT_THROW(net.start_flows(engine, ns(-1), one_flow({0}, 1.0), [] {}), std::invalid_argument);
}

TEST(FlowNetwork, OneEngineAtATime) {
  const Fabric fabric = two_gpu_link();
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  Engine first;
  Engine second;
  net.start_flows(first, Duration::zero(), one_flow({0}, 1e9), [] {});
  EXPECT_THROW(net.start_flows(second, Duration::zero(), one_flow({0}, 1e9), [] {}),
               std::logic_error);
  first.run();
  // Idle again: another engine may take over.
  bool done = false;
  net.start_flows(second, Duration::zero(), one_flow({0}, 1e9), [&] { done = true; });
  second.run();
  EXPECT_TRUE(done);
}

/// Four leaves of four GPUs under two spines, links of mixed speed: routes that share GPU,
/// leaf and spine links, so that changes cascade.
Fabric leaf_spine() {
  FabricBuilder b("leaf spine");
  std::vector<DeviceIndex> spines;
  for (int s = 0; s < 2; ++s)
    spines.push_back(b.add_device(fmt::format("spine{}", s), DeviceKind::kNetworkSwitch, -1));
  for (int leaf = 0; leaf < 4; ++leaf) {
    const DeviceIndex sw =
        b.add_device(fmt::format("leaf{}", leaf), DeviceKind::kNetworkSwitch, -1);
    for (int s = 0; s < 2; ++s)
      b.add_link(sw, spines[s], "testlink", gbps(40 + 20 * s), Duration::zero());
    for (int g = 0; g < 4; ++g) {
      const DeviceIndex gpu = b.add_device(fmt::format("l{}g{}", leaf, g), DeviceKind::kGpu, leaf);
      b.add_link(gpu, sw, "testlink", gbps(10 + 5 * g), Duration::zero());
    }
  }
  return std::move(b).seal();
}

/// Each batch's completion time and every link report of one run of random flow batches
/// (fixed seed): one to three flows between random GPU pairs, some under a virtual cap, at
/// random start times of which many coincide.
struct RandomRun {
  std::vector<Time> done;
  std::vector<RateLog::Report> reports;
  FlowNetworkStats stats;
};
RandomRun run_random_batches(const Fabric& fabric, Repricing repricing, uint32_t seed,
                             int max_passes = kDefaultRepricingPasses) {
  FlowNetwork net(fabric, ideal_tuning(), gbps(1000));
  net.set_repricing(repricing, max_passes);
  RateLog log;
  net.add_observer(&log);
  Engine engine;
  std::mt19937 rng(seed);
  const auto gpus = fabric.gpus();
  std::uniform_int_distribution<size_t> pick(0, gpus.size() - 1);
  std::uniform_int_distribution<int> flows_per_batch(1, 3);
  std::uniform_int_distribution<int> start_us(0, 40);
  std::uniform_real_distribution<double> megabytes(0.01, 2.0);
  std::bernoulli_distribution capped(0.2);
  constexpr int kBatches = 120;
  RandomRun run;
  run.done.assign(kBatches, Time{});
  for (int i = 0; i < kBatches; ++i) {
    FlowBatch batch;
    const int n = flows_per_batch(rng);
    const bool cap = capped(rng);
    for (int f = 0; f < n; ++f) {
      size_t a = pick(rng);
      size_t b = pick(rng);
      if (a == b) b = (a + 1) % gpus.size();
      std::vector<uint32_t> route;
      for (LinkId l : fabric.route(gpus[a], gpus[b]))
        route.push_back(l);
      if (cap) route.push_back(static_cast<uint32_t>(fabric.links().size()));
      batch.add_flow(route, megabytes(rng) * 1e6);
    }
    if (cap) batch.virtual_capacities.push_back(gbps(3));
    // Whole microseconds, so that many batches start at the same instant.
    net.start_flows(engine, Duration::from_us(start_us(rng)), std::move(batch),
                    [&run, &engine, i] { run.done[i] = engine.now(); });
  }
  engine.run();
  run.reports = log.reports;
  run.stats = net.stats();
  return run;
}

TEST(FlowNetwork, IncrementalRepricingGivesTheComponentsAllocation) {
  // The reference prices every flow connected to a change; the incremental repricing only
  // those its fairness check reaches. Both are the max-min allocation, so every completion
  // and every link report agree, to the picosecond and to rounding.
  const Fabric fabric = leaf_spine();
  uint64_t fallbacks = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    RandomRun reference = run_random_batches(fabric, Repricing::kComponent, seed);
    RandomRun incremental = run_random_batches(fabric, Repricing::kIncremental, seed);
    // One pass only: every recomputation the check finds unfair falls back to the component.
    const RandomRun fallback = run_random_batches(fabric, Repricing::kIncremental, seed, 1);
    EXPECT_EQ(fallback.done, reference.done);
    fallbacks += fallback.stats.component_fallbacks;
    for (size_t i = 0; i < reference.done.size(); ++i) {
      ASSERT_GT(reference.done[i], Time{});
      EXPECT_EQ(incremental.done[i], reference.done[i]) << "batch " << i;
    }
    // The links of one instant are reported in the order each mode visits them.
    const auto by_time_and_link = [](const RateLog::Report& a, const RateLog::Report& b) {
      return a.at != b.at ? a.at < b.at : a.link < b.link;
    };
    std::stable_sort(reference.reports.begin(), reference.reports.end(), by_time_and_link);
    std::stable_sort(incremental.reports.begin(), incremental.reports.end(), by_time_and_link);
    ASSERT_EQ(incremental.reports.size(), reference.reports.size());
    for (size_t i = 0; i < reference.reports.size(); ++i) {
      EXPECT_EQ(incremental.reports[i].at, reference.reports[i].at);
      EXPECT_EQ(incremental.reports[i].flows, reference.reports[i].flows);
      EXPECT_NEAR(incremental.reports[i].rate, reference.reports[i].rate,
                  1e-9 * reference.reports[i].rate);
    }
    EXPECT_EQ(incremental.stats.flows_started, reference.stats.flows_started);
    EXPECT_LE(incremental.stats.flows_repriced, reference.stats.flows_repriced);
  }
  EXPECT_GT(fallbacks, 0U);
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

/// Two nodes of two GPUs: NVLink 4 inside a node, one 50 GB/s NIC link per GPU to a switch.
Fabric two_nvlink_nodes() {
  FabricBuilder b("two nodes");
  const DeviceIndex sw = b.add_device("ib", DeviceKind::kNetworkSwitch, -1);
  for (int node = 0; node < 2; ++node) {
    const DeviceIndex g0 = b.add_device("n" + std::to_string(node) + "g0", DeviceKind::kGpu, node);
    const DeviceIndex g1 = b.add_device("n" + std::to_string(node) + "g1", DeviceKind::kGpu, node);
    b.add_link(g0, g1, "nvlink4", gbps(450), Duration::zero());
    b.add_link(g0, sw, "ib_ndr", gbps(50), Duration::zero());
    b.add_link(g1, sw, "ib_ndr", gbps(50), Duration::zero());
  }
  return std::move(b).seal();
}

TEST(FlowNetworkSmSharing, CollectivesHoldTheSmsOfTheGpusLinkGeneration) {
  const Fabric fabric = two_nvlink_nodes();
  const FlowNetwork net(fabric, nccl_like_tuning(), gbps(3000));
  EXPECT_TRUE(net.communication_holds_sms());
  const CollectiveDesc all_reduce{CollectiveKind::kAllReduce, {0, 1, 2, 3}, 1 << 20, {}};
  EXPECT_EQ(net.communication_sms(all_reduce, 0), 24) << "NVLink 4: NCCL's 24 channels";
  const CollectiveDesc inside{CollectiveKind::kSendRecv, {0, 1}, 1 << 20, {}};
  EXPECT_EQ(net.communication_sms(inside, 1), 24);
  const CollectiveDesc across{CollectiveKind::kSendRecv, {1, 2}, 1 << 20, {}};
  EXPECT_EQ(net.communication_sms(across, 1), 2) << "2 channels per network peer";
  const CollectiveDesc alone{CollectiveKind::kAllReduce, {3}, 1 << 20, {}};
  EXPECT_EQ(net.communication_sms(alone, 3), 0) << "a one-member collective moves nothing";
}

TEST(FlowNetworkSmSharing, AnNvlink3MeshHoldsFewerSmsThanAnNvswitchSystem) {
  const CollectiveDesc all_reduce{CollectiveKind::kAllReduce, {0, 1}, 1 << 20, {}};
  FabricBuilder mesh("mesh");
  const DeviceIndex a = mesh.add_device("gpu0", DeviceKind::kGpu, 0);
  const DeviceIndex b = mesh.add_device("gpu1", DeviceKind::kGpu, 0);
  mesh.add_link(a, b, "nvlink3", gbps(100), Duration::zero());
  const Fabric direct = std::move(mesh).seal();
  EXPECT_EQ(FlowNetwork(direct, nccl_like_tuning(), gbps(2000)).communication_sms(all_reduce, 0), 8)
      << "HGX A100 4-GPU: 4 rings, run twice";
  FabricBuilder switched("switched");
  const DeviceIndex sw = switched.add_device("nvswitch", DeviceKind::kNvSwitch, 0);
  for (const char* id : {"gpu0", "gpu1"}) {
    switched.add_link(switched.add_device(id, DeviceKind::kGpu, 0), sw, "nvlink3", gbps(300),
                      Duration::zero());
  }
  const Fabric nvswitch = std::move(switched).seal();
  EXPECT_EQ(FlowNetwork(nvswitch, nccl_like_tuning(), gbps(2000)).communication_sms(all_reduce, 0),
            24)
      << "HGX A100 8-GPU: 24 channels";
}

TEST(FlowNetworkSmSharing, PcieGpusHoldTwoAndAnEmptyTableHoldsNone) {
  const PcieTree tree = pcie_tree(2);
  const CollectiveDesc all_reduce{CollectiveKind::kAllReduce, {0, 1}, 1 << 20, {}};
  const FlowNetwork pcie(tree.fabric, nccl_like_tuning(), gbps(3000));
  EXPECT_EQ(pcie.communication_sms(all_reduce, 0), 2);
  CollectiveTuning none = nccl_like_tuning();
  none.communication_sms.clear();
  const FlowNetwork off(tree.fabric, none, gbps(3000));
  EXPECT_FALSE(off.communication_holds_sms());
  EXPECT_EQ(off.communication_sms(all_reduce, 0), 0);
}

}  // namespace
}  // namespace upsim

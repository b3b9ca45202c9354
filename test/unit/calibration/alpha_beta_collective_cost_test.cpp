#include "calibration/alpha_beta_collective_cost.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace upsim {
namespace {

// alpha 2 us per step; 100 GB/s at efficiency 0.5 -> bw_eff 5e10 B/s.
LinkCost test_link() {
  return LinkCost{Duration::from_us(2), Bandwidth::gigabytes_per_second(100.0), 0.5};
}
// alpha 1 us; 10 GB/s at 0.5 -> 5e9 B/s.
LinkCost test_host_link() {
  return LinkCost{Duration::from_us(1), Bandwidth::gigabytes_per_second(10.0), 0.5};
}

AlphaBetaCollectiveCost test_model() {
  return AlphaBetaCollectiveCost(test_link(), test_host_link(),
                                 Bandwidth::gigabytes_per_second(1000.0));
}

CollectiveDesc collective(CollectiveKind kind, size_t n, int64_t bytes) {
  CollectiveDesc c;
  c.kind = kind;
  c.members.resize(n);
  std::iota(c.members.begin(), c.members.end(), RankId{0});
  c.bytes = bytes;
  return c;
}

TEST(AlphaBetaCollectiveCost, RingAllReduceHandComputed) {
  // n 4, S 1e8: 2(n-1) alpha = 12 us; 2(n-1)/n S / bw_eff = 1.5e8 / 5e10 = 3000 us.
  EXPECT_EQ(
      test_model().collective_duration(collective(CollectiveKind::kAllReduce, 4, 100'000'000)),
      Duration::from_us(3012));
}

TEST(AlphaBetaCollectiveCost, ReduceScatterAndAllGatherMoveTheSameFullBuffer) {
  // Reduce-scatter of a 1e8-byte input: 3 alpha + 0.75 x 1e8 / 5e10 = 6 + 1500 us.
  EXPECT_EQ(
      test_model().collective_duration(collective(CollectiveKind::kReduceScatter, 4, 100'000'000)),
      Duration::from_us(1506));
  // All-gather of 2.5e7-byte inputs into a 1e8-byte output: the same.
  EXPECT_EQ(test_model().collective_duration(collective(CollectiveKind::kAllGather, 4, 25'000'000)),
            Duration::from_us(1506));
}

TEST(AlphaBetaCollectiveCost, UnevenAllToAllUsesMaxOfMax) {
  // Rows: what member i sends to member j (MB). Sent: 30, 10, 80; received: 45, 50, 25.
  // Max of max = 80 MB (member 2 sending); max of sum would be 105 MB, the mean 40 MB.
  CollectiveDesc c = collective(CollectiveKind::kAllToAll, 3, 0);
  const int64_t mb = 1'000'000;
  std::vector<int64_t> sizes{0, 10 * mb, 20 * mb, 5 * mb, 0, 5 * mb, 40 * mb, 40 * mb, 0};
  c.send_bytes = AllToAllSizes::dense(3, sizes);
  EXPECT_DOUBLE_EQ(all_to_all_max_of_max(c.send_bytes, 3), 80.0 * mb);
  // (n-1) alpha = 4 us; 8e7 / 5e10 = 1600 us.
  EXPECT_EQ(test_model().collective_duration(c), Duration::from_us(1604));
  // What a member keeps for itself crosses no link.
  sizes[8] = 1000 * mb;
  c.send_bytes = AllToAllSizes::dense(3, sizes);
  EXPECT_EQ(test_model().collective_duration(c), Duration::from_us(1604));
}

TEST(AlphaBetaCollectiveCost, MaxOfMaxTakesTheReceivingSideWhenItIsBusier) {
  // Everyone sends 10 MB to member 0: member 0 receives 30 MB, nobody sends more than 10 MB.
  const int64_t mb = 1'000'000;
  const std::vector<int64_t> send{0, 0, 0, 0, 10 * mb, 0, 0, 0, 10 * mb, 0, 0, 0, 10 * mb, 0, 0, 0};
  EXPECT_DOUBLE_EQ(all_to_all_max_of_max(AllToAllSizes::dense(4, send), 4), 30.0 * mb);
  // The same matrix as an outer product (every member sends 10 MB to member 0 only): the
  // diagonal (member 0 to itself) is left out.
  EXPECT_DOUBLE_EQ(all_to_all_max_of_max(AllToAllSizes::outer({10, 10, 10, 10}, {mb, 0, 0, 0}), 4),
                   30.0 * mb);
}

TEST(AlphaBetaCollectiveCost, EvenAllToAllWithoutSplitsSendsAnNthToEachPeer) {
  // S 4e7 per member, n 4: 3 alpha + 0.75 x 4e7 / 5e10 = 6 + 600 us.
  EXPECT_EQ(test_model().collective_duration(collective(CollectiveKind::kAllToAll, 4, 40'000'000)),
            Duration::from_us(606));
}

TEST(AlphaBetaCollectiveCost, AllToAllRejectsMisshapedSplits) {
  CollectiveDesc c = collective(CollectiveKind::kAllToAll, 3, 0);
  c.send_bytes = AllToAllSizes::dense(2, {1, 2, 3, 4});  // two members' sizes for three
  EXPECT_THROW(test_model().collective_duration(c), std::invalid_argument);
}

TEST(AlphaBetaCollectiveCost, BroadcastAndSendRecv) {
  // Broadcast n 4, S 1e8: 3 alpha + 1e8 / 5e10 = 6 + 2000 us.
  EXPECT_EQ(
      test_model().collective_duration(collective(CollectiveKind::kBroadcast, 4, 100'000'000)),
      Duration::from_us(2006));
  // Send/recv 1e6 bytes: alpha + 1e6 / 5e10 = 2 + 20 us.
  EXPECT_EQ(test_model().collective_duration(collective(CollectiveKind::kSendRecv, 2, 1'000'000)),
            Duration::from_us(22));
}

TEST(AlphaBetaCollectiveCost, SingleMemberOrEmptyCollectiveTakesNoTime) {
  for (CollectiveKind kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kSendRecv}) {
    EXPECT_EQ(test_model().collective_duration(collective(kind, 1, 1'000'000)), Duration::zero())
        << collective_kind_name(kind);
    EXPECT_EQ(test_model().collective_duration(collective(kind, 4, 0)), Duration::zero())
        << collective_kind_name(kind);
  }
}

TEST(AlphaBetaCollectiveCost, TransfersUseHostLinkOrDeviceMemory) {
  const AlphaBetaCollectiveCost model = test_model();
  // H2D / D2H 5e6 bytes: 1 us + 5e6 / 5e9 = 1001 us.
  EXPECT_EQ(model.transfer_duration({TransferKind::kHostToDevice, 0, 5'000'000}),
            Duration::from_us(1001));
  EXPECT_EQ(model.transfer_duration({TransferKind::kDeviceToHost, 0, 5'000'000}),
            Duration::from_us(1001));
  // D2D reads and writes: 2 x 5e6 / 1e12 = 10 us.
  EXPECT_EQ(model.transfer_duration({TransferKind::kDeviceToDevice, 0, 5'000'000}),
            Duration::from_us(10));
  EXPECT_EQ(model.transfer_duration({TransferKind::kHostToDevice, 0, 0}), Duration::zero());
}

TEST(AlphaBetaCollectiveCost, RejectsInvalidLinks) {
  LinkCost bad = test_link();
  bad.efficiency = 0.0;
  EXPECT_THROW(AlphaBetaCollectiveCost(bad, test_host_link(), Bandwidth::gigabytes_per_second(1)),
               std::invalid_argument);
  bad = test_link();
  bad.alpha = Duration::from_us(-1);
  EXPECT_THROW(AlphaBetaCollectiveCost(bad, test_host_link(), Bandwidth::gigabytes_per_second(1)),
               std::invalid_argument);
  EXPECT_THROW(AlphaBetaCollectiveCost(test_link(), test_host_link(), Bandwidth{}),
               std::invalid_argument);
}

TEST(AlphaBetaCollectiveCost, LinkKindDefaultsFollowTheCitedTable) {
  for (std::string_view name : link_kind_names()) {
    const std::optional<LinkKind> kind = parse_link_kind(name);
    ASSERT_TRUE(kind) << name;
    EXPECT_EQ(link_kind_name(*kind), name);
    const LinkCost cost = default_link_cost(*kind);
    EXPECT_GT(cost.bandwidth.bytes_per_second(), 0.0) << name;
    EXPECT_GT(cost.efficiency, 0.0) << name;
    EXPECT_LE(cost.efficiency, 1.0) << name;
  }
  EXPECT_FALSE(parse_link_kind("nvlink5"));
  EXPECT_DOUBLE_EQ(default_link_cost(LinkKind::kNvlink2).bandwidth.gigabytes_per_second(), 150.0);
  EXPECT_DOUBLE_EQ(default_link_cost(LinkKind::kNvlink3).bandwidth.gigabytes_per_second(), 300.0);
  EXPECT_DOUBLE_EQ(default_link_cost(LinkKind::kNvlink4).bandwidth.gigabytes_per_second(), 450.0);
  EXPECT_NEAR(default_link_cost(LinkKind::kPcie4).bandwidth.gigabytes_per_second(), 31.508, 1e-3);
  EXPECT_DOUBLE_EQ(default_link_cost(LinkKind::kIbHdr).bandwidth.gigabytes_per_second(), 25.0);
  EXPECT_DOUBLE_EQ(default_link_cost(LinkKind::kIbNdr).bandwidth.gigabytes_per_second(), 50.0);
  EXPECT_EQ(default_link_cost(LinkKind::kNvlink3).alpha, Duration::from_ns(2146));
  EXPECT_LT(default_link_cost(LinkKind::kNvlink3).alpha, default_link_cost(LinkKind::kPcie4).alpha);
  EXPECT_LT(default_link_cost(LinkKind::kPcie4).alpha, default_link_cost(LinkKind::kIbHdr).alpha);
}

HardwareProfile test_hardware() {
  HardwareProfile hw;
  hw.device.name = "test-gpu";
  hw.device.hbm_bandwidth = Bandwidth::gigabytes_per_second(1000.0);
  hw.device.host_link_bandwidth = *pcie_x16_bandwidth(4);
  hw.achievable.memory = 0.8;
  return hw;
}

TEST(AlphaBetaCollectiveCost, KindConstructorUsesProfileHostLinkAndMemory) {
  const AlphaBetaCollectiveCost model(LinkKind::kNvlink3, test_hardware());
  EXPECT_EQ(model.link().bandwidth, default_link_cost(LinkKind::kNvlink3).bandwidth);
  EXPECT_EQ(model.host_link().bandwidth, *pcie_x16_bandwidth(4));
  // D2D 4e6 bytes: 2 x 4e6 / (1e12 x 0.8) = 10 us.
  EXPECT_EQ(model.transfer_duration({TransferKind::kDeviceToDevice, 0, 4'000'000}),
            Duration::from_us(10));
}

TEST(AlphaBetaCollectiveCost, LoaderAppliesWhatIfOverrides) {
  ConfigDocument doc = ConfigDocument::parse_string(
      "model: alpha_beta\nlink: nvlink3\nbandwidth: 600GB/s\nlatency: 1us\nefficiency: 0.5\n"
      "host_link: pcie5\n",
      "scenario.yaml");
  const AlphaBetaCollectiveCost model = load_alpha_beta(doc.root(), test_hardware());
  doc.check_all_keys_used();
  EXPECT_DOUBLE_EQ(model.link().bandwidth.gigabytes_per_second(), 600.0);
  EXPECT_EQ(model.link().alpha, Duration::from_us(1));
  EXPECT_DOUBLE_EQ(model.link().efficiency, 0.5);
  EXPECT_EQ(model.host_link().bandwidth, *pcie_x16_bandwidth(5));
  // n 4, S 3e8: 6 us + 1.5 x 3e8 / 3e11 = 1500 us.
  EXPECT_EQ(model.collective_duration(collective(CollectiveKind::kAllReduce, 4, 300'000'000)),
            Duration::from_us(1506));
}

TEST(AlphaBetaCollectiveCost, LoaderRejectsUnknownLinkListingValidKinds) {
  ConfigDocument doc =
      ConfigDocument::parse_string("model: alpha_beta\nlink: nvlink9\n", "scenario.yaml");
  try {
    load_alpha_beta(doc.root(), test_hardware());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("nvlink3"), std::string::npos) << what;
    EXPECT_NE(what.find("ib_ndr"), std::string::npos) << what;
  }
  ConfigDocument bad = ConfigDocument::parse_string(
      "model: alpha_beta\nlink: nvlink3\nefficiency: 1.5\n", "scenario.yaml");
  EXPECT_THROW(load_alpha_beta(bad.root(), test_hardware()), ConfigError);
  ConfigDocument host = ConfigDocument::parse_string(
      "model: alpha_beta\nlink: nvlink3\nhost_link: nvlink4\n", "scenario.yaml");
  EXPECT_THROW(load_alpha_beta(host.root(), test_hardware()), ConfigError);
}

}  // namespace
}  // namespace upsim

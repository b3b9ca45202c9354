// Communication takes HBM bandwidth from compute (sim/hbm_sharing.h): a kernel priced by the
// kernel model runs on the memory bandwidth the rates on its GPU's links leave, and keeps the
// work it has done when that share changes. Each test checks the exact picosecond a kernel ends.
#include "sim/hbm_sharing.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/executor.h"
#include "test/unit/sim/sm_sharing_fixtures.h"

namespace upsim {
namespace {

using sm_sharing::at_us;
using sm_sharing::NoHostCost;

/// A memory-bound kernel: its bytes at the device's HBM bandwidth.
class BandwidthKernelCost final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile& device) const override {
    return Duration::from_us_f((k.bytes_read + k.bytes_written) /
                               device.hbm_bandwidth.bytes_per_second() * 1e6);
  }
};

/// One link per GPU (gpu i is link i's end); a collective moves data for `duration` once all
/// members arrived, each member's link carrying `rate` meanwhile.
class LinkRateNetwork final : public NetworkModel {
 public:
  LinkRateNetwork(size_t gpus, Duration duration, Bandwidth rate)
      : duration_(duration), rate_(rate) {
    for (size_t g = 0; g < gpus; ++g) {
      links_.push_back(LinkInfo{"gpu" + std::to_string(g) + " -> switch",
                                Bandwidth::gigabytes_per_second(100.0), 0,
                                static_cast<int64_t>(g)});
    }
  }
  void start_collective(Engine& engine, const CollectiveDesc& c, Completion on_done) override {
    std::vector<LinkRateChange> busy;
    for (RankId m : c.members)
      busy.push_back(LinkRateChange{m, 1, rate_});
    notify_link_rates(engine.now(), busy);
    engine.schedule_in(duration_, EventPriority::kCompletion,
                       [this, &engine, members = c.members, done = std::move(on_done)] {
                         std::vector<LinkRateChange> idle;
                         for (RankId m : members)
                           idle.push_back(LinkRateChange{m, 0, Bandwidth{}});
                         notify_link_rates(engine.now(), idle);
                         done();
                       });
  }
  void start_transfer(Engine& engine, const TransferDesc&, Completion on_done) override {
    engine.schedule_in(Duration::zero(), EventPriority::kCompletion, std::move(on_done));
  }
  std::span<const LinkInfo> links() const override { return links_; }

 private:
  Duration duration_;
  Bandwidth rate_;
  std::vector<LinkInfo> links_;
};

/// Ranks on a GPU of 1000 bytes / us HBM, all of it achievable unless `fraction` says less.
struct Harness {
  Harness(size_t ranks, Duration collective, Bandwidth link_rate, double fraction = 1.0)
      : network(ranks, collective, link_rate) {
    sm_sharing::set_up(graph, models, ranks, {"compute", "comm"}, kernels, cpu, network);
    for (DeviceProfile& gpu : models.devices)
      gpu.hbm_bandwidth = Bandwidth::bytes_per_second(1e9);
    models.achievable_memory_fraction = fraction;
  }
  std::vector<Time> run() { return sm_sharing::run_ends(graph, models); }
  void all_gather(const std::vector<RankId>& members) {
    const CollectiveId c = graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllGather, members, 1024, {}}, "all_gather#0");
    for (RankId r : members)
      graph.add_collective(r, 1, c, "nccl:all_gather");
  }
  TaskId memory_kernel(RankId rank, double bytes) {
    KernelDesc k;
    k.bytes_read = bytes;
    return graph.add_kernel(rank, 0, "copy", "op", k);
  }
  TaskGraph graph;
  BandwidthKernelCost kernels;
  NoHostCost cpu;
  LinkRateNetwork network;
  ModelSet models;
};

Bandwidth bytes_per_us(double v) {
  return Bandwidth::bytes_per_second(v * 1e6);
}

TEST(HbmSharing, AMemoryBoundKernelBesideACollectiveRunsOnTheBandwidthLeft) {
  // The all-gather's link carries 250 bytes / us from 0 to 4 us: a quarter of HBM. A 4000-byte
  // kernel (4 us alone) moves 750 bytes / us meanwhile, 3000 by 4 us, the last 1000 at full
  // bandwidth: it ends at 5 us.
  Harness h(2, Duration::from_us(4), bytes_per_us(250));
  const TaskId k = h.memory_kernel(0, 4000);
  h.all_gather({0, 1});
  EXPECT_EQ(h.run()[k], at_us(5));
}

TEST(HbmSharing, TheShareIsOfTheAchievableBandwidth) {
  // 200 bytes / us of an achievable 800 (0.8 x 1000) is a quarter again.
  Harness h(2, Duration::from_us(4), bytes_per_us(200), 0.8);
  const TaskId k = h.memory_kernel(0, 4000);
  h.all_gather({0, 1});
  EXPECT_EQ(h.run()[k], at_us(5));
}

TEST(HbmSharing, CommunicationTakesAtMostHalf) {
  // A link rate above the whole bandwidth leaves the kernel half: 2000 bytes by 4 us, the other
  // 2000 in 2 us.
  Harness h(2, Duration::from_us(4), bytes_per_us(3000));
  const TaskId k = h.memory_kernel(0, 4000);
  h.all_gather({0, 1});
  EXPECT_EQ(h.run()[k], at_us(6));
}

TEST(HbmSharing, AShareBelowHalfAStepChangesNothing) {
  // 1/256 of the bandwidth rounds to level 0 (steps of 1/64).
  Harness h(2, Duration::from_us(4), Bandwidth::bytes_per_second(1e9 / 256));
  const TaskId k = h.memory_kernel(0, 4000);
  h.all_gather({0, 1});
  EXPECT_EQ(h.run()[k], at_us(4));
}

TEST(HbmSharing, OnlyTheMembersGpusLoseBandwidth) {
  Harness h(3, Duration::from_us(4), bytes_per_us(500));
  h.all_gather({0, 1});
  const TaskId member = h.memory_kernel(0, 1000);
  const TaskId bystander = h.memory_kernel(2, 1000);
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[member], at_us(2));
  EXPECT_EQ(ends[bystander], at_us(1));
}

TEST(HbmSharing, WithoutAnAchievableFractionCommunicationTakesNoBandwidth) {
  Harness h(2, Duration::from_us(4), bytes_per_us(500), 0.0);
  const TaskId k = h.memory_kernel(0, 4000);
  h.all_gather({0, 1});
  EXPECT_EQ(h.run()[k], at_us(4));
}

TEST(HbmSharing, AMeasuredKernelKeepsItsMeasuredDuration) {
  Harness h(2, Duration::from_us(4), bytes_per_us(500));
  h.all_gather({0, 1});
  const TaskId k = h.memory_kernel(0, 1000);
  h.graph.set_fixed_duration(k, Duration::from_us(3));
  EXPECT_EQ(h.run()[k], at_us(3));
}

TEST(HbmSharing, BothDirectionsOfAGpusLinksAddUp) {
  // Link 0 (out of GPU 0) and link 1 (into it) carry a quarter of HBM each: half is taken.
  const std::vector<LinkInfo> links = {
      LinkInfo{"gpu0 -> switch", Bandwidth::gigabytes_per_second(100.0), 0, 0},
      LinkInfo{"switch -> gpu0", Bandwidth::gigabytes_per_second(100.0), 0, 0},
      LinkInfo{"switch -> switch", Bandwidth::gigabytes_per_second(100.0), -1, -1}};
  std::vector<RankId> changed;
  HbmSharing sharing(links, {0}, {bytes_per_us(1000)}, [&](RankId r) { changed.push_back(r); });
  sharing.on_link_rate(0, Time::zero(), bytes_per_us(250), 1);
  EXPECT_EQ(sharing.level(0), HbmSharing::kLevels / 4);
  sharing.on_link_rate(1, Time::zero(), bytes_per_us(250), 1);
  EXPECT_EQ(sharing.level(0), HbmSharing::kLevels / 2);
  sharing.on_link_rate(2, Time::zero(), bytes_per_us(900), 1);  // no GPU at its ends
  sharing.on_link_rate(0, Time::zero(), Bandwidth{}, 0);
  sharing.on_link_rate(1, Time::zero(), Bandwidth{}, 0);
  EXPECT_EQ(sharing.level(0), 0);
  EXPECT_EQ(changed, (std::vector<RankId>{0, 0, 0, 0}));
}

TEST(HbmSharing, TheDeviceLeftHasLessBandwidthAndTheSameSmsAndPeaks) {
  DeviceProfile gpu;
  gpu.sm_count = 132;
  gpu.peak_flops[static_cast<size_t>(DType::kBf16)] = FlopRate::teraflops(989.0);
  gpu.hbm_bandwidth = Bandwidth::gigabytes_per_second(3200.0);
  const DeviceProfile left = device_with_hbm_taken(gpu, HbmSharing::kLevels / 4);
  EXPECT_DOUBLE_EQ(left.hbm_bandwidth.gigabytes_per_second(), 2400.0);
  EXPECT_EQ(left.sm_count, 132);
  EXPECT_EQ(left.peak(DType::kBf16), gpu.peak(DType::kBf16));
  EXPECT_EQ(device_with_hbm_taken(gpu, 0).hbm_bandwidth, gpu.hbm_bandwidth);
}

}  // namespace
}  // namespace upsim

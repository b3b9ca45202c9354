// Communication kernels take SMs from compute (sim/executor.h): a kernel priced by the kernel
// model runs on the SMs a collective leaves, and keeps the work it has done when the share
// changes. Each test checks the exact picosecond a kernel ends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/executor.h"
#include "test/unit/sim/sm_sharing_fixtures.h"

namespace upsim {
namespace {

using sm_sharing::at_us;
using sm_sharing::NoHostCost;
using sm_sharing::PerSmKernelCost;
using sm_sharing::SmHoldingNetwork;
using sm_sharing::work;

struct Harness {
  Harness(size_t ranks, Duration collective, int32_t held_sms) : network(collective, held_sms) {
    sm_sharing::set_up(graph, models, ranks, {"compute", "comm"}, kernels, cpu, network);
  }
  /// Runs the graph; returns each task's end.
  std::vector<Time> run() { return sm_sharing::run_ends(graph, models); }
  /// An all-reduce over `members`, its task at the end of each member's comm stream.
  void all_reduce(const std::vector<RankId>& members) {
    const CollectiveId c = graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllReduce, members, 1024, {}}, "all_reduce#0");
    for (RankId r : members)
      graph.add_collective(r, 1, c, "nccl:all_reduce");
  }
  TaskGraph graph;
  PerSmKernelCost kernels;
  NoHostCost cpu;
  SmHoldingNetwork network;
  ModelSet models;
};

TEST(CommunicationSmSharing, AKernelBesideACollectiveRunsOnTheSmsLeft) {
  // The all-reduce holds 25 of 100 SMs from 0 to 4 us; a 400-flop kernel (4 us alone) runs at
  // 75 flops/us meanwhile: 300 flops by 4 us, the last 100 on all SMs: ends at 5 us.
  Harness h(2, Duration::from_us(4), 25);
  const TaskId k = h.graph.add_kernel(0, 0, "gemm", "op", work(400));
  h.all_reduce({0, 1});
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[k], at_us(5));
}

TEST(CommunicationSmSharing, WorkDoneBeforeTheCollectiveStartsIsKept) {
  // Rank 1 reaches the all-reduce at 2 us (a 200-flop kernel runs on its comm stream first).
  // Rank 0's collective kernel holds 50 SMs from 0 us, waiting for its peer, then moving bytes
  // from 2 to 6 us: rank 0's 800-flop kernel does 300 flops at 50 flops/us by 6 us, the other
  // 500 at 100 flops/us: ends at 11 us.
  Harness h(2, Duration::from_us(4), 50);
  const TaskId k = h.graph.add_kernel(0, 0, "gemm", "op", work(800));
  h.graph.add_kernel(1, 1, "before", "op", work(200));
  h.all_reduce({0, 1});
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[k], at_us(11));
}

TEST(CommunicationSmSharing, AKernelThatStartsDuringTheCollectiveIsPricedOnTheSmsLeft) {
  // The collective holds 50 SMs from 0 to 10 us: two 100-flop kernels that start beside it
  // take 2 us each, not 1.
  Harness h(2, Duration::from_us(10), 50);
  h.all_reduce({0, 1});
  const TaskId first = h.graph.add_kernel(0, 0, "a", "op", work(100));
  const TaskId second = h.graph.add_kernel(0, 0, "b", "op", work(100));
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[first], at_us(2));
  EXPECT_EQ(ends[second], at_us(4));
}

TEST(CommunicationSmSharing, OnlyTheMembersGpusLoseSms) {
  Harness h(3, Duration::from_us(4), 50);
  h.all_reduce({0, 1});
  const TaskId member = h.graph.add_kernel(0, 0, "gemm", "op", work(100));
  const TaskId bystander = h.graph.add_kernel(2, 0, "gemm", "op", work(100));
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[member], at_us(2));
  EXPECT_EQ(ends[bystander], at_us(1));
}

TEST(CommunicationSmSharing, AMeasuredKernelKeepsItsMeasuredDuration) {
  Harness h(2, Duration::from_us(4), 50);
  h.all_reduce({0, 1});
  const TaskId k = h.graph.add_kernel(0, 0, "gemm", "op", work(100));
  h.graph.set_fixed_duration(k, Duration::from_us(3));
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[k], at_us(3));
}

TEST(CommunicationSmSharing, ANetworkThatHoldsNoSmsChangesNothing) {
  Harness h(2, Duration::from_us(4), 0);
  h.all_reduce({0, 1});
  const TaskId k = h.graph.add_kernel(0, 0, "gemm", "op", work(400));
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[k], at_us(4));
}

TEST(CommunicationSmSharing, PeaksScaleWithTheSmsLeftAndOneSmIsAlwaysLeft) {
  DeviceProfile gpu;
  gpu.sm_count = 132;
  gpu.peak_flops[static_cast<size_t>(DType::kBf16)] = FlopRate::teraflops(989.0);
  gpu.hbm_bandwidth = Bandwidth::gigabytes_per_second(3350.0);
  const DeviceProfile left = device_with_sms_held(gpu, 24);
  EXPECT_EQ(left.sm_count, 108);
  EXPECT_DOUBLE_EQ(left.peak(DType::kBf16).teraflops(), 989.0 * 108.0 / 132.0);
  EXPECT_EQ(left.hbm_bandwidth, gpu.hbm_bandwidth) << "the SMs left still reach all of HBM";
  EXPECT_EQ(device_with_sms_held(gpu, 500).sm_count, 1);
  EXPECT_EQ(device_with_sms_held(gpu, 0).sm_count, 132);
}

}  // namespace
}  // namespace upsim

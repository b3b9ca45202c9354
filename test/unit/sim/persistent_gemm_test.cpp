// GEMMs under a static persistent schedule (sim/gemm_launch.h, sim/executor.h): CTAs that find
// no SM free at launch wait and then run their whole share. Each test checks the exact
// picosecond a GEMM ends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/gemm_launch.h"
#include "test/unit/sim/sm_sharing_fixtures.h"

namespace upsim {
namespace {

using sm_sharing::at_us;
using sm_sharing::NoHostCost;
using sm_sharing::PerSmKernelCost;
using sm_sharing::SmHoldingNetwork;

struct Harness {
  Harness(Duration collective, int32_t sms, GemmSchedule schedule, int32_t carveout = 0)
      : network(collective, sms) {
    sm_sharing::set_up(graph, models, 2, {"compute", "comm"}, kernels, cpu, network);
    models.gemm_launch = GemmLaunch{schedule, carveout};
  }
  std::vector<Time> run() { return sm_sharing::run_ends(graph, models); }
  /// A collective over both ranks; rank 1 reaches it after `rank1_delay_flops` of work on its
  /// comm stream (1 us per 100 flops).
  void collective(double rank1_delay_flops = 0.0, bool gemm_sm_margin = false) {
    if (rank1_delay_flops > 0.0) graph.add_kernel(1, 1, "late", "op", work(rank1_delay_flops));
    CollectiveDesc desc{CollectiveKind::kAllGather, {0, 1}, 1024, {}};
    if (gemm_sm_margin) {
      desc.sms = network_sms();
      desc.gemm_sm_margin = true;
    }
    const CollectiveId c = graph.add_collective_group(std::move(desc), "all_gather#0");
    for (RankId r : {0u, 1u})
      graph.add_collective(r, 1, c, "nccl:all_gather");
  }
  int32_t network_sms() const {
    return network.communication_sms(CollectiveDesc{CollectiveKind::kAllGather, {0, 1}, 1024, {}},
                                     0);
  }
  /// Rank 0's compute stream: 75 flops of other work (1 us on the 75 SMs a held collective
  /// leaves), then a GEMM of `ctas` CTAs and `flops` work (4 us on all 100 SMs for 400).
  /// Returns the GEMM.
  TaskId gemm_after_one_us(int64_t ctas, double flops) {
    graph.add_kernel(0, 0, "before", "op", work(75.0));
    KernelDesc g;
    g.cls = KernelClass::kGemm;
    g.dtype = DType::kBf16;
    g.m = ctas;
    g.n = 1;
    g.k = 1;
    g.flops = flops;
    return graph.add_kernel(0, 0, "gemm", "op", g);
  }
  static KernelDesc work(double flops) { return sm_sharing::work(flops); }
  TaskGraph graph;
  PerSmKernelCost kernels;
  NoHostCost cpu;
  SmHoldingNetwork network;
  ModelSet models;
};

TEST(PersistentGemm, CtasThatFindNoSmRunAfterTheFirstOnes) {
  // The all-gather moves data on 25 SMs from 0 to 10 us. The GEMM launches at 1 us with 100
  // CTAs of 4 us each: 75 run from 1 to 5 us, the other 25 from 5 to 9 us.
  Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent);
  h.collective();
  const TaskId gemm = h.gemm_after_one_us(100, 400);
  EXPECT_EQ(h.run()[gemm], at_us(9));
}

TEST(PersistentGemm, TheRunCountsTheSplitGemmsAndTheTimeTheirWaitingCtasAdded) {
  Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent);
  h.collective();
  h.gemm_after_one_us(100, 400);
  h.graph.seal();
  Engine engine;
  GraphExecutor exec(engine, h.graph, h.models);
  const RunStats stats = exec.run();
  EXPECT_EQ(stats.persistent_gemms_split, 1U);
  EXPECT_EQ(stats.persistent_gemm_split_time, Duration::from_us(4)) << "9 us, not 5";
}

TEST(PersistentGemm, WaitingCtasStartWhenTheCollectiveEnds) {
  // The all-gather ends at 3 us: the 25 waiting CTAs run from 3 to 7 us.
  Harness h(Duration::from_us(3), 25, GemmSchedule::kStaticPersistent);
  h.collective();
  const TaskId gemm = h.gemm_after_one_us(100, 400);
  EXPECT_EQ(h.run()[gemm], at_us(7));
}

TEST(PersistentGemm, PerTileAndDynamicSchedulesShareTheSmsInProportion) {
  // The executor's fluid share: 400 flops at 75 flops / us take 5.333 us from 1 us (the
  // collective lasts until 10 us).
  for (const GemmSchedule schedule : {GemmSchedule::kPerTile, GemmSchedule::kDynamicPersistent}) {
    Harness h(Duration::from_us(10), 25, schedule);
    h.collective();
    const TaskId gemm = h.gemm_after_one_us(100, 400);
    EXPECT_EQ(h.run()[gemm], at_us(1) + Duration::from_us_f(400.0 / 75.0))
        << gemm_schedule_name(schedule);
  }
}

TEST(PersistentGemm, AGemmWhoseCtasAllFindAnSmIsNotSlowed) {
  // 60 CTAs fit beside the 25 SMs held: their 4 us share is not stretched.
  Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent);
  h.collective();
  const TaskId gemm = h.gemm_after_one_us(60, 400);
  EXPECT_EQ(h.run()[gemm], at_us(5));
}

TEST(PersistentGemm, MembersWaitingForTheirPeersDoNotSplitIt) {
  // Rank 1 reaches the all-gather at 20 us: at 1 us nothing moves data, so all 100 CTAs run.
  Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent);
  h.collective(2000.0);
  const TaskId gemm = h.gemm_after_one_us(100, 400);
  EXPECT_EQ(h.run()[gemm], at_us(5));
}

TEST(PersistentGemm, ACollectiveThatStartsLaterDoesNotSlowResidentCtas) {
  // Rank 1 arrives at 2 us; the GEMM launched at 1 us holds its SMs until 5 us.
  Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent);
  h.collective(200.0);
  const TaskId gemm = h.gemm_after_one_us(100, 400);
  EXPECT_EQ(h.run()[gemm], at_us(5));
}

TEST(PersistentGemm, ACarveoutAvoidsTheSecondBatchButCostsItsSms) {
  // With 25 SMs carved out the GEMM launches 75 CTAs on 75 SMs: 5.333 us, with or without the
  // collective beside it; without the carveout and alone it takes 4 us.
  for (const bool with_collective : {true, false}) {
    Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent, 25);
    if (with_collective) h.collective();
    const TaskId gemm = h.gemm_after_one_us(100, 400);
    const Time start = with_collective ? at_us(1) : Time::zero() + Duration::from_us_f(0.75);
    EXPECT_EQ(h.run()[gemm], start + Duration::from_us_f(400.0 / 75.0)) << with_collective;
  }
}

TEST(PersistentGemm, TransformerEnginesMarginKeepsTheGemmInOneBatch) {
  // A userbuffers collective whose GEMMs leave its 25 SMs free (gemm_sm_margin): 75 CTAs.
  Harness h(Duration::from_us(10), 25, GemmSchedule::kStaticPersistent);
  h.collective(0.0, true);
  const TaskId gemm = h.gemm_after_one_us(100, 400);
  EXPECT_EQ(h.run()[gemm], at_us(1) + Duration::from_us_f(400.0 / 75.0));
}

TEST(PersistentGemm, GridArithmetic) {
  const PersistentGrid split = persistent_grid(1024, 132, 0, 24);
  EXPECT_EQ(split.grid, 132);
  EXPECT_EQ(split.resident, 108);
  EXPECT_EQ(split.deferred, 24);
  EXPECT_EQ(persistent_duration_ps(split, 1000), 2000);
  const PersistentGrid carved = persistent_grid(1024, 132, 24, 24);
  EXPECT_EQ(carved.grid, 108);
  EXPECT_EQ(carved.deferred, 0);
  EXPECT_EQ(persistent_duration_ps(carved, 1000), 1000);
  const PersistentGrid small = persistent_grid(64, 132, 0, 24);
  EXPECT_EQ(small.grid, 64);
  EXPECT_EQ(small.deferred, 0);
  // More held than half the SMs: three batches.
  EXPECT_EQ(persistent_duration_ps(persistent_grid(132, 132, 0, 80), 1000), 3000);
}

TEST(PersistentGemm, DefaultScheduleFollowsTheComputeCapability) {
  EXPECT_EQ(default_gemm_schedule(70), GemmSchedule::kPerTile);
  EXPECT_EQ(default_gemm_schedule(80), GemmSchedule::kPerTile);
  EXPECT_EQ(default_gemm_schedule(90), GemmSchedule::kStaticPersistent);
  EXPECT_EQ(default_gemm_schedule(100), GemmSchedule::kDynamicPersistent);
  EXPECT_EQ(default_gemm_schedule(0), GemmSchedule::kPerTile);
  for (const GemmSchedule s : {GemmSchedule::kPerTile, GemmSchedule::kStaticPersistent,
                               GemmSchedule::kDynamicPersistent}) {
    EXPECT_EQ(gemm_schedule_from_name(gemm_schedule_name(s)), s);
  }
  EXPECT_FALSE(gemm_schedule_from_name("persistent"));
}

}  // namespace
}  // namespace upsim

// The run summary's breakdown on hand-timed graphs: every category checked to the picosecond.
#include "sim/export/run_summary.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/executor.h"

namespace upsim {
namespace {

constexpr Duration us(int64_t v) {
  return Duration::from_us(v);
}

class PhaseCpuCost final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& op) const override {
    return op.phase == HostPhase::kLaunch ? us(4) : us(10);
  }
};
class FlopsAsMicroseconds final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    return Duration::from_us_f(k.flops);
  }
};
class SevenMicroseconds final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc&) const override { return us(7); }
  Duration transfer_duration(const TransferDesc&) const override { return us(1); }
};

KernelDesc lasting(double microseconds) {
  KernelDesc k;
  k.flops = microseconds;
  return k;
}

RunSummary run(TaskGraph& g, uint32_t warmup) {
  g.seal();
  PhaseCpuCost cpu;
  FlopsAsMicroseconds kernels;
  SevenMicroseconds collectives;
  AnalyticalNetwork network(collectives);
  ModelSet models{&kernels, &cpu, &network, std::vector<DeviceProfile>(g.rank_count()), {}};
  Engine engine;
  GraphExecutor exec(engine, g, models);
  RunSummaryObserver summary(warmup);
  exec.add_observer(&summary);
  exec.run();
  return summary.summary();
}

TEST(RunSummary, HostGapShowsAsCpuBoundIdleAfterTheWarmupIteration) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  g.add_iteration_mark(0, 0, 0);
  const TaskId k0 = g.add_kernel(0, 0, "k0", "op", lasting(2));
  g.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k0);     // 0..4, k0 4..6
  g.add_iteration_mark(0, 0, 1);                           // at 4
  g.add_cpu_op(0, 0, "slow_host_op", HostPhase::kOpBody);  // 4..14
  const TaskId k1 = g.add_kernel(0, 0, "k1", "op", lasting(2));
  g.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k1);  // 14..18, k1 18..20
  const RunSummary s = run(g, 1);
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankBreakdown& r = s.ranks[0];
  EXPECT_EQ(r.measured_iterations, 1u);
  EXPECT_EQ(r.window, us(16));
  EXPECT_EQ(s.predicted_iteration_time, us(16));
  EXPECT_EQ(r.compute_busy, us(4));
  EXPECT_EQ(r.cpu_bound_idle, us(12));
  EXPECT_EQ(r.other_idle, us(0));
  EXPECT_EQ(r.kernels, 2u);
}

TEST(RunSummary, RendezvousWaitAndExposedCommunication) {
  TaskGraph h;
  for (int r = 0; r < 2; ++r)
    h.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"comm"}});
  const CollectiveId ar =
      h.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 64, {}}, "ar");
  for (RankId r = 0; r < 2; ++r) {
    h.add_iteration_mark(r, 0, 0);
    h.add_kernel(r, 0, "k", "op", lasting(r == 0 ? 10 : 30));
    h.add_collective(r, 0, ar, "nccl:all_reduce");
  }
  const RunSummary s = run(h, 0);
  const RankBreakdown& fast = s.ranks[0];
  EXPECT_EQ(fast.window, us(37));
  EXPECT_EQ(fast.compute_busy, us(10));
  EXPECT_EQ(fast.rendezvous_wait, us(20));
  EXPECT_EQ(fast.communication, us(7));
  EXPECT_EQ(fast.exposed_communication, us(7));
  EXPECT_EQ(fast.cpu_bound_idle, us(0));
  EXPECT_EQ(fast.other_idle, us(0));
  const RankBreakdown& slow = s.ranks[1];
  EXPECT_EQ(slow.rendezvous_wait, us(0));
  EXPECT_EQ(slow.compute_busy, us(30));
  EXPECT_EQ(s.predicted_iteration_time, us(37));
  const std::string text = format_run_summary(s);
  EXPECT_NE(text.find("predicted iteration time: 0.0370 ms"), std::string::npos) << text;
}

// A large run's table shows its slowest ranks (in rank order) and one line on the others.
TEST(RunSummary, TableOfManyRanksShowsTheSlowestAndSummarisesTheRest) {
  RunSummary s;
  s.iterations = 1;
  for (int r = 0; r < 6; ++r) {
    RankBreakdown b;
    b.name = "rank " + std::to_string(r);
    b.measured_iterations = 1;
    b.iteration_time = Duration::from_us(100 + 10 * ((r * 5) % 6));  // 100, 150, 140, ..., 110
    b.window = b.iteration_time;
    b.compute_busy = b.iteration_time;
    s.ranks.push_back(b);
  }
  s.predicted_iteration_time = Duration::from_us(150);
  const std::string all = format_run_summary(s);
  const std::string some = format_run_summary(s, 2);
  for (int r = 0; r < 6; ++r)
    EXPECT_NE(all.find("rank " + std::to_string(r) + " "), std::string::npos) << all;
  // The two slowest: rank 1 (150 us) and rank 2 (140 us); the others run 100 to 130 us.
  std::vector<std::string> shown;
  for (int r = 0; r < 6; ++r) {
    if (some.find("rank " + std::to_string(r) + " ") != std::string::npos) {
      shown.push_back("rank " + std::to_string(r));
    }
  }
  EXPECT_EQ(shown, (std::vector<std::string>{"rank 1", "rank 2"})) << some;
  EXPECT_NE(some.find("... 4 more ranks, iteration 0.1000 to 0.1300 ms"), std::string::npos)
      << some;
  EXPECT_EQ(all.find("more ranks"), std::string::npos);
}

TEST(RunSummary, TooFewIterationsForTheWarmupIsAnError) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  g.add_iteration_mark(0, 0, 0);
  EXPECT_THROW(run(g, 1), std::runtime_error);
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

TEST(RunSummary, LinkBytesAndBusyTimeIntegrateTheReportedRates) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  g.add_iteration_mark(0, 0, 0);
  g.seal();
  RunSummaryObserver obs(0);
  obs.on_run_begin(g);
  const std::vector<LinkInfo> links{{"a -> b (nvlink3)", Bandwidth::gigabytes_per_second(100)},
                                    {"b -> a (nvlink3)", Bandwidth::gigabytes_per_second(100)},
                                    {"idle", Bandwidth::gigabytes_per_second(1)}};
  obs.on_links_declared(links);
  obs.on_task_begin(0, Time::zero());
  obs.on_task_end(0, Time::zero());
  // Link 0: 50 GB/s for 10 us, idle 10 us, 100 GB/s for 5 us -> 1 MB over 15 us busy.
  obs.on_link_rate(0, Time::zero(), Bandwidth::gigabytes_per_second(50), 1);
  obs.on_link_rate(0, Time::zero() + Duration::from_us(10), Bandwidth{}, 0);
  obs.on_link_rate(0, Time::zero() + Duration::from_us(20), Bandwidth::gigabytes_per_second(100),
                   2);
  // Link 1 runs until the end of the run (30 us) at 10 GB/s from 25 us: 50 KB over 5 us.
  obs.on_link_rate(1, Time::zero() + Duration::from_us(25), Bandwidth::gigabytes_per_second(10), 1);
  obs.on_link_rate(0, Time::zero() + Duration::from_us(25), Bandwidth{}, 0);
  obs.on_run_end(Time::zero() + Duration::from_us(30));
  const RunSummary s = obs.summary();
  ASSERT_EQ(s.links.size(), 2u) << "the idle link is not listed";
  EXPECT_EQ(s.links[0].name, "a -> b (nvlink3)");
  EXPECT_NEAR(s.links[0].bytes, 1.0e6, 1e-3);
  EXPECT_EQ(s.links[0].busy, Duration::from_us(15));
  EXPECT_NEAR(s.links[1].bytes, 5.0e4, 1e-3);
  EXPECT_EQ(s.links[1].busy, Duration::from_us(5));
  EXPECT_NE(format_run_summary(s).find("busiest links (2 of 2 used"), std::string::npos)
      << format_run_summary(s);
}

TEST(RunSummary, ABatchOfLinkChangesCountsAsEachChangeInOrder) {
  // The flow network reports a recomputation's link changes in one on_link_rates call; the run
  // summary must integrate them as it integrates single on_link_rate calls.
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  g.add_iteration_mark(0, 0, 0);
  g.seal();
  const std::vector<LinkInfo> links{{"a -> b", Bandwidth::gigabytes_per_second(100)},
                                    {"b -> a", Bandwidth::gigabytes_per_second(100)},
                                    {"c -> d", Bandwidth::gigabytes_per_second(100)}};
  const auto at = [](int64_t us) { return Time::zero() + Duration::from_us(us); };
  const auto gbs = [](double v) { return Bandwidth::gigabytes_per_second(v); };
  // (time, changes at that time)
  const std::vector<std::pair<int64_t, std::vector<LinkRateChange>>> batches{
      {0, {{0, 1, gbs(50)}, {2, 1, gbs(25)}}},
      {10, {{0, 0, Bandwidth{}}, {1, 2, gbs(80)}, {2, 2, gbs(40)}}},
      {20, {{1, 1, gbs(10)}, {0, 1, gbs(100)}}},
      {25, {{2, 0, Bandwidth{}}}}};
  RunSummaryObserver single(0);
  RunSummaryObserver batched(0);
  for (RunSummaryObserver* obs : {&single, &batched}) {
    obs->on_run_begin(g);
    obs->on_links_declared(links);
    obs->on_task_begin(0, Time::zero());
    obs->on_task_end(0, Time::zero());
  }
  for (const auto& [us, changes] : batches) {
    for (const LinkRateChange& c : changes)
      single.on_link_rate(c.link, at(us), c.rate, c.flows);
    batched.on_link_rates(at(us), changes);
  }
  single.on_run_end(at(30));
  batched.on_run_end(at(30));
  const RunSummary a = single.summary();
  const RunSummary b = batched.summary();
  ASSERT_EQ(a.links.size(), 3u);
  ASSERT_EQ(b.links.size(), 3u);
  for (size_t i = 0; i < a.links.size(); ++i) {
    EXPECT_EQ(b.links[i].name, a.links[i].name);
    EXPECT_EQ(b.links[i].bytes, a.links[i].bytes) << a.links[i].name;
    EXPECT_EQ(b.links[i].busy, a.links[i].busy) << a.links[i].name;
  }
  // In all: a -> b 0.5 + 1 MB, b -> a 0.8 + 0.1 MB, c -> d 0.25 + 0.6 MB (GB/s x us = kB).
  EXPECT_NEAR(b.links[0].bytes + b.links[1].bytes + b.links[2].bytes,
              50e3 * 10 + 80e3 * 10 + 10e3 * 10 + 100e3 * 10 + 25e3 * 10 + 40e3 * 15, 1e-3);
}

/// Records the single-link callbacks it hears.
class LinkRateLog final : public Observer {
 public:
  void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) override {
    log.push_back({link, at, rate.bytes_per_second(), flows});
  }
  struct Heard {
    uint32_t link;
    Time at;
    double rate;
    uint32_t flows;
    bool operator==(const Heard&) const = default;
  };
  std::vector<Heard> log;
};

TEST(ObserverLinkRates, TheDefaultHearsEachChangeThroughOnLinkRateInOrder) {
  LinkRateLog obs;
  const std::vector<LinkRateChange> changes{{7, 2, Bandwidth::bytes_per_second(5.0)},
                                            {3, 0, Bandwidth{}},
                                            {7, 1, Bandwidth::bytes_per_second(2.5)}};
  const Time t = Time::zero() + Duration::from_us(4);
  static_cast<Observer&>(obs).on_link_rates(t, changes);
  EXPECT_EQ(obs.log,
            (std::vector<LinkRateLog::Heard>{{7, t, 5.0, 2}, {3, t, 0.0, 0}, {7, t, 2.5, 1}}));
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

/// compute + exposed comm + bubble + rendezvous wait + CPU-bound idle + other idle = window, and
/// the per-dimension shares add up to the exposed communication, to the picosecond.
void expect_accounted(const RankBreakdown& r) {
  Duration by_dim = Duration::zero();
  for (Duration d : r.exposed_by_dim)
    by_dim += d;
  EXPECT_EQ(by_dim, r.exposed_communication) << r.name;
  EXPECT_EQ(r.compute_busy + r.exposed_communication + r.bubble + r.rendezvous_wait +
                r.cpu_bound_idle + r.other_idle,
            r.window)
      << r.name;
}

size_t dim(ParallelDim d) {
  return static_cast<size_t>(d);
}

/// A two-rank collective of `kind` in dimension `d`.
CollectiveDesc in_dim(CollectiveKind kind, ParallelDim d) {
  CollectiveDesc c{kind, {0, 1}, 64, {}};
  c.parallel_dim = d;
  return c;
}

// The dimension is what the collective states, never read from its name: a "tp:" name in no
// dimension is other, and a plain name in the tensor dimension is tp.
TEST(RunSummaryParallelDims, TheCollectiveStatesItsDimensionItsNameDoesNot) {
  TaskGraph g;
  for (int r = 0; r < 2; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute"}});
  const CollectiveId named = g.add_collective_group(
      CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 64, {}}, "tp:all_reduce");
  const CollectiveId stated =
      g.add_collective_group(in_dim(CollectiveKind::kAllReduce, ParallelDim::kTensor), "barrier");
  for (RankId r = 0; r < 2; ++r) {
    g.add_iteration_mark(r, 0, 0);
    g.add_collective(r, 0, named, "nccl:all_reduce");
    g.add_collective(r, 0, stated, "nccl:all_reduce");
  }
  const RunSummary s = run(g, 0);
  EXPECT_EQ(s.parallel_dims, (1u << dim(ParallelDim::kTensor)) | (1u << dim(ParallelDim::kOther)));
  EXPECT_EQ(s.ranks[0].exposed_by_dim[dim(ParallelDim::kTensor)], us(7));
  EXPECT_EQ(s.ranks[0].exposed_by_dim[dim(ParallelDim::kOther)], us(7));
  EXPECT_EQ(parallel_dim_name(ParallelDim::kData), "dp");
}

// Two pipeline stages: stage 1 waits 20 us in a pp send/recv for stage 0's slower forward.
TEST(RunSummaryParallelDims, PipelineRendezvousWaitIsTheBubble) {
  TaskGraph g;
  for (int r = 0; r < 2; ++r)
    g.add_rank(RankInfo{
        "rank " + std::to_string(r) + " (stage " + std::to_string(r) + ")", 1, {"compute"}});
  const CollectiveId p2p = g.add_collective_group(
      in_dim(CollectiveKind::kSendRecv, ParallelDim::kPipeline), "pp:send_recv");
  for (RankId r = 0; r < 2; ++r) {
    g.add_iteration_mark(r, 0, 0);
    g.add_kernel(r, 0, "forward", "op", lasting(r == 0 ? 30 : 10));
    g.add_collective(r, 0, p2p, "pp:send_recv");
  }
  const RunSummary s = run(g, 0);
  EXPECT_EQ(s.parallel_dims, 1u << dim(ParallelDim::kPipeline));
  const RankBreakdown& waiting = s.ranks[1];
  EXPECT_EQ(waiting.window, us(37));
  EXPECT_EQ(waiting.bubble, us(20));
  EXPECT_EQ(waiting.rendezvous_wait, us(0));
  EXPECT_EQ(waiting.exposed_by_dim[dim(ParallelDim::kPipeline)], us(7));
  EXPECT_EQ(s.ranks[0].bubble, us(0));
  for (const RankBreakdown& r : s.ranks)
    expect_accounted(r);
  const std::string text = format_run_summary(s);
  EXPECT_NE(text.find("exposed pp"), std::string::npos) << text;
  EXPECT_NE(text.find("bubble"), std::string::npos) << text;
  EXPECT_EQ(text.find("exposed tp"), std::string::npos) << text;
  EXPECT_NE(text.find("0.0200  54.1%"), std::string::npos) << text;  // stage 1's bubble
}

// A tensor-parallel all-reduce nobody overlaps is exposed tp; a data-parallel one on a second
// stream is exposed dp only where the tp one is not running; a plain wait on an unnamed
// collective stays rendezvous wait.
TEST(RunSummaryParallelDims, ExposedCommunicationSplitsByDimension) {
  TaskGraph g;
  for (int r = 0; r < 2; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute", "dp"}});
  const CollectiveId tp = g.add_collective_group(
      in_dim(CollectiveKind::kAllReduce, ParallelDim::kTensor), "tp:all_reduce");
  const CollectiveId dp = g.add_collective_group(
      in_dim(CollectiveKind::kAllReduce, ParallelDim::kData), "dp:all_reduce");
  const CollectiveId other =
      g.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 64, {}}, "barrier");
  for (RankId r = 0; r < 2; ++r) {
    g.add_iteration_mark(r, 0, 0);
    g.add_collective(r, 0, tp, "tp:all_reduce");  // 0..7
    g.add_kernel(r, 1, "k", "op", lasting(3));    // 0..3
    g.add_collective(r, 1, dp, "dp:all_reduce");  // 3..10
    g.add_kernel(r, 0, "k", "op", lasting(r == 0 ? 10 : 20));
    g.add_collective(r, 0, other, "barrier");  // 17..27 on rank 0 (waits until 27), 27..34
  }
  const RunSummary s = run(g, 0);
  const RankBreakdown& r0 = s.ranks[0];
  EXPECT_EQ(r0.window, us(34));
  EXPECT_EQ(r0.compute_busy, us(3 + 10));
  EXPECT_EQ(r0.exposed_by_dim[dim(ParallelDim::kTensor)], us(4));  // 3..7
  EXPECT_EQ(r0.exposed_by_dim[dim(ParallelDim::kData)], us(0));    // under compute from 7 on
  EXPECT_EQ(r0.exposed_by_dim[dim(ParallelDim::kOther)], us(7));
  EXPECT_EQ(r0.bubble, us(0));
  EXPECT_EQ(r0.rendezvous_wait, us(10));
  for (const RankBreakdown& r : s.ranks)
    expect_accounted(r);
  const std::string text = format_run_summary(s);
  for (const char* header : {"exposed tp", "exposed dp", "exposed other", "bubble"})
    EXPECT_NE(text.find(header), std::string::npos) << header << "\n" << text;
  EXPECT_EQ(text.find("exposed pp"), std::string::npos) << text;
}

TEST(RunSummaryParallelDims, UnnamedCollectivesKeepTheClassicTable) {
  TaskGraph g;
  for (int r = 0; r < 2; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"comm"}});
  const CollectiveId ar =
      g.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 64, {}}, "ar");
  for (RankId r = 0; r < 2; ++r) {
    g.add_iteration_mark(r, 0, 0);
    g.add_kernel(r, 0, "k", "op", lasting(r == 0 ? 10 : 30));
    g.add_collective(r, 0, ar, "nccl:all_reduce");
  }
  const RunSummary s = run(g, 0);
  EXPECT_EQ(s.parallel_dims, 1u << dim(ParallelDim::kOther));
  EXPECT_EQ(s.ranks[0].exposed_by_dim[dim(ParallelDim::kOther)], us(7));
  for (const RankBreakdown& r : s.ranks)
    expect_accounted(r);
  const std::string text = format_run_summary(s);
  EXPECT_EQ(text.find("bubble"), std::string::npos) << text;
  EXPECT_EQ(text.find("exposed other"), std::string::npos) << text;
}

}  // namespace
}  // namespace upsim

// The steady-state check on hand-made summaries, the coupled groups of a graph, and the search
// (run_to_steady_state) on made-up workloads whose iteration times settle late or never.
#include "tools/steady_state.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/config/config_error.h"

namespace upsim::cli {
namespace {

constexpr Duration us(int64_t v) {
  return Duration::from_us(v);
}

/// A summary of ranks with the given iteration times (warm-up `warmup`, the rest measured).
RunSummary summary_of(const std::vector<std::vector<Duration>>& times, uint32_t warmup) {
  RunSummary s;
  s.warmup_iterations = warmup;
  for (size_t r = 0; r < times.size(); ++r) {
    RankBreakdown b;
    b.name = "rank " + std::to_string(r);
    b.iteration_times = times[r];
    b.measured_iterations = static_cast<uint32_t>(times[r].size()) - warmup;
    for (size_t k = warmup; k < times[r].size(); ++k)
      b.window += times[r][k];
    b.iteration_time = b.window / b.measured_iterations;
    s.ranks.push_back(b);
  }
  return s;
}

TEST(SteadyStateCheck, EqualIterationsOnCoupledRanksAreSteady) {
  const SteadyStateCheck c = check_steady_state(
      summary_of({{us(900), us(1000), us(1000)}, {us(50), us(1000), us(1000)}}, 1), {0, 0});
  EXPECT_TRUE(c.steady);
  EXPECT_EQ(c.difference, 0.0);
  EXPECT_EQ(c.where, "");
}

TEST(SteadyStateCheck, ARanksMeasuredIterationsThatDifferAreNotSteady) {
  // 1000 and 1002 us: 0.2% apart, above the 0.1% tolerance.
  const SteadyStateCheck c = check_steady_state(summary_of({{us(1000), us(1002)}}, 0), {0});
  EXPECT_FALSE(c.steady);
  EXPECT_NEAR(c.difference, 2.0 / 1002.0, 1e-12);
  EXPECT_EQ(c.where, "rank 0: 1.0000 to 1.0020 ms over iterations 1..2");
  // Within the tolerance: 0.05%.
  EXPECT_TRUE(check_steady_state(summary_of({{us(10000), us(10005)}}, 0), {0}).steady);
}

// Iterations that alternate by design (period 2: torchtitan's per-op checkpointing saves other
// matmuls every second iteration) are steady when each pair takes what the pair before took.
TEST(SteadyStateCheck, AlternatingIterationsAreSteadyWithPeriodTwoOnly) {
  const RunSummary alternating = summary_of({{us(1000), us(1200), us(1000), us(1200)}}, 2);
  EXPECT_FALSE(check_steady_state(alternating, {0}).steady);
  const SteadyStateCheck c = check_steady_state(alternating, {0}, kSteadyStateTolerance, 2);
  EXPECT_TRUE(c.steady);
  EXPECT_EQ(c.difference, 0.0);
  // The second pair 0.5% slower than the first: not steady.
  const RunSummary drifting = summary_of({{us(1000), us(1200), us(1000), us(1211)}}, 2);
  EXPECT_FALSE(check_steady_state(drifting, {0}, kSteadyStateTolerance, 2).steady);
  // Two iterations cannot show a period of 2 repeating.
  EXPECT_FALSE(
      check_steady_state(summary_of({{us(1000), us(1200)}}, 0), {0}, kSteadyStateTolerance, 2)
          .steady);
}

// The reported case: each rank repeats its own time, but coupled ranks run at different paces,
// so the faster one's wait at the collectives is still growing.
TEST(SteadyStateCheck, CoupledRanksAtDifferentPacesAreNotSteadyUncoupledOnesAre) {
  const RunSummary s = summary_of({{us(1000), us(1000)}, {us(1010), us(1010)}}, 0);
  const SteadyStateCheck coupled = check_steady_state(s, {0, 0});
  EXPECT_FALSE(coupled.steady);
  EXPECT_EQ(coupled.where, "rank 0 takes 1.0000 ms per iteration, rank 1 1.0100 ms");
  EXPECT_TRUE(check_steady_state(s, {0, 1}).steady);
}

TEST(SteadyStateCheck, CoupledGroupsJoinRanksThroughSharedCollectives) {
  TaskGraph g;
  for (int r = 0; r < 5; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"comm"}});
  const CollectiveId a =
      g.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {0, 2}, 8, {}}, "a");
  const CollectiveId b =
      g.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {2, 4}, 8, {}}, "b");
  g.add_collective(0, 0, a, "x");
  g.add_collective(2, 0, a, "x");
  g.add_collective(2, 0, b, "x");
  g.add_collective(4, 0, b, "x");
  g.seal();
  EXPECT_EQ(coupled_rank_groups(g), (std::vector<RankId>{0, 1, 0, 3, 0}));
}

/// Two ranks that meet at an all-reduce every iteration; iteration `it` of rank 0 spends
/// `slow_us(it)` us on the host before it, rank 1 10 us (fixed durations, no model).
class SettlingWorkload final : public Workload {
 public:
  explicit SettlingWorkload(int64_t (*slow_us)(uint32_t), uint32_t period = 1)
      : slow_us_(slow_us), period_(period) {}

  WorkloadBuild build(const WorkloadPlatform& platform, TaskGraph& graph) override {
    for (uint32_t r = 0; r < 2; ++r)
      graph.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"comm"}});
    for (uint32_t it = 0; it < platform.iterations; ++it) {
      const CollectiveId ar = graph.add_collective_group(
          CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 8, {}}, "ar");
      for (RankId r = 0; r < 2; ++r) {
        graph.add_iteration_mark(r, 0, it);
        const TaskId host = graph.add_cpu_op(r, 0, "host", HostPhase::kOpBody);
        graph.set_fixed_duration(host, us(r == 0 ? slow_us_(it) : 10));
        const TaskId c = graph.add_collective(r, 0, ar, "nccl:all_reduce");
        graph.set_fixed_duration(c, us(1));
        const TaskId launch = graph.add_launch(r, 0, "ncclAllReduce", "nccl:all_reduce", 0, c);
        graph.set_fixed_duration(launch, us(1));
        graph.add_host_sync(r, 0, kAllStreams, "sync");
      }
    }
    WorkloadBuild b;
    b.iterations = platform.iterations;
    b.warmup_iterations = platform.warmup_iterations;
    b.iteration_period = period_;
    return b;
  }

 private:
  int64_t (*slow_us_)(uint32_t);
  uint32_t period_;
};

SteadyRun run_settling(int64_t (*slow_us)(uint32_t), const std::string& simulation = "",
                       uint32_t period = 1) {
  WorkloadRegistry registry;
  registry.add("settling", [slow_us, period](const ConfigNode&) {
    return std::make_unique<SettlingWorkload>(slow_us, period);
  });
  const std::string configs = UPSIM_CONFIGS_DIR;
  ConfigDocument doc = ConfigDocument::parse_string(
      "platform:\n"
      "  gpus: 2\n"
      "  gpu: " +
          configs +
          "/hardware/a100_sxm4_40gb.yaml\n"
          "  kernels: {model: roofline}\n"
          "  host: {model: host_overheads, overheads: " +
          configs +
          "/host/v100_pytorch_kineto.yaml}\n"
          "  interconnect: {model: alpha_beta, link: nvlink3}\n"
          "workload: {model: settling}\n" +
          simulation,
      "scenario.yaml");
  return run_to_steady_state(doc, {}, registry, {});
}

// Rank 0's host work shrinks until iteration 6, then stays: the search stops at 8 iterations,
// the first attempt whose last two iterations are both settled, and reports the steady time.
TEST(SteadyStateSearch, GrowsTheIterationsUntilTheLastTwoAgree) {
  const SteadyRun run =
      run_settling([](uint32_t it) -> int64_t { return it < 5 ? 30 - 4 * it : 10; });
  EXPECT_EQ(run.attempts, (std::vector<uint32_t>{2, 4, 8}));
  EXPECT_TRUE(run.check.steady);
  EXPECT_EQ(run.scenario.iterations, 8u);
  EXPECT_EQ(run.scenario.warmup_iterations, 6u);
  EXPECT_NE(run.scenario.header.find("steady state after 8 iterations (warm-up 6)"),
            std::string::npos)
      << run.scenario.header;
  EXPECT_TRUE(run.scenario.warnings.empty());
  // The steady iteration: 10 us of host work, the launch, the collective, the sync.
  const SteadyRun explicit_long =
      run_settling([](uint32_t it) -> int64_t { return it < 5 ? 30 - 4 * it : 10; },
                   "simulation: {iterations: 20, warmup_iterations: 18}\n");
  EXPECT_EQ(run.summary.predicted_iteration_time, explicit_long.summary.predicted_iteration_time);
}

// Iterations that repeat every 3 by design (a DLRM 2D run's sync every third step): the search
// learns the period from its first attempt, then measures one whole period over two, and the
// prediction is the period's mean, as a long explicit run of whole periods gives it. An explicit
// run whose measured iterations are no whole number of periods is warned about.
TEST(SteadyStateSearch, APeriodicWorkloadIsMeasuredOverAWholePeriod) {
  const auto every_third = [](uint32_t it) -> int64_t { return it % 3 == 0 ? 40 : 10; };
  const SteadyRun run = run_settling(every_third, "", 3);
  EXPECT_EQ(run.attempts, (std::vector<uint32_t>{2, 6}));
  EXPECT_TRUE(run.check.steady);
  EXPECT_EQ(run.scenario.warmup_iterations, 3u);
  EXPECT_NE(run.scenario.header.find("iterations 4..6 take what the three before took"),
            std::string::npos)
      << run.scenario.header;
  EXPECT_TRUE(run.scenario.warnings.empty());
  const SteadyRun whole_periods =
      run_settling(every_third, "simulation: {iterations: 30, warmup_iterations: 21}\n", 3);
  EXPECT_EQ(run.summary.predicted_iteration_time, whole_periods.summary.predicted_iteration_time);
  EXPECT_TRUE(whole_periods.scenario.warnings.empty());
  const SteadyRun partial =
      run_settling(every_third, "simulation: {iterations: 30, warmup_iterations: 28}\n", 3);
  ASSERT_FALSE(partial.scenario.warnings.empty());
  EXPECT_NE(partial.scenario.warnings.back().find("no whole number of periods"), std::string::npos)
      << partial.scenario.warnings.back();
  // The check: the last three against the three before.
  const RunSummary repeating =
      summary_of({{us(1000), us(1000), us(4000), us(1000), us(1000), us(4000)}}, 3);
  EXPECT_TRUE(check_steady_state(repeating, {0}, kSteadyStateTolerance, 3).steady);
  EXPECT_FALSE(check_steady_state(repeating, {0}, kSteadyStateTolerance, 4).steady);
}

// Rank 0's host work grows every iteration: no steady state in 32 iterations, and a warning
// that says so with the difference seen.
TEST(SteadyStateSearch, WarnsWhenTheCapIsReachedWithoutSteadyState) {
  const SteadyRun run = run_settling([](uint32_t it) -> int64_t { return 10 + 2 * it; });
  EXPECT_EQ(run.attempts, (std::vector<uint32_t>{2, 4, 8, 16, 32}));
  EXPECT_FALSE(run.check.steady);
  ASSERT_EQ(run.scenario.warnings.size(), 1u);
  const std::string& w = run.scenario.warnings[0];
  EXPECT_NE(w.find("no steady state after 32 iterations"), std::string::npos) << w;
  EXPECT_NE(w.find("rank 0"), std::string::npos) << w;
  EXPECT_NE(run.scenario.description.find("warning: no steady state after 32"), std::string::npos);
  EXPECT_NE(run.scenario.header.find("steady state: not reached in 32 iterations"),
            std::string::npos);
}

// An explicit `iterations` is honoured, and a transient warned about.
TEST(SteadyStateSearch, ExplicitIterationsRunOnceAndWarnWhenNotSteady) {
  const SteadyRun run =
      run_settling([](uint32_t it) -> int64_t { return it < 5 ? 30 - 4 * it : 10; },
                   "simulation: {iterations: 3, warmup_iterations: 1}\n");
  EXPECT_EQ(run.attempts, (std::vector<uint32_t>{3}));
  ASSERT_EQ(run.scenario.warnings.size(), 1u);
  EXPECT_NE(run.scenario.warnings[0].find("iterations 2..3 are not in steady state"),
            std::string::npos)
      << run.scenario.warnings[0];
  const SteadyRun steady =
      run_settling([](uint32_t) -> int64_t { return 10; }, "simulation: {iterations: 3}\n");
  EXPECT_TRUE(steady.scenario.warnings.empty());
  EXPECT_NE(steady.scenario.header.find("steady state: iterations 2..3 (simulation.iterations: 3)"),
            std::string::npos)
      << steady.scenario.header;
}

TEST(SteadyStateSearch, WarmupWithoutIterationsIsAnErrorNamingTheKey) {
  try {
    run_settling([](uint32_t) -> int64_t { return 10; }, "simulation: {warmup_iterations: 2}\n");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_iterations"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("needs `iterations`"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace upsim::cli

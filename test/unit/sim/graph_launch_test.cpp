// CUDA graph launches (TaskGraph::add_graph_launch): one runtime call enqueues a captured
// graph's GPU tasks, so a host-bound step of many small kernels costs one launch instead of one
// per kernel. Each test checks the exact picosecond tasks end.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "test/unit/sim/sm_sharing_fixtures.h"

namespace upsim {
namespace {

using sm_sharing::at_us;
using sm_sharing::PerSmKernelCost;
using sm_sharing::SmHoldingNetwork;
using sm_sharing::work;

/// A launch (a kernel's or a graph's) costs the host 5 us, an op's begin 2 us; other host work
/// nothing.
class LaunchCost final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& op) const override {
    const bool launch = op.phase == HostPhase::kLaunch || op.phase == HostPhase::kGraphLaunch;
    if (op.phase == HostPhase::kOpBegin) return Duration::from_us(2);
    return launch ? Duration::from_us(5) : Duration::zero();
  }
};

struct Harness {
  Harness() : network(Duration::zero(), 0) {
    sm_sharing::set_up(graph, models, 2, {"compute", "side"}, kernels, cpu, network);
  }
  /// `n` kernels of 1 us each on rank 0's compute stream, unlaunched.
  std::vector<TaskId> kernels_of_1us(int n) {
    std::vector<TaskId> k;
    for (int i = 0; i < n; ++i)
      k.push_back(graph.add_kernel(0, 0, "small", "op", work(100)));
    return k;
  }
  std::vector<Time> run() { return sm_sharing::run_ends(graph, models); }
  TaskGraph graph;
  PerSmKernelCost kernels;
  LaunchCost cpu;
  SmHoldingNetwork network;
  ModelSet models;
};

TEST(GraphLaunch, EagerLaunchesOfSmallKernelsAreHostBound) {
  // Ten 1-us kernels, each behind its own 5-us launch: the last starts at 50 us, ends at 51.
  Harness h;
  const std::vector<TaskId> k = h.kernels_of_1us(10);
  for (uint32_t i = 0; i < k.size(); ++i)
    h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", i, k[i]);
  EXPECT_EQ(h.run()[k.back()], at_us(51));
}

TEST(GraphLaunch, OneGraphLaunchEnqueuesTheCapturedKernelsAtOneHostCost) {
  // The same ten kernels captured: one 5-us graph launch, then the GPU runs them back to back.
  Harness h;
  const std::vector<TaskId> k = h.kernels_of_1us(10);
  const TaskId launch = h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step", k);
  EXPECT_EQ(h.graph.launched_tasks(launch).size(), 10U);
  EXPECT_EQ(h.graph.launched_task(launch), k.front());
  for (TaskId t : k)
    EXPECT_EQ(h.graph.launcher_of(t), launch);
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[launch], at_us(5));
  EXPECT_EQ(ends[k.front()], at_us(6));
  EXPECT_EQ(ends[k.back()], at_us(15));
}

TEST(GraphLaunch, AGraphLaunchsHostCostIsNotAnotherOpsCachedCost) {
  // The executor caches host costs per (op, phase, launch index): a graph launch of op "step"
  // and the begin of the op interned right after it ("next") must not share an entry.
  Harness h;
  const std::vector<TaskId> k = h.kernels_of_1us(1);
  const TaskId launch = h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step", k);
  const TaskId next = h.graph.add_cpu_op(0, 0, "next", HostPhase::kOpBegin);
  ASSERT_EQ(h.graph.task(next).op_name, h.graph.task(launch).op_name + 1);
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[launch], at_us(5));
  EXPECT_EQ(ends[next], at_us(7));
}

TEST(GraphLaunch, ACapturedGraphKeepsItsStreamsAndEventOrder) {
  // Captured: a 3-us kernel on compute, an event after it, a wait on the side stream, then a
  // 1-us kernel there: it starts when the compute kernel ends (8 us), not at launch (5 us).
  Harness h;
  const TaskId first = h.graph.add_kernel(0, 0, "first", "op", work(300));
  const TaskId record = h.graph.add_event_record(0, 0);
  const TaskId wait = h.graph.add_stream_wait(0, 1, record);
  const TaskId second = h.graph.add_kernel(0, 1, "second", "op", work(100));
  h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step",
                           std::vector<TaskId>{first, record, wait, second});
  const std::vector<Time> ends = h.run();
  EXPECT_EQ(ends[first], at_us(8));
  EXPECT_EQ(ends[second], at_us(9));
}

TEST(GraphLaunch, ABadGraphLaunchIsRefused) {
  Harness h;
  const std::vector<TaskId> k = h.kernels_of_1us(2);
  const TaskId other = h.graph.add_kernel(1, 0, "other", "op", work(100));
  EXPECT_THROW(h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step", {}),
               std::invalid_argument);
  EXPECT_THROW(
      h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step", std::vector<TaskId>{k[0], other}),
      std::invalid_argument);
  const TaskId cpu = h.graph.add_cpu_op(0, 0, "host", HostPhase::kOpBody);
  EXPECT_THROW(h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step", std::vector<TaskId>{cpu}),
               std::invalid_argument);
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k[0]);
  try {
    h.graph.add_graph_launch(0, 0, "cudaGraphLaunch", "step", std::vector<TaskId>{k[1], k[0]});
    FAIL() << "a task launched twice";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("launched twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace upsim

// Spec tests of the resources and the rendezvous at their boundaries: each checks the exact
// picosecond a task starts or ends, so an off-by-one in any resource fails here.
#include "sim/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace upsim {
namespace {

constexpr Duration us(int64_t v) {
  return Duration::from_us(v);
}
constexpr Time at_us(int64_t v) {
  return Time::zero() + Duration::from_us(v);
}

/// Every host phase takes `launch` for launches and `op` for everything else.
class ConstantCpuCost final : public CpuCostModel {
 public:
  ConstantCpuCost(Duration launch, Duration op) : launch_(launch), op_(op) {}
  Duration host_duration(const HostOpDesc& desc) const override {
    return desc.phase == HostPhase::kLaunch ? launch_ : op_;
  }

 private:
  Duration launch_;
  Duration op_;
};

/// A kernel lasts `flops` microseconds: lets a test pick each kernel's length through its desc.
class FlopsAsMicrosecondsKernelCost final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    return Duration::from_us_f(k.flops);
  }
};

class ConstantCollectiveCost final : public CollectiveCostModel {
 public:
  explicit ConstantCollectiveCost(Duration d) : d_(d) {}
  Duration collective_duration(const CollectiveDesc&) const override { return d_; }
  Duration transfer_duration(const TransferDesc& t) const override {
    return Duration::from_ps(t.bytes);  // 1 byte per picosecond
  }

 private:
  Duration d_;
};

struct Span {
  Time begin = Time::max();
  Time end = Time::max();
};

class Recorder final : public Observer {
 public:
  void on_task_begin(TaskId t, Time at) override { spans[t].begin = at; }
  void on_task_end(TaskId t, Time at) override { spans[t].end = at; }
  void on_gpu_enqueue(TaskId t, Time at) override { enqueued[t] = at; }
  void on_collective_begin(CollectiveId c, Time at) override { collective_begin[c] = at; }
  std::map<TaskId, Span> spans;
  std::map<TaskId, Time> enqueued;
  std::map<CollectiveId, Time> collective_begin;
};

KernelDesc kernel_of(double microseconds) {
  KernelDesc k;
  k.flops = microseconds;
  return k;
}

struct Harness {
  explicit Harness(size_t ranks, Duration launch = us(4), Duration op = us(1),
                   Duration collective = us(7))
      : cpu(launch, op), collectives(collective), network(collectives) {
    for (size_t r = 0; r < ranks; ++r) {
      graph.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute", "comm"}});
    }
    models.kernels = &kernels;
    models.cpu = &cpu;
    models.network = &network;
    models.devices.resize(ranks);
  }
  RunStats run() {
    graph.seal();
    Engine engine;
    GraphExecutor exec(engine, graph, models);
    exec.add_observer(&rec);
    return exec.run();
  }
  TaskGraph graph;
  FlopsAsMicrosecondsKernelCost kernels;
  ConstantCpuCost cpu;
  ConstantCollectiveCost collectives;
  AnalyticalNetwork network;
  ModelSet models;
  Recorder rec;
};

TEST(GpuStream, SecondKernelStartsExactlyWhenTheFirstEnds) {
  Harness h(1);
  const TaskId a = h.graph.add_kernel(0, 0, "a", "op", kernel_of(10));
  const TaskId b = h.graph.add_kernel(0, 0, "b", "op", kernel_of(5));
  const RunStats stats = h.run();
  EXPECT_EQ(h.rec.spans[a].begin, at_us(0));
  EXPECT_EQ(h.rec.spans[a].end, at_us(10));
  EXPECT_EQ(h.rec.spans[b].begin, at_us(10));
  EXPECT_EQ(h.rec.spans[b].end, at_us(15));
  EXPECT_EQ(stats.end, at_us(15));
  EXPECT_EQ(stats.tasks_done, 2u);
}

TEST(GpuStream, TwoStreamsRunConcurrently) {
  Harness h(1);
  const TaskId a = h.graph.add_kernel(0, 0, "a", "op", kernel_of(10));
  const TaskId b = h.graph.add_kernel(0, 1, "b", "op", kernel_of(10));
  h.run();
  EXPECT_EQ(h.rec.spans[a].begin, at_us(0));
  EXPECT_EQ(h.rec.spans[b].begin, at_us(0));
}

TEST(KernelLaunch, LaunchDelaysItsKernelByTheLaunchCost) {
  Harness h(1, /*launch=*/us(4));
  const TaskId k = h.graph.add_kernel(0, 0, "k", "aten::relu", kernel_of(10));
  const TaskId l = h.graph.add_launch(0, 0, "cudaLaunchKernel", "aten::relu", 0, k);
  h.run();
  EXPECT_EQ(h.rec.spans[l].begin, at_us(0));
  EXPECT_EQ(h.rec.spans[l].end, at_us(4));
  EXPECT_EQ(h.rec.enqueued[k], at_us(4));
  EXPECT_EQ(h.rec.spans[k].begin, at_us(4)) << "not one picosecond earlier or later";
  EXPECT_EQ(h.rec.spans[k].end, at_us(14));
}

TEST(CpuThread, RunsItsOpsInProgramOrderBackToBack) {
  Harness h(1, us(4), /*op=*/us(3));
  const TaskId a = h.graph.add_cpu_op(0, 0, "aten::view", HostPhase::kOpBody);
  const TaskId b = h.graph.add_cpu_op(0, 0, "aten::view", HostPhase::kOpBody);
  h.run();
  EXPECT_EQ(h.rec.spans[a].end, at_us(3));
  EXPECT_EQ(h.rec.spans[b].begin, at_us(3));
  EXPECT_EQ(h.rec.spans[b].end, at_us(6));
}

TEST(HostSync, BlocksTheCpuThreadUntilTheStreamDrains) {
  Harness h(1, us(4), us(1));
  const TaskId k1 = h.graph.add_kernel(0, 0, "k1", "op", kernel_of(100));
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k1);
  const TaskId k2 = h.graph.add_kernel(0, 0, "k2", "op", kernel_of(50));
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 1, k2);
  const TaskId sync = h.graph.add_host_sync(0, 0, 0, "cudaStreamSynchronize");
  const TaskId after = h.graph.add_cpu_op(0, 0, "aten::item", HostPhase::kOpBody);
  h.run();
  // k1: 4..104, k2 enqueued at 8, runs 104..154; the sync starts at 8 and ends at 154.
  EXPECT_EQ(h.rec.spans[sync].begin, at_us(8));
  EXPECT_EQ(h.rec.spans[k2].end, at_us(154));
  EXPECT_EQ(h.rec.spans[sync].end, at_us(154));
  EXPECT_EQ(h.rec.spans[after].begin, at_us(154));
}

TEST(HostSync, DeviceSyncWaitsForEveryStreamButNotForLaterWork) {
  Harness h(1, us(4), us(1));
  const TaskId k0 = h.graph.add_kernel(0, 0, "k0", "op", kernel_of(20));
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k0);
  const TaskId k1 = h.graph.add_kernel(0, 1, "k1", "op", kernel_of(30));
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k1);
  const TaskId sync = h.graph.add_host_sync(0, 0, kAllStreams, "cudaDeviceSynchronize");
  h.run();
  EXPECT_EQ(h.rec.spans[k1].end, at_us(38));
  EXPECT_EQ(h.rec.spans[sync].end, at_us(38));
}

TEST(HostSync, OnAnIdleStreamCompletesAtOnce) {
  Harness h(1);
  const TaskId sync = h.graph.add_host_sync(0, 0, 1, "cudaStreamSynchronize");
  h.run();
  EXPECT_EQ(h.rec.spans[sync].begin, at_us(0));
  EXPECT_EQ(h.rec.spans[sync].end, at_us(0));
}

TEST(StreamWait, HoldsTheWaitingStreamUntilTheRecordedEvent) {
  Harness h(1);
  h.graph.add_kernel(0, 0, "long", "op", kernel_of(50));
  const TaskId record = h.graph.add_event_record(0, 0);
  const TaskId wait = h.graph.add_stream_wait(0, 1, record);
  const TaskId k = h.graph.add_kernel(0, 1, "after-wait", "op", kernel_of(10));
  const TaskId other = h.graph.add_kernel(0, 0, "same-stream", "op", kernel_of(1));
  h.run();
  EXPECT_EQ(h.rec.spans[wait].begin, at_us(0)) << "the wait occupies its stream from the start";
  EXPECT_EQ(h.rec.spans[wait].end, at_us(50));
  EXPECT_EQ(h.rec.spans[k].begin, at_us(50));
  EXPECT_EQ(h.rec.spans[other].begin, at_us(50));
}

TEST(Dependency, ExplicitEdgeDelaysAcrossResources) {
  Harness h(1, us(4), us(2));
  const TaskId k = h.graph.add_kernel(0, 0, "k", "op", kernel_of(30));
  const TaskId op = h.graph.add_cpu_op(0, 0, "after-kernel", HostPhase::kOpBody);
  h.graph.add_dependency(k, op);
  h.run();
  EXPECT_EQ(h.rec.spans[op].begin, at_us(30));
  EXPECT_EQ(h.rec.spans[op].end, at_us(32));
}

TEST(Collective, CompletesAtTheLastArrivalPlusItsCost) {
  Harness h(3, us(4), us(1), /*collective=*/us(7));
  const CollectiveId c = h.graph.add_collective_group(
      CollectiveDesc{CollectiveKind::kAllReduce, {0, 1, 2}, 1024, {}}, "all_reduce#0");
  std::vector<TaskId> tasks;
  for (RankId r = 0; r < 3; ++r) {
    h.graph.add_kernel(r, 1, "before", "op", kernel_of(10.0 * (r + 1)));
    tasks.push_back(h.graph.add_collective(r, 1, c, "nccl:all_reduce"));
  }
  h.run();
  EXPECT_EQ(h.rec.spans[tasks[0]].begin, at_us(10)) << "rank 0 arrives first and waits";
  EXPECT_EQ(h.rec.spans[tasks[2]].begin, at_us(30));
  EXPECT_EQ(h.rec.collective_begin[c], at_us(30));
  for (TaskId t : tasks)
    EXPECT_EQ(h.rec.spans[t].end, at_us(37));
}

TEST(Collective, MissingRankIsAnErrorNamingIt) {
  Harness h(3);
  const CollectiveId c = h.graph.add_collective_group(
      CollectiveDesc{CollectiveKind::kAllToAll,
                     {0, 1, 2},
                     0,
                     AllToAllSizes::dense(3, std::vector<int64_t>(9, 8))},
      "all_to_all fwd");
  h.graph.add_collective(0, 1, c, "nccl:all_to_all");
  h.graph.add_collective(1, 1, c, "nccl:all_to_all");
  try {
    h.run();
    FAIL() << "expected SimulationError";
  } catch (const SimulationError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("`all_to_all fwd`"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ranks 0, 1 arrived"), std::string::npos) << msg;
    EXPECT_NE(msg.find("never arrived: rank 2"), std::string::npos) << msg;
  }
}

TEST(Collective, MismatchedOrderAcrossRanksIsReportedNotHung) {
  Harness h(2);
  const CollectiveId a =
      h.graph.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 64, {}}, "A");
  const CollectiveId b =
      h.graph.add_collective_group(CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 64, {}}, "B");
  h.graph.add_collective(0, 1, a, "nccl:all_reduce");
  h.graph.add_collective(0, 1, b, "nccl:all_reduce");
  h.graph.add_collective(1, 1, b, "nccl:all_reduce");
  h.graph.add_collective(1, 1, a, "nccl:all_reduce");
  try {
    h.run();
    FAIL() << "expected SimulationError";
  } catch (const SimulationError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("`A`"), std::string::npos) << msg;
    EXPECT_NE(msg.find("never arrived: rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("never arrived: rank 0"), std::string::npos) << msg;
  }
}

// A graph whose edges contradict a thread's order (the kernel waits for a host op that runs
// after the host sync waiting for that kernel) hangs; the error names the first blocked task
// and the chain of waits back to it, as a cycle.
TEST(Deadlock, TheErrorNamesTheFirstBlockedTaskAndWhy) {
  Harness h(1);
  const TaskId k = h.graph.add_kernel(0, 0, "consumer", "op", kernel_of(5));
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k);
  const TaskId sync = h.graph.add_host_sync(0, 0, 0, "cudaStreamSynchronize");
  const TaskId late = h.graph.add_cpu_op(0, 0, "producer", HostPhase::kOpBody);
  h.graph.add_dependency(late, k);
  try {
    h.run();
    FAIL() << "expected SimulationError";
  } catch (const SimulationError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("first blocked: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("waits for its stream to finish the 1 tasks enqueued on it (0 done)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("waits for cpu_op `producer` (task " + std::to_string(late)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("a dependency cycle"), std::string::npos) << msg;
    (void)sync;
  }
}

// CUDA: cudaStreamWaitEvent on an event not yet recorded is a no-op. A what-if on host time can
// launch a wait before its record; the wait then does not hold its stream (once it deadlocked
// when the record's launch depended on the waiting stream draining).
TEST(StreamWait, EnqueuedBeforeItsRecordWaitsForNothing) {
  Harness h(0);
  h.graph.add_rank(RankInfo{"two threads", 2, {"a", "b"}});
  h.models.devices.resize(1);
  const TaskId record = h.graph.add_event_record(0, 0);
  const TaskId wait = h.graph.add_stream_wait(0, 1, record);
  const TaskId after = h.graph.add_kernel(0, 1, "after_wait", "op", kernel_of(5));
  h.graph.add_launch(0, 0, "cudaStreamWaitEvent", "op", 0, wait);
  h.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 1, after);
  const TaskId sync = h.graph.add_host_sync(0, 0, 1, "cudaStreamSynchronize");
  // The record's launch on thread 1 comes only after thread 0's sync of stream b.
  const TaskId record_launch = h.graph.add_launch(0, 1, "cudaEventRecord", "op", 0, record);
  h.graph.add_dependency(sync, record_launch);
  const RunStats stats = h.run();
  EXPECT_EQ(stats.tasks_done, h.graph.task_count());
  EXPECT_EQ(stats.stream_waits_before_record, 1u);
  EXPECT_LT(h.rec.spans[after].end, h.rec.spans[record].begin);

  // Launched after its record, the wait holds its stream until the record completes.
  Harness ordered(0);
  ordered.graph.add_rank(RankInfo{"two threads", 2, {"a", "b"}});
  ordered.models.devices.resize(1);
  const TaskId slow = ordered.graph.add_kernel(0, 0, "slow", "op", kernel_of(50));
  const TaskId rec2 = ordered.graph.add_event_record(0, 0);
  const TaskId wait2 = ordered.graph.add_stream_wait(0, 1, rec2);
  const TaskId after2 = ordered.graph.add_kernel(0, 1, "after_wait", "op", kernel_of(5));
  ordered.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 0, slow);
  ordered.graph.add_launch(0, 0, "cudaEventRecord", "op", 1, rec2);
  ordered.graph.add_launch(0, 0, "cudaStreamWaitEvent", "op", 2, wait2);
  ordered.graph.add_launch(0, 0, "cudaLaunchKernel", "op", 3, after2);
  const RunStats s2 = ordered.run();
  EXPECT_EQ(s2.stream_waits_before_record, 0u);
  EXPECT_GE(ordered.rec.spans[after2].begin, ordered.rec.spans[slow].end);
}

TEST(Memcpy, TakesTheNetworkModelsTransferTime) {
  Harness h(1, us(4));
  const TaskId m = h.graph.add_memcpy(0, 0, "Memcpy HtoD", "aten::to",
                                      TransferDesc{TransferKind::kHostToDevice, 0, 2'000'000});
  h.graph.add_launch(0, 0, "cudaMemcpyAsync", "aten::to", 0, m);
  h.run();
  EXPECT_EQ(h.rec.spans[m].begin, at_us(4));
  EXPECT_EQ(h.rec.spans[m].end, at_us(6));
}

TEST(FixedDuration, OverridesTheModel) {
  Harness h(1);
  const TaskId k = h.graph.add_kernel(0, 0, "k", "op", kernel_of(10));
  h.graph.set_fixed_duration(k, Duration::from_ps(1234));
  h.run();
  EXPECT_EQ(h.rec.spans[k].end, Time::from_ps(1234));
}

TEST(KernelModel, ADurationBeyondTheSimulatorsRangeIsAnErrorNamingTheKernel) {
  // 1 FLOP/s made a GEMM last 2e9 s: llround overflowed and the engine reported an event "before
  // now". Conversions now throw, and the executor names the kernel.
  EXPECT_THROW(Duration::from_seconds_f(1e7), std::range_error);  // 116 days
  EXPECT_THROW(Duration::from_us_f(std::nan("")), std::range_error);
  EXPECT_EQ(Duration::from_seconds_f(9e6).ps(), 9'000'000'000'000'000'000);  // 104 days: fine
  Harness h(1);
  h.graph.add_kernel(0, 0, "slow_gemm", "aten::mm", kernel_of(1e14));  // 10^14 us
  try {
    h.run();
    FAIL() << "no error";
  } catch (const SimulationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("kernel `slow_gemm`"), std::string::npos) << what;
    EXPECT_NE(what.find("outside the simulator's range"), std::string::npos) << what;
  }
  Harness negative(1);
  negative.graph.add_kernel(0, 0, "backwards", "aten::mm", kernel_of(-5));
  EXPECT_THROW(negative.run(), SimulationError);
}

TEST(TaskGraph, RejectsMalformedConstruction) {
  TaskGraph g;
  g.add_rank(RankInfo{"r0", 1, {"compute"}});
  EXPECT_THROW(g.add_kernel(0, 3, "k", "op", KernelDesc{}), std::invalid_argument);
  EXPECT_THROW(g.add_cpu_op(1, 0, "op", HostPhase::kOpBody), std::invalid_argument);
  const TaskId k = g.add_kernel(0, 0, "k", "op", KernelDesc{});
  g.add_launch(0, 0, "cudaLaunchKernel", "op", 0, k);
  EXPECT_THROW(g.add_launch(0, 0, "cudaLaunchKernel", "op", 1, k), std::invalid_argument);
  const TaskId cpu = g.add_cpu_op(0, 0, "op", HostPhase::kOpBody);
  EXPECT_THROW(g.add_launch(0, 0, "cudaLaunchKernel", "op", 0, cpu), std::invalid_argument);
  EXPECT_THROW(g.add_stream_wait(0, 0, k), std::invalid_argument);
  EXPECT_THROW(g.add_dependency(k, k), std::invalid_argument);
}

// The limit: one task more than it throws; an estimate above it throws only where the limit
// refuses estimates (a run with a share of memory, run again alone when refused).
TEST(TaskGraph, TheTaskLimitRefusesTasksAndOnlyWhereAskedEstimates) {
  TaskGraph g;
  g.add_rank(RankInfo{"r0", 1, {"compute"}});
  g.set_task_limit(2);
  EXPECT_NO_THROW(g.expect_tasks(1000));
  g.add_cpu_op(0, 0, "op", HostPhase::kOpBody);
  g.add_cpu_op(0, 0, "op", HostPhase::kOpBody);
  EXPECT_THROW(g.add_cpu_op(0, 0, "op", HostPhase::kOpBody), TaskLimitError);
  g.set_task_limit(10, true);
  EXPECT_NO_THROW(g.expect_tasks(10));
  EXPECT_THROW(g.expect_tasks(11), TaskLimitError);
}

TEST(TaskGraph, StoresEachDistinctKernelDescriptionOnce) {
  TaskGraph g;
  g.add_rank(RankInfo{"r0", 1, {"compute"}});
  g.add_rank(RankInfo{"r1", 1, {"compute"}});
  KernelDesc gemm = gemm_kernel(DType::kBf16, 1, 128, 256, 512);
  KernelDesc embedding;
  embedding.cls = KernelClass::kEmbeddingForward;
  embedding.embedding.per_table = {EmbeddingTableShape{1000, 64, 20.0, {0.5, 0.5}}};
  const TaskId a = g.add_kernel(0, 0, "gemm", "aten::mm", gemm);
  const TaskId b = g.add_kernel(1, 0, "gemm", "aten::mm", gemm);
  const TaskId e0 = g.add_kernel(0, 0, "emb", "fbgemm", embedding);
  const TaskId e1 = g.add_kernel(1, 0, "emb", "fbgemm", embedding);
  EXPECT_EQ(g.kernel_desc_of(a), g.kernel_desc_of(b));
  EXPECT_EQ(g.kernel_desc_of(e0), g.kernel_desc_of(e1));
  EXPECT_EQ(g.add_kernel_desc(gemm), g.kernel_desc_of(a));
  // Any field that differs, nested ones included, makes a new description.
  KernelDesc other_gemm = gemm;
  other_gemm.k = 513;
  KernelDesc other_table = embedding;
  other_table.embedding.per_table[0].reuse_histogram[1] = 0.25;
  const TaskId c = g.add_kernel(0, 0, "gemm", "aten::mm", other_gemm);
  const TaskId e2 = g.add_kernel(0, 0, "emb", "fbgemm", other_table);
  EXPECT_NE(g.kernel_desc_of(c), g.kernel_desc_of(a));
  EXPECT_NE(g.kernel_desc_of(e2), g.kernel_desc_of(e0));
  EXPECT_EQ(g.kernel_desc_count(), 4u);
  EXPECT_EQ(g.kernel(c).k, 513);
  EXPECT_EQ(g.kernel(e2).embedding.per_table[0].reuse_histogram[1], 0.25);
}

TEST(TaskGraph, CollectiveTaskOnlyForAMember) {
  TaskGraph g;
  for (int r = 0; r < 3; ++r)
    g.add_rank(RankInfo{"r" + std::to_string(r), 1, {"comm"}});
  const CollectiveId c = g.add_collective_group(
      CollectiveDesc{CollectiveKind::kAllReduce, {2, 0}, 1024, {}}, "all_reduce");
  g.add_collective(2, 0, c, "nccl:all_reduce");
  g.add_collective(0, 0, c, "nccl:all_reduce");
  EXPECT_THROW(g.add_collective(1, 0, c, "nccl:all_reduce"), std::invalid_argument);
}

TEST(Executor, UnsealedGraphOrMissingModelIsALogicError) {
  TaskGraph g;
  g.add_rank(RankInfo{"r0", 1, {"compute"}});
  ModelSet models;
  models.devices.resize(1);
  Engine engine;
  GraphExecutor exec(engine, g, models);
  EXPECT_THROW(exec.run(), std::logic_error);
}

}  // namespace
}  // namespace upsim

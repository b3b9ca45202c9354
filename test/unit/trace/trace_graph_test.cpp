#include "workloads/trace/trace_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/formats/parse_error.h"
#include "test/unit/trace/synthetic_trace.h"
#include "workloads/trace/trace_replay.h"

namespace upsim {
namespace {

using namespace upsim::test;

RankTrace rank_trace(const std::string& json, const std::string& file = "synthetic.json") {
  RankTrace r;
  r.kineto = parse_kineto_trace(json, file);
  return r;
}

std::vector<RankTrace> one(const std::string& json) {
  std::vector<RankTrace> v;
  v.push_back(rank_trace(json));
  return v;
}

std::vector<TaskId> tasks_of(const TaskGraph& g, TaskKind kind) {
  std::vector<TaskId> out;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind == kind) out.push_back(t);
  }
  return out;
}

constexpr int64_t kUs = 1'000'000;

TEST(TraceGraph, replays_launches_kernels_and_syncs_to_the_picosecond) {
  // One op launches a kernel that starts when its launch returns; the host waits for it.
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "100.125"),
      cpu_op("aten::mm", kMainTid, "10.5", "30"),
      runtime("cudaLaunchKernel", kMainTid, "20", "5.25", 1),
      gpu("kernel", "sgemm", 7, "25.25", "50", 1),
      runtime("cudaStreamSynchronize", kMainTid, "50", "27.75", 2),
      cpu_op("aten::add", kMainTid, "80", "10"),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  ASSERT_EQ(info.ranks.size(), 1u);
  EXPECT_EQ(info.ranks[0].kernels, 1u);
  EXPECT_EQ(info.ranks[0].host_syncs, 1u);
  ASSERT_EQ(info.ranks[0].iterations.size(), 1u);
  EXPECT_EQ(info.ranks[0].iterations[0].start_mark, 1u);
  EXPECT_EQ(info.ranks[0].iterations[0].end_mark, 2u);
  EXPECT_EQ(info.ranks[0].iterations[0].measured, Duration::from_ps(100'125'000));
  const auto kernels = tasks_of(g, TaskKind::kKernel);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(g.task(kernels[0]).fixed_ps, 50 * kUs);
  const auto launches = tasks_of(g, TaskKind::kLaunch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(g.launched_task(launches[0]), kernels[0]);
  EXPECT_EQ(g.task(launches[0]).fixed_ps, 5'250'000);
  EXPECT_EQ(g.name(g.task(launches[0]).op_name), "aten::mm");
  const auto syncs = tasks_of(g, TaskKind::kHostSync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(g.sync_target(syncs[0]), 0);

  const TraceReplayResult r = replay_traces(one(json));
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].iteration, "ProfilerStep#1");
  EXPECT_EQ(r.ranks[0].measured, Duration::from_ps(100'125'000));
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_ps(100'125'000));
}

TEST(TraceGraph, a_cuda_graph_replay_is_one_graph_launch_of_its_kernels) {
  // cudaGraphLaunch (correlation 3) replays three kernels, which carry its correlation id.
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "100"),
      cpu_op("graph_replay", kMainTid, "10", "20"),
      runtime("cudaGraphLaunch", kMainTid, "12", "8", 3),
      gpu("kernel", "k1", 7, "20", "10", 3),
      gpu("kernel", "k2", 7, "30", "10", 3),
      gpu("kernel", "k3", 7, "40", "10", 3),
      runtime("cudaStreamSynchronize", kMainTid, "40", "12", 4),
  });
  TaskGraph g;
  build_replay_graph(one(json), g);
  const auto kernels = tasks_of(g, TaskKind::kKernel);
  const auto launches = tasks_of(g, TaskKind::kLaunch);
  ASSERT_EQ(kernels.size(), 3u);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(g.task(launches[0]).phase, HostPhase::kGraphLaunch);
  EXPECT_EQ(g.name(g.task(launches[0]).name), "cudaGraphLaunch");
  EXPECT_EQ(g.task(launches[0]).fixed_ps, 8 * kUs);
  const std::span<const TaskId> launched = g.launched_tasks(launches[0]);
  EXPECT_EQ(std::vector<TaskId>(launched.begin(), launched.end()), kernels);
  const TraceReplayResult r = replay_traces(one(json));
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].predicted, r.ranks[0].measured);
}

TEST(TraceGraph, per_step_times_follow_the_step_markers_when_the_host_runs_ahead) {
  // The host launches a 100-us kernel per step in 20 us and runs ahead of the GPU (each kernel
  // queued behind the one before); the last step waits for all three. Each step's time is its
  // ProfilerStep's, 20, 20 and 274 us, within 2% (issue: steps must not end at their GPU work).
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "20"),
      cpu_op("aten::mm", kMainTid, "2", "10"),
      runtime("cudaLaunchKernel", kMainTid, "4", "5", 1),
      gpu("kernel", "k1", 7, "9", "100", 1),
      annotation("ProfilerStep#2", kMainTid, "20", "20"),
      cpu_op("aten::mm", kMainTid, "22", "10"),
      runtime("cudaLaunchKernel", kMainTid, "24", "5", 2),
      gpu("kernel", "k2", 7, "109", "100", 2),
      annotation("ProfilerStep#3", kMainTid, "40", "274"),
      cpu_op("aten::mm", kMainTid, "42", "10"),
      runtime("cudaLaunchKernel", kMainTid, "44", "5", 3),
      gpu("kernel", "k3", 7, "209", "100", 3),
      runtime("cudaDeviceSynchronize", kMainTid, "60", "251", 4),
  });
  const TraceReplayResult r = replay_traces(one(json));
  ASSERT_EQ(r.ranks.size(), 1u);
  ASSERT_EQ(r.ranks[0].step_predicted.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const double e =
        r.ranks[0].step_predicted[k].seconds() / r.ranks[0].step_measured[k].seconds() - 1.0;
    EXPECT_LE(std::abs(e), 0.02) << r.ranks[0].step_labels[k] << ": measured "
                                 << r.ranks[0].step_measured[k].us() << " us, predicted "
                                 << r.ranks[0].step_predicted[k].us() << " us";
  }
}

TEST(TraceGraph, a_slower_gpu_delays_the_host_through_the_sync) {
  // The replay is a simulation, not a copy: the host waits for the kernel, whatever it takes.
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "100"),
      runtime("cudaLaunchKernel", kMainTid, "20", "5", 1),
      gpu("kernel", "sgemm", 7, "25", "50", 1),
      runtime("cudaStreamSynchronize", kMainTid, "50", "26", 2),
  });
  const TraceReplayResult base = replay_traces(one(json));
  EXPECT_EQ(base.ranks[0].predicted, Duration::from_us(100));
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  const auto kernels = tasks_of(g, TaskKind::kKernel);
  ASSERT_EQ(kernels.size(), 1u);
  g.set_fixed_duration(kernels[0], Duration::from_us(80));  // what-if: the kernel takes 80 us
  g.seal();
  // Measured: the sync returns 1 us after the kernel; the step ends 24 us after the sync.
  // Simulated: kernel 25..105, sync returns at 106, step ends at 130.
  const TraceReplayResult slow = run_replay_graph(g, info);
  EXPECT_EQ(slow.ranks[0].predicted, Duration::from_us(130));
}

TEST(TraceGraph, stream_wait_event_waits_for_the_consistent_producer) {
  // Stream 7 runs A (11..61). The host waits stream 9 on an event, then launches B on stream 9,
  // which starts when A ends. Stream 22 ran a copy long before: consistent but earlier.
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "80"),
      runtime("cudaMemcpyAsync", kMainTid, "2", "2", 5),
      gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 22, "4", "1", 5, 64),
      runtime("cudaLaunchKernel", kMainTid, "8", "3", 1),
      gpu("kernel", "A", 7, "11", "50", 1),
      runtime("cudaStreamWaitEvent", kMainTid, "15", "1", 2),
      runtime("cudaLaunchKernel", kMainTid, "20", "3", 3),
      gpu("kernel", "B", 9, "61", "10", 3),
      runtime("cudaDeviceSynchronize", kMainTid, "25", "47", 4),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].stream_waits, 1u);
  EXPECT_EQ(info.ranks[0].stream_waits_dropped, 0u);
  const auto records = tasks_of(g, TaskKind::kEventRecord);
  const auto waits = tasks_of(g, TaskKind::kStreamWait);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(waits.size(), 1u);
  const RankInfo& rank = g.rank(0);
  EXPECT_EQ(rank.stream_names[g.task(records[0]).resource], "stream 7");
  EXPECT_EQ(rank.stream_names[g.task(waits[0]).resource], "stream 9");
  const TraceReplayResult r = replay_traces(one(json));
  EXPECT_EQ(r.ranks[0].predicted, r.ranks[0].measured);
}

TEST(TraceGraph, stream_waits_recorded_by_kineto_use_the_recorded_event) {
  // A on stream 7 ends at 40, the copy on stream 22 at 60. Kineto recorded the wait (cuda_sync):
  // stream 9 waits for the event recorded on stream 7 right after A. The timing alone would
  // have picked the later copy.
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "80"),
      runtime("cudaMemcpyAsync", kMainTid, "2", "2", 5),
      gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 22, "41", "19", 5, 64),
      runtime("cudaLaunchKernel", kMainTid, "8", "3", 1),
      gpu("kernel", "A", 7, "11", "29", 1),
      runtime("cudaEventRecord", kMainTid, "12", "1", 50),
      runtime("cudaStreamWaitEvent", kMainTid, "15", "1", 2),
      R"({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 9, )"
      R"("ts": 15, "dur": 0, "args": {"correlation": 2, "device": 0, "stream": 9, )"
      R"("wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 50}})",
      runtime("cudaLaunchKernel", kMainTid, "20", "3", 3),
      gpu("kernel", "B", 9, "61", "10", 3),
      runtime("cudaDeviceSynchronize", kMainTid, "25", "47", 4),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].stream_waits, 1u);
  EXPECT_EQ(info.ranks[0].stream_waits_exact, 1u);
  const auto records = tasks_of(g, TaskKind::kEventRecord);
  const auto waits = tasks_of(g, TaskKind::kStreamWait);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(g.rank(0).stream_names[g.task(records[0]).resource], "stream 7");
  EXPECT_EQ(g.rank(0).stream_names[g.task(waits[0]).resource], "stream 9");
}

TEST(TraceGraph, a_wait_that_contradicts_the_measured_start_is_dropped) {
  // B on stream 9 runs 20..70. The host then waits stream 7 on an event and launches C, which
  // starts at 32, before B ended: B cannot be the event, and nothing else ran: no StreamWait.
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "100"),
      runtime("cudaLaunchKernel", kMainTid, "10", "3", 1),
      gpu("kernel", "B", 9, "20", "50", 1),
      runtime("cudaStreamWaitEvent", kMainTid, "25", "1", 2),
      runtime("cudaLaunchKernel", kMainTid, "28", "3", 3),
      gpu("kernel", "C", 7, "32", "5", 3),
      runtime("cudaDeviceSynchronize", kMainTid, "40", "31", 4),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].stream_waits, 0u);
  EXPECT_EQ(info.ranks[0].stream_waits_dropped, 1u);
  EXPECT_TRUE(tasks_of(g, TaskKind::kStreamWait).empty());
}

TEST(TraceGraph, pageable_copy_to_the_host_blocks_the_thread) {
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "90"),
      runtime("cudaLaunchKernel", kMainTid, "5", "3", 1),
      gpu("kernel", "K", 7, "8", "52", 1),
      runtime("cudaMemcpyAsync", kMainTid, "30", "34", 2),
      gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 7, "60", "2", 2, 4),
      cpu_op("aten::item", kMainTid, "70", "5"),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].blocking_copies, 1u);
  EXPECT_EQ(info.ranks[0].copies, 1u);
  ASSERT_EQ(tasks_of(g, TaskKind::kHostSync).size(), 1u);
  const auto copies = tasks_of(g, TaskKind::kMemcpy);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(g.transfer(copies[0]).kind, TransferKind::kDeviceToHost);
  EXPECT_EQ(g.transfer(copies[0]).bytes, 4);
  const TraceReplayResult r = replay_traces(one(json));
  EXPECT_EQ(r.ranks[0].predicted, r.ranks[0].measured);
}

std::string nccl_rank(int rank, const std::string& launch_ts, const std::string& kernel_ts,
                      const std::string& kernel_dur, const std::string& sync_ts,
                      const std::string& sync_dur) {
  return kineto_json({annotation("ProfilerStep#3", kMainTid, "0", "110"),
                      annotation("nccl:all_reduce", kMainTid, launch_ts, "2",
                                 R"({"Input Dims": [[1024]], "Input type": ["float"]})"),
                      runtime("cudaLaunchKernel", kMainTid, launch_ts, "1", 1),
                      gpu("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 84,
                          kernel_ts, kernel_dur, 1),
                      runtime("cudaDeviceSynchronize", kMainTid, sync_ts, sync_dur, 2)},
                     R"(  "distributedInfo": {"backend": "nccl", "rank": )" + std::to_string(rank) +
                         R"(, "world_size": 2},)" + "\n");
}

TEST(TraceGraph, nccl_kernels_meet_across_ranks_and_take_the_transfer_time) {
  // Rank 0 launches early and its kernel waits for rank 1 (89 us); rank 1 arrives at 81 and the
  // transfer takes 19 us: both end at 100.
  std::vector<RankTrace> ranks;
  ranks.push_back(rank_trace(nccl_rank(0, "10", "11", "89", "20", "81"), "rank0.json"));
  ranks.push_back(rank_trace(nccl_rank(1, "80", "81", "19", "85", "16"), "rank1.json"));
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(ranks, g);
  ASSERT_EQ(info.collective_groups, 1u);
  const CollectiveDesc& c = g.collective(0);
  EXPECT_EQ(c.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(c.members, (std::vector<RankId>{0, 1}));
  EXPECT_EQ(c.bytes, 4096);
  const auto colls = tasks_of(g, TaskKind::kCollective);
  ASSERT_EQ(colls.size(), 2u);
  for (TaskId t : colls) {
    EXPECT_EQ(g.task(t).fixed_ps, 19 * kUs);
    EXPECT_EQ(g.name(g.task(t).op_name), "nccl:all_reduce");
  }
  const TraceReplayResult r = replay_traces(ranks);
  ASSERT_EQ(r.ranks.size(), 2u);
  for (const RankValidation& v : r.ranks) {
    EXPECT_EQ(v.measured, Duration::from_us(110));
    EXPECT_EQ(v.predicted, Duration::from_us(110));
  }
}

TEST(TraceGraph, a_collective_missing_on_a_rank_names_the_trace) {
  std::vector<RankTrace> ranks;
  ranks.push_back(rank_trace(nccl_rank(0, "10", "11", "89", "20", "81"), "rank0.json"));
  ranks.push_back(rank_trace(kineto_json({annotation("ProfilerStep#3", kMainTid, "0", "110"),
                                          cpu_op("aten::add", kMainTid, "5", "5")}),
                             "rank1.json"));
  TaskGraph g;
  try {
    build_replay_graph(ranks, g);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), "rank1.json");
    EXPECT_NE(std::string(e.what()).find("is in the traces of ranks 0 but not of ranks 1"),
              std::string::npos);
  }
}

TEST(TraceGraph, traces_of_different_runs_do_not_overlap_in_time) {
  std::vector<RankTrace> ranks;
  ranks.push_back(rank_trace(nccl_rank(0, "10", "11", "89", "20", "81"), "rank0.json"));
  std::string later = nccl_rank(1, "80", "81", "19", "85", "16");
  // Shift rank 1 by one hour.
  RankTrace r1 = rank_trace(later, "rank1.json");
  r1.kineto.base_us += 3'600'000'000;
  ranks.push_back(std::move(r1));
  TaskGraph g;
  try {
    build_replay_graph(ranks, g);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), "rank1.json");
    EXPECT_NE(std::string(e.what()).find("not of the same run"), std::string::npos);
  }
}

TEST(TraceGraph, a_trace_without_profiler_steps_is_an_error_naming_it) {
  const std::string json = kineto_json({cpu_op("aten::add", kMainTid, "5", "5")});
  TaskGraph g;
  try {
    build_replay_graph(one(json), g);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), "synthetic.json");
    EXPECT_NE(std::string(e.what()).find("no `ProfilerStep#` annotation"), std::string::npos);
  }
}

TEST(TraceGraph, other_iteration_markers_delimit_iterations) {
  const std::string json = kineto_json({
      annotation("Optimizer.zero_grad#SGD.zero_grad", kMainTid, "0", "2"),
      cpu_op("aten::add", kMainTid, "5", "5"),
      annotation("Optimizer.zero_grad#SGD.zero_grad", kMainTid, "30", "2"),
      cpu_op("aten::add", kMainTid, "35", "5"),
      annotation("Optimizer.zero_grad#SGD.zero_grad", kMainTid, "70", "2"),
  });
  TraceSetOptions options;
  options.graph.iteration_marker = "Optimizer.zero_grad";
  const TraceReplayResult r = replay_traces(one(json), options);
  ASSERT_EQ(r.graph.ranks[0].iterations.size(), 2u);
  EXPECT_EQ(r.ranks[0].iterations, 2u);
  EXPECT_EQ(r.ranks[0].measured, Duration::from_us(35));
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(35));
  options.iteration = 1;
  const TraceReplayResult second = replay_traces(one(json), options);
  EXPECT_EQ(second.ranks[0].measured, Duration::from_us(40));
}

TEST(TraceGraph, a_thread_that_resumes_after_another_waits_for_it) {
  // The main thread launches at 10..15 and goes idle; the autograd thread starts 50 us later,
  // works until 100; the main thread resumes 30 us after that.
  constexpr int64_t kAutograd = 200;
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "150"),
      cpu_op("aten::ones_like", kMainTid, "8", "7"),
      runtime("cudaLaunchKernel", kMainTid, "10", "5", 1),
      gpu("kernel", "fill", 7, "15", "2", 1),
      cpu_op("autograd::engine::evaluate_function: MmBackward0", kAutograd, "65", "35"),
      runtime("cudaLaunchKernel", kAutograd, "70", "5", 2),
      gpu("kernel", "sgemm", 7, "75", "10", 2),
      cpu_op("Optimizer.step", kMainTid, "130", "10"),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].cpu_threads, 2u);
  EXPECT_EQ(info.ranks[0].handoffs, 2u);
  g.seal();
  size_t waits_with_edges = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.name(g.task(t).name) == "wait for thread") {
      EXPECT_EQ(g.predecessor_count(t), 1u);
      ++waits_with_edges;
    }
  }
  EXPECT_EQ(waits_with_edges, 2u);
  const TraceReplayResult r = replay_traces(one(json));
  EXPECT_EQ(r.ranks[0].predicted, r.ranks[0].measured);
}

TEST(TraceGraph, ac2g_flows_link_gpu_work_without_a_correlation_arg) {
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "50"),
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,)"
      R"( "ts": 10, "dur": 5, "args": {}})",
      R"({"ph": "s", "id": 77, "pid": 100, "tid": 100, "ts": 10, "cat": "ac2g", "name": "ac2g"})",
      R"({"ph": "X", "cat": "kernel", "name": "K", "pid": 0, "tid": 7, "ts": 15, "dur": 20,)"
      R"( "args": {"device": 0, "stream": 7}})",
      R"({"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 15, "cat": "ac2g", "name": "ac2g",)"
      R"( "bp": "e"})",
      runtime("cudaDeviceSynchronize", kMainTid, "20", "16", 2),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].untraced_launches, 0u);
  const auto launches = tasks_of(g, TaskKind::kLaunch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(g.name(g.task(launches[0]).name), "cudaLaunchKernel");
  const TraceReplayResult r = replay_traces(one(json));
  EXPECT_EQ(r.ranks[0].predicted, r.ranks[0].measured);
}

TEST(TraceGraph, gpu_work_without_a_traced_launch_runs_at_its_measured_time) {
  const std::string json = kineto_json({
      annotation("ProfilerStep#1", kMainTid, "0", "100"),
      gpu("kernel", "leftover", 7, "5", "60", 99),
      runtime("cudaLaunchKernel", kMainTid, "10", "5", 1),
      gpu("kernel", "K", 7, "65", "10", 1),
      runtime("cudaDeviceSynchronize", kMainTid, "20", "56", 2),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g);
  EXPECT_EQ(info.ranks[0].untraced_launches, 1u);
  EXPECT_EQ(info.ranks[0].cpu_threads, 2u);
  const TraceReplayResult r = replay_traces(one(json));
  EXPECT_EQ(r.ranks[0].predicted, r.ranks[0].measured);
}

}  // namespace
}  // namespace upsim

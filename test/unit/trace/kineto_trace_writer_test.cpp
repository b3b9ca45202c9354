// KinetoTraceWriter (sim/export/kineto_trace_writer.h), read back with upsim's own Kineto reader
// (workloads/trace/kineto_trace.h): one file per rank with the header HTA and the reader look
// for, categories as torch.profiler writes them, launches linked to their GPU work by
// correlation and ac2g flows, collectives with NCCL's kernel names and c10d's metadata,
// ProfilerStep markers that span the run summary's iterations, and a replay of the files that
// reproduces the simulated iterations to the picosecond. Also: filters, gzip, determinism,
// temporaries and errors.
#include "sim/export/kineto_trace_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "sim/formats/json_reader.h"
#include "sim/network_model.h"
#include "sim/task_graph.h"
#include "test/unit/trace/synthetic_trace.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_file.h"
#include "workloads/trace/trace_replay.h"

namespace upsim {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr uint32_t kIterations = 3;
constexpr int64_t kAllReduceBytes = 1 << 20;

class OneMicrosecondHostOps final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc&) const override { return Duration::from_us(1); }
};
/// A kernel takes its `flops` in microseconds, plus a third of a nanosecond: times that need
/// every picosecond digit.
class FlopsAsMicroseconds final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    return Duration::from_us_f(k.flops) + Duration::from_ps(333);
  }
};
class FixedCollectives final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc&) const override {
    return Duration::from_ps(5'000'001);
  }
  Duration transfer_duration(const TransferDesc&) const override { return Duration::from_us(2); }
};

DeviceProfile test_gpu() {
  DeviceProfile d;
  d.name = "A100-SXM4-40GB";
  d.hbm_bytes = int64_t{40} << 30;
  d.sm_count = 108;
  d.compute_capability = 80;
  return d;
}

/// Two ranks as PyTorch runs them: per iteration a GEMM, an all-reduce on the comm stream after
/// an event on the compute stream (rank 1's GEMM is longer, so rank 0 waits at the
/// rendezvous), the compute stream waiting for the all-reduce, a copy to the host with a stream
/// synchronize, and an op without launches.
TaskGraph two_ranks() {
  TaskGraph g;
  for (int r = 0; r < 2; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute", "comm"}});
  for (uint32_t it = 1; it <= kIterations; ++it) {
    const CollectiveId ar = g.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, kAllReduceBytes, {}}, "allreduce");
    for (RankId r = 0; r < 2; ++r) {
      const pytorch::RankThreads at{r, 0, 0, 1};
      g.add_iteration_mark(r, 0, it);
      KernelDesc gemm;
      gemm.flops = r == 0 ? 10 : 25;
      pytorch::HostOp mm(g, at, "aten::addmm");
      mm.kernel("sgemm_128x64", "aten::addmm", gemm);
      mm.end();
      pytorch::HostOp comm(g, at, "nccl:all_reduce");
      const TaskId ready = comm.record(0);
      comm.wait(1, ready);
      comm.collective(ar, "nccl:all_reduce");
      const TaskId done = comm.record(1);
      comm.end();
      pytorch::HostOp wait(g, at, "wait");
      wait.wait(0, done);
      wait.end();
      pytorch::HostOp to(g, at, "aten::to");
      to.copy("copy", TransferKind::kDeviceToHost, 4096);
      to.end();
      g.add_host_sync(r, 0, 0, "aten::to");
      pytorch::body(g, at, "AccumulateGrad");
    }
  }
  g.seal();
  return g;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct SimRun {
  RunSummary summary;
};

/// Runs `g` with the writer attached (and a run summary without warm-up).
SimRun simulate(const TaskGraph& g, KinetoTraceWriter& writer) {
  OneMicrosecondHostOps cpu;
  FlopsAsMicroseconds kernels;
  FixedCollectives collectives;
  AnalyticalNetwork network(collectives);
  ModelSet models{&kernels, &cpu, &network, std::vector<DeviceProfile>(g.rank_count()), {}};
  Engine engine;
  GraphExecutor exec(engine, g, models);
  RunSummaryObserver summary(0);
  exec.add_observer(&summary);
  exec.add_observer(&writer);
  exec.run();
  return SimRun{summary.summary()};
}

std::vector<KinetoRankFile> files_in(const fs::path& dir, std::vector<RankId> ranks,
                                     bool gzip = false) {
  std::vector<KinetoRankFile> out;
  for (const RankId r : ranks)
    out.push_back(KinetoRankFile{r, dir / kineto_trace_file_name(r, gzip)});
  return out;
}

SimRun write_two_ranks(const fs::path& dir, KinetoTraceOptions options = {}, bool gzip = false) {
  const TaskGraph g = two_ranks();
  options.devices = {test_gpu()};
  KinetoTraceWriter writer(files_in(dir, {0, 1}, gzip), options);
  writer.add_metadata("scenario", "two_ranks");
  return simulate(g, writer);
}

/// The integer member `key` of a raw args object, or -1.
int64_t arg_int(const KinetoTrace& t, const KinetoEvent& e, std::string_view key) {
  const std::string_view args = t.args_of(e);
  if (args.empty()) return -1;
  JsonCursor cur(args, t.file);
  const JsonValue v = read_json_value(cur);
  const JsonValue* m = v.find(key);
  return m != nullptr && m->is_number() ? m->integer : -1;
}
std::string arg_str(const KinetoTrace& t, const KinetoEvent& e, std::string_view key) {
  const std::string_view args = t.args_of(e);
  if (args.empty()) return "";
  JsonCursor cur(args, t.file);
  const JsonValue v = read_json_value(cur);
  const JsonValue* m = v.find(key);
  return m != nullptr && m->is_string() ? m->string : "";
}

std::vector<const KinetoEvent*> events_of(const KinetoTrace& t, KinetoCategory c) {
  std::vector<const KinetoEvent*> out;
  for (const KinetoEvent& e : t.events) {
    if (e.category == c) out.push_back(&e);
  }
  return out;
}

TEST(KinetoTraceWriter, HeaderNamesTheRankAsHtaAndTheReaderFindIt) {
  TempDir dir;
  write_two_ranks(dir.path());
  for (RankId r = 0; r < 2; ++r) {
    const fs::path file = dir.path() / kineto_trace_file_name(r, false);
    const std::string text = read_text(file);
    // HTA's create_rank_to_trace_dict: the first line matching this regular expression.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"("rank":\s+(\d+))"))) << text;
    EXPECT_EQ(m[1].str(), std::to_string(r));
    const KinetoTrace t = read_kineto_trace(file);
    EXPECT_TRUE(t.distributed.present);
    EXPECT_EQ(t.distributed.backend, "nccl");
    EXPECT_EQ(t.distributed.rank, static_cast<int32_t>(r));
    EXPECT_EQ(t.distributed.world_size, 2);
    ASSERT_EQ(t.devices.size(), 1u);
    EXPECT_EQ(t.devices[0].id, static_cast<int32_t>(r));
    EXPECT_EQ(t.devices[0].name, "A100-SXM4-40GB");
    EXPECT_EQ(t.devices[0].sm_count, 108);
    EXPECT_EQ(t.devices[0].total_memory_bytes, int64_t{40} << 30);
    EXPECT_EQ(t.devices[0].compute_major, 8);
    for (const char* key : {"\"schemaVersion\": 1", "\"displayTimeUnit\": \"ms\"",
                            "\"baseTimeNanoseconds\": 0", "\"scenario\":\"two_ranks\""}) {
      EXPECT_NE(text.find(key), std::string::npos) << key;
    }
    // Every event is strict JSON (the reader validates the whole document).
    EXPECT_EQ(text.substr(text.size() - 4), "\n]}\n");
  }
}

TEST(KinetoTraceWriter, LaunchesLinkToTheirGpuWorkByCorrelationAndFlows) {
  TempDir dir;
  write_two_ranks(dir.path());
  const KinetoTrace t = read_kineto_trace(dir.path() / kineto_trace_file_name(1, false));
  std::map<int64_t, const KinetoEvent*> call_of;
  for (const KinetoEvent* e : events_of(t, KinetoCategory::kCudaRuntime))
    call_of[e->correlation] = e;
  std::map<int64_t, std::pair<int64_t, int64_t>> flow_ts;  // id -> (s ts, f ts)
  for (const KinetoFlow& f : t.flows) {
    (f.start ? flow_ts[f.id].first : flow_ts[f.id].second) = f.ts_ps;
  }
  size_t gpu_events = 0;
  for (const KinetoEvent& e : t.events) {
    if (!is_gpu_category(e.category)) continue;
    ++gpu_events;
    ASSERT_TRUE(call_of.count(e.correlation)) << t.name_of(e);
    const KinetoEvent& call = *call_of.at(e.correlation);
    EXPECT_EQ(call.pid, 1'000'001);  // the host process of GPU 1
    EXPECT_EQ(call.tid, 1'000'001);  // its main thread
    EXPECT_EQ(e.device, 1);
    EXPECT_GE(e.ts_ps, call.end_ps()) << "GPU work starts after its launch returned";
    EXPECT_EQ(e.external_id, call.external_id);
    EXPECT_EQ(flow_ts.at(e.correlation).first, call.ts_ps);
    EXPECT_EQ(flow_ts.at(e.correlation).second, e.ts_ps);
  }
  // Per iteration: a GEMM, the all-reduce, a copy.
  EXPECT_EQ(gpu_events, 3 * kIterations);
  EXPECT_EQ(events_of(t, KinetoCategory::kGpuMemcpy).size(), kIterations);
  EXPECT_EQ(t.name_of(*events_of(t, KinetoCategory::kGpuMemcpy)[0]),
            "Memcpy DtoH (Device -> Pinned)");
  EXPECT_EQ(events_of(t, KinetoCategory::kGpuMemcpy)[0]->bytes, 4096);
  // Streams: CUDA ids from 7, GPU events on pid = the device.
  for (const KinetoEvent* e : events_of(t, KinetoCategory::kKernel)) {
    EXPECT_TRUE(e->stream == 7 || e->stream == 8) << e->stream;
    EXPECT_EQ(e->pid, 1);
    EXPECT_EQ(e->tid, e->stream);
  }
}

TEST(KinetoTraceWriter, CollectivesCarryNcclNamesAndC10dMetadata) {
  TempDir dir;
  write_two_ranks(dir.path());
  for (RankId r = 0; r < 2; ++r) {
    const KinetoTrace t = read_kineto_trace(dir.path() / kineto_trace_file_name(r, false));
    std::vector<const KinetoEvent*> nccl;
    for (const KinetoEvent* e : events_of(t, KinetoCategory::kKernel)) {
      if (t.name_of(*e).starts_with("nccl")) nccl.push_back(e);
    }
    ASSERT_EQ(nccl.size(), kIterations);
    std::vector<const KinetoEvent*> comms;
    for (const KinetoEvent* e : events_of(t, KinetoCategory::kCpuOp)) {
      if (t.name_of(*e) == "record_param_comms") comms.push_back(e);
    }
    ASSERT_EQ(comms.size(), kIterations);
    for (uint32_t k = 0; k < kIterations; ++k) {
      EXPECT_EQ(t.name_of(*nccl[k]), "ncclDevKernel_AllReduce_Sum_u8_RING_LL");
      const KinetoEvent& c = *comms[k];
      EXPECT_EQ(arg_str(t, c, "Collective name"), "allreduce");
      EXPECT_EQ(arg_int(t, c, "In msg nelems"), kAllReduceBytes);
      EXPECT_EQ(arg_int(t, c, "Out msg nelems"), kAllReduceBytes);
      EXPECT_EQ(arg_int(t, c, "Group size"), 2);
      EXPECT_EQ(arg_str(t, c, "dtype"), "Byte");
      EXPECT_EQ(arg_str(t, c, "Process Group Name"), "0");
      EXPECT_EQ(arg_str(t, c, "Process Group Description"), "default_pg");
      EXPECT_EQ(arg_str(t, c, "Process Group Ranks"), "[0, 1]");
      EXPECT_EQ(arg_int(t, c, "Seq"), static_cast<int64_t>(k));
      EXPECT_EQ(arg_int(t, c, "Rank"), static_cast<int64_t>(r));
    }
  }
  // Rank 0 arrives first and waits on the GPU: its NCCL kernel is longer than rank 1's by the
  // wait; the shortest member is the transfer (5 us + 1 ps).
  const KinetoTrace t0 = read_kineto_trace(dir.path() / kineto_trace_file_name(0, false));
  const KinetoTrace t1 = read_kineto_trace(dir.path() / kineto_trace_file_name(1, false));
  const auto last_nccl = [](const KinetoTrace& t) {
    const KinetoEvent* out = nullptr;
    for (const KinetoEvent* e : events_of(t, KinetoCategory::kKernel)) {
      if (t.name_of(*e).starts_with("nccl")) out = e;
    }
    return out;
  };
  EXPECT_EQ(std::min(last_nccl(t0)->dur_ps, last_nccl(t1)->dur_ps), 5'000'001);
  EXPECT_GT(last_nccl(t0)->dur_ps, last_nccl(t1)->dur_ps);
}

TEST(KinetoTraceWriter, StreamWaitsAndSyncsAreRecordedAsCudaSyncEvents) {
  TempDir dir;
  write_two_ranks(dir.path());
  const KinetoTrace t = read_kineto_trace(dir.path() / kineto_trace_file_name(0, false));
  std::map<int64_t, const KinetoEvent*> call_of;
  for (const KinetoEvent* e : events_of(t, KinetoCategory::kCudaRuntime))
    call_of[e->correlation] = e;
  size_t waits = 0;
  size_t syncs = 0;
  for (const KinetoEvent* e : events_of(t, KinetoCategory::kCudaSync)) {
    ASSERT_TRUE(call_of.count(e->correlation));
    const std::string_view call = t.name_of(*call_of.at(e->correlation));
    if (t.name_of(*e) == "Stream Wait Event") {
      ++waits;
      EXPECT_EQ(call, "cudaStreamWaitEvent");
      const int64_t record = arg_int(t, *e, "wait_on_cuda_event_record_corr_id");
      ASSERT_TRUE(call_of.count(record));
      EXPECT_EQ(t.name_of(*call_of.at(record)), "cudaEventRecord");
      EXPECT_NE(arg_int(t, *e, "wait_on_stream"), e->stream);
    } else {
      ++syncs;
      EXPECT_EQ(t.name_of(*e), "Stream Sync");
      EXPECT_EQ(call, "cudaStreamSynchronize");
      EXPECT_EQ(e->stream, 7);
      EXPECT_EQ(e->tid, 1'000'007);  // Kineto's sync row beside the stream
    }
  }
  EXPECT_EQ(waits, 2 * kIterations);
  EXPECT_EQ(syncs, kIterations);
}

TEST(KinetoTraceWriter, ProfilerStepsSpanTheSummarysIterations) {
  TempDir dir;
  const SimRun r = write_two_ranks(dir.path());
  for (RankId rank = 0; rank < 2; ++rank) {
    const KinetoTrace t = read_kineto_trace(dir.path() / kineto_trace_file_name(rank, false));
    std::vector<const KinetoEvent*> steps;
    for (const KinetoEvent* e : events_of(t, KinetoCategory::kUserAnnotation)) {
      if (t.name_of(*e).starts_with("ProfilerStep#")) steps.push_back(e);
    }
    std::sort(steps.begin(), steps.end(),
              [](const KinetoEvent* a, const KinetoEvent* b) { return a->ts_ps < b->ts_ps; });
    ASSERT_EQ(steps.size(), kIterations);
    const std::vector<Duration>& times = r.summary.ranks[rank].iteration_times;
    ASSERT_EQ(times.size(), kIterations);
    for (uint32_t k = 0; k < kIterations; ++k) {
      EXPECT_EQ(t.name_of(*steps[k]), "ProfilerStep#" + std::to_string(k + 1));
      EXPECT_EQ(steps[k]->dur_ps, times[k].ps()) << "step " << k + 1;
      if (k > 0) {
        EXPECT_EQ(steps[k]->ts_ps, steps[k - 1]->end_ps());
      }
    }
  }
}

// The round trip: the files replayed by upsim's trace workload (measured durations, host time
// as traced) give back the simulated iterations exactly: every time is written to the
// picosecond, and each dependency of the run is in the files (launches by correlation, stream
// waits and syncs by their cuda_sync records, collectives by process group and sequence number).
TEST(KinetoTraceWriter, ReplayOfTheFilesGivesBackTheSimulatedIterations) {
  TempDir dir;
  const SimRun r = write_two_ranks(dir.path());
  const TraceReplayResult replay = validate_trace_directory(dir.path());
  ASSERT_EQ(replay.ranks.size(), 2u);
  EXPECT_EQ(replay.graph.collective_groups, kIterations);
  for (RankId rank = 0; rank < 2; ++rank) {
    const RankValidation& v = replay.ranks[rank];
    EXPECT_EQ(v.iterations, kIterations);
    EXPECT_EQ(v.measured.ps(), r.summary.ranks[rank].iteration_time.ps()) << "rank " << rank;
    EXPECT_EQ(v.predicted.ps(), v.measured.ps()) << "rank " << rank;
    for (size_t k = 0; k < v.step_predicted.size(); ++k) {
      EXPECT_EQ(v.step_predicted[k].ps(), r.summary.ranks[rank].iteration_times[k].ps());
    }
    EXPECT_EQ(replay.graph.ranks[rank].stream_waits, 2 * kIterations);
    EXPECT_EQ(replay.graph.ranks[rank].stream_waits_exact, 2 * kIterations);
    EXPECT_EQ(replay.graph.ranks[rank].host_syncs, kIterations);
  }
}

TEST(KinetoTraceWriter, SameRunSameBytesAndGzipHoldsTheSameText) {
  TempDir a;
  TempDir b;
  TempDir z;
  write_two_ranks(a.path());
  write_two_ranks(b.path());
  write_two_ranks(z.path(), {}, /*gzip=*/true);
  for (RankId r = 0; r < 2; ++r) {
    const std::string plain = read_text(a.path() / kineto_trace_file_name(r, false));
    EXPECT_EQ(plain, read_text(b.path() / kineto_trace_file_name(r, false)));
    const fs::path gz = z.path() / kineto_trace_file_name(r, true);
    EXPECT_EQ(gunzip(read_text(gz), gz.string()), plain);
    EXPECT_EQ(read_kineto_trace(gz).events.size(),
              read_kineto_trace(a.path() / kineto_trace_file_name(r, false)).events.size());
  }
  for (const TempDir* d : {&a, &b, &z}) {
    EXPECT_EQ(std::distance(fs::directory_iterator(d->path()), fs::directory_iterator()), 2)
        << "only the rank files, no temporaries";
  }
}

TEST(KinetoTraceWriter, FiltersWriteTheChosenRanksAndIterations) {
  TempDir dir;
  const TaskGraph g = two_ranks();
  KinetoTraceOptions options;
  options.iterations = std::pair{2u, 2u};
  KinetoTraceWriter writer(files_in(dir.path(), {1}), options);
  simulate(g, writer);
  EXPECT_FALSE(fs::exists(dir.path() / kineto_trace_file_name(0, false)));
  const KinetoTrace t = read_kineto_trace(dir.path() / kineto_trace_file_name(1, false));
  std::vector<std::string> steps;
  for (const KinetoEvent* e : events_of(t, KinetoCategory::kUserAnnotation))
    steps.emplace_back(t.name_of(*e));
  EXPECT_EQ(steps, std::vector<std::string>{"ProfilerStep#2"});
  EXPECT_EQ(events_of(t, KinetoCategory::kGpuMemcpy).size(), 1u);
  EXPECT_TRUE(t.devices.empty()) << "no device profile given";
}

TEST(KinetoTraceWriter, BadRanksAndPathsAreErrorsAndNoTemporaryIsLeft) {
  TempDir dir;
  const TaskGraph g = two_ranks();
  {
    KinetoTraceWriter writer(files_in(dir.path(), {2}));
    EXPECT_THROW(writer.on_run_begin(g), std::invalid_argument);
  }
  {
    KinetoTraceWriter writer(files_in(dir.path(), {0, 0}));
    EXPECT_THROW(writer.on_run_begin(g), std::invalid_argument);
  }
  {
    KinetoTraceWriter writer({KinetoRankFile{0, dir.path() / "missing" / "rank_0.json"}});
    try {
      writer.on_run_begin(g);
      ADD_FAILURE() << "no error for a folder that does not exist";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("missing/rank_0.json"), std::string::npos) << e.what();
    }
  }
  {
    KinetoTraceWriter writer(files_in(dir.path(), {0, 1}));
    writer.on_run_begin(g);
    EXPECT_TRUE(fs::exists(dir.path() / "rank_0.json.tmp"));
  }  // destroyed before finish()
  EXPECT_TRUE(fs::is_empty(dir.path()));
  {
    KinetoTraceWriter writer(files_in(dir.path(), {0}));
    EXPECT_THROW(writer.finish(), std::logic_error);
  }
}

TEST(KinetoTraceWriter, AFailedRunIsWrittenWithItsUnfinishedTasks) {
  TempDir dir;
  const TaskGraph g = two_ranks();
  KinetoTraceWriter writer(files_in(dir.path(), {0}));
  writer.on_run_begin(g);
  TaskId first_op = kNoTask;
  for (TaskId t = 0; t < g.task_count() && first_op == kNoTask; ++t) {
    if (g.task(t).kind == TaskKind::kCpuOp && g.task(t).rank == 0) first_op = t;
  }
  writer.on_task_begin(first_op, Time::from_ps(1'000'000));
  writer.finish();
  EXPECT_TRUE(writer.finished());
  const std::string text = read_text(dir.path() / "rank_0.json");
  EXPECT_NE(text.find("\"unfinished\":true"), std::string::npos);
  const KinetoTrace t = read_kineto_trace(dir.path() / "rank_0.json");
  ASSERT_EQ(events_of(t, KinetoCategory::kCpuOp).size(), 1u);
  EXPECT_EQ(t.name_of(*events_of(t, KinetoCategory::kCpuOp)[0]), "aten::addmm");
}

}  // namespace
}  // namespace upsim

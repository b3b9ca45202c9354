// Builders of small Kineto traces for tests: each event is one JSON object, times in
// microseconds as text (so sub-microsecond digits can be written exactly).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace upsim::test {

inline constexpr int64_t kPid = 100;
inline constexpr int64_t kMainTid = 100;

inline std::string cpu_op(const std::string& name, int64_t tid, const std::string& ts,
                          const std::string& dur, const std::string& args = "{}") {
  return R"({"ph": "X", "cat": "cpu_op", "name": ")" + name + R"(", "pid": )" +
         std::to_string(kPid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + ts +
         R"(, "dur": )" + dur + R"(, "args": )" + args + "}";
}

inline std::string annotation(const std::string& name, int64_t tid, const std::string& ts,
                              const std::string& dur, const std::string& args = "{}") {
  return R"({"ph": "X", "cat": "user_annotation", "name": ")" + name + R"(", "pid": )" +
         std::to_string(kPid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + ts +
         R"(, "dur": )" + dur + R"(, "args": )" + args + "}";
}

inline std::string runtime(const std::string& name, int64_t tid, const std::string& ts,
                           const std::string& dur, int64_t correlation) {
  return R"({"ph": "X", "cat": "cuda_runtime", "name": ")" + name + R"(", "pid": )" +
         std::to_string(kPid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + ts +
         R"(, "dur": )" + dur + R"(, "args": {"correlation": )" + std::to_string(correlation) +
         "}}";
}

/// GPU work: cat is "kernel", "gpu_memcpy" or "gpu_memset".
inline std::string gpu(const std::string& cat, const std::string& name, int64_t stream,
                       const std::string& ts, const std::string& dur, int64_t correlation,
                       int64_t bytes = -1) {
  std::string args = R"({"device": 0, "stream": )" + std::to_string(stream) +
                     R"(, "correlation": )" + std::to_string(correlation);
  if (bytes >= 0) args += R"(, "bytes": )" + std::to_string(bytes);
  args += "}";
  return R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 0, "tid": )" +
         std::to_string(stream) + R"(, "ts": )" + ts + R"(, "dur": )" + dur + R"(, "args": )" +
         args + "}";
}

inline std::string kineto_json(const std::vector<std::string>& events,
                               const std::string& extra_members = "") {
  std::string out = "{\n  \"schemaVersion\": 1,\n" + extra_members + "  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += "    " + events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  }
  return out + "  ]\n}\n";
}

/// A Kineto "cuda_sync" record of a cudaStreamWaitEvent (PyTorch's enable_cuda_sync_events):
/// `stream` waits for the event that the cudaEventRecord with correlation `record_correlation`
/// recorded on `wait_on_stream`.
inline std::string stream_wait_record(int64_t correlation, int64_t stream, int64_t wait_on_stream,
                                      int64_t record_correlation, const std::string& ts) {
  return R"({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": )" +
         std::to_string(stream) + R"(, "ts": )" + ts + R"(, "dur": 0, "args": {"correlation": )" +
         std::to_string(correlation) + R"(, "device": 0, "stream": )" + std::to_string(stream) +
         R"(, "wait_on_stream": )" + std::to_string(wait_on_stream) +
         R"(, "wait_on_cuda_event_record_corr_id": )" + std::to_string(record_correlation) + "}}";
}

/// One cudaStreamWaitEvent of a generated trace: the call, the GPU task its event follows, and
/// the streams (CUDA ids), by Kineto correlation id.
struct StreamWaitEdge {
  int64_t call_correlation = -1;
  int64_t producer_correlation = -1;
  int64_t waiting_stream = -1;
  int64_t producer_stream = -1;
  bool operator==(const StreamWaitEdge&) const = default;
};

struct GeneratedStreamWaits {
  std::string json;                   ///< the Kineto trace
  std::vector<StreamWaitEdge> waits;  ///< the waits as executed (the truth)
};

/// A DLRM-like training step on one GPU, executed by a small stream simulator so that the GPU
/// timeline obeys CUDA's rules, written as a Kineto trace. One host thread; streams: 7 compute
/// (the current stream), 20 and 24 NCCL (two process groups), 13 an input-prefetch copy stream.
/// Per block, a few compute kernels, then at random (the patterns of ProcessGroupNCCL and
/// TorchRec's pipelining):
///  - a collective: cudaEventRecord on the compute stream, cudaStreamWaitEvent of the NCCL
///    stream, the NCCL kernel; its wait() comes one or two blocks later (cudaEventRecord on the
///    NCCL stream right after the kernel, cudaStreamWaitEvent of the compute stream before the
///    consumer kernel);
///  - an H2D prefetch on the copy stream, recorded, and waited for by the compute stream later;
///  - nothing.
/// Launch calls take 3-9 us, kernels 5-150 us, a kernel starts 3-6 us after its launch returns
/// at the earliest. `cuda_sync` adds the Stream Wait Event records (exact waits); without them the
/// graph builder must infer the waits from timing. Deterministic for a seed.
inline GeneratedStreamWaits generate_stream_wait_trace(uint32_t seed, int blocks, bool cuda_sync) {
  std::mt19937 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto us = [](int64_t ns) {
    std::string frac = std::to_string(ns % 1000);
    return std::to_string(ns / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
  };
  constexpr int64_t kCompute = 7;
  constexpr int64_t kCopy = 13;
  const int64_t nccl[] = {20, 24};
  struct Stream {
    int64_t free_at = 0;      // ns: when its last enqueued task ends
    int64_t waits_until = 0;  // ns: pending StreamWait: later tasks start no earlier
    int64_t last_corr = -1;   // last enqueued task
  };
  std::map<int64_t, Stream> streams;
  for (int64_t id : {kCompute, kCopy, nccl[0], nccl[1]})
    streams[id] = Stream{};
  struct Event {
    int64_t done = 0;  // ns
    int64_t stream = -1;
    int64_t producer = -1;
    int64_t record_corr = -1;
  };
  GeneratedStreamWaits out;
  std::vector<std::string> ev;
  int64_t host = 10'000;  // ns
  int64_t corr = 1;
  const int64_t step_begin = host;
  auto launch = [&](int64_t stream, const std::string& cat, const std::string& name,
                    int64_t dur_ns) {
    const int64_t call = uniform(3'000, 9'000);
    const int64_t c = corr++;
    const bool copy = cat == "gpu_memcpy";
    ev.push_back(
        runtime(copy ? "cudaMemcpyAsync" : "cudaLaunchKernel", kMainTid, us(host), us(call), c));
    Stream& s = streams[stream];
    const int64_t start = std::max({host + call + uniform(3'000, 6'000), s.free_at, s.waits_until});
    ev.push_back(gpu(cat, name, stream, us(start), us(dur_ns), c, copy ? 1 << 20 : -1));
    s.free_at = start + dur_ns;
    s.last_corr = c;
    host += call + uniform(2'000, 25'000);
  };
  auto record = [&](int64_t stream) {
    const Stream& s = streams[stream];
    Event e{std::max(s.free_at, host), stream, s.last_corr, corr++};
    ev.push_back(runtime("cudaEventRecord", kMainTid, us(host), us(2'000), e.record_corr));
    host += 2'000 + uniform(1'000, 4'000);
    return e;
  };
  auto wait = [&](int64_t stream, const Event& e) {
    const int64_t c = corr++;
    ev.push_back(runtime("cudaStreamWaitEvent", kMainTid, us(host), us(1'000), c));
    if (cuda_sync) ev.push_back(stream_wait_record(c, stream, e.stream, e.record_corr, us(host)));
    if (e.producer >= 0) {
      out.waits.push_back(StreamWaitEdge{c, e.producer, stream, e.stream});
      Stream& s = streams[stream];
      s.waits_until = std::max(s.waits_until, e.done);
    }
    host += 1'000 + uniform(1'000, 4'000);
  };
  struct Pending {
    Event event;
    int due = 0;  // block at which the compute stream waits for it
  };
  std::vector<Pending> pending;
  for (int b = 0; b < blocks; ++b) {
    const int64_t kernels = uniform(1, 4);
    for (int64_t k = 0; k < kernels; ++k)
      launch(kCompute, "kernel", "elementwise_kernel", uniform(5'000, 150'000));
    for (size_t i = 0; i < pending.size();) {
      if (pending[i].due <= b) {
        wait(kCompute, pending[i].event);
        launch(kCompute, "kernel", "consumer_kernel", uniform(5'000, 80'000));
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    const int64_t pattern = uniform(0, 9);
    if (pattern < 5) {
      const int64_t s = nccl[uniform(0, 1)];
      wait(s, record(kCompute));
      launch(s, "kernel", "ncclKernel_AllToAll_RING_LL_Sum_float", uniform(20'000, 200'000));
      pending.push_back(Pending{record(s), b + static_cast<int>(uniform(1, 2))});
    } else if (pattern < 8) {
      launch(kCopy, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", uniform(10'000, 120'000));
      pending.push_back(Pending{record(kCopy), b + static_cast<int>(uniform(1, 3))});
    }
  }
  for (const Pending& p : pending) {
    wait(kCompute, p.event);
    launch(kCompute, "kernel", "consumer_kernel", uniform(5'000, 80'000));
  }
  int64_t end = host;
  for (const auto& [id, s] : streams)
    end = std::max(end, s.free_at);
  const int64_t sync = corr++;
  ev.push_back(runtime("cudaDeviceSynchronize", kMainTid, us(host), us(end - host + 2'000), sync));
  ev.insert(ev.begin(),
            annotation("ProfilerStep#1", kMainTid, us(step_begin), us(end + 5'000 - step_begin)));
  out.json = kineto_json(ev);
  return out;
}

/// A fresh directory under the system temp directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("upsim-trace-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
             std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& bytes) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace upsim::test

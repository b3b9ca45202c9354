// Trace ingestion throughput (>= 50 MB/s on a synthetic 200 MB Kineto trace,
// bench/synthetic_kineto_trace.h). Throughput counts the uncompressed bytes.
//   BM_ReadKinetoJson      read + parse a .json file into the event model
//   BM_ReadKinetoGzip      the same trace as .json.gz (gzip level 1)
//   BM_ReadAndBuildReplay  read + parse + build the replay task graph (sealed)
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "bench/synthetic_kineto_trace.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_graph.h"

namespace upsim {
namespace {

std::string gzip_level1(const std::string& text) {
  z_stream zs{};
  deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// The two files of the benchmark, written once and removed at exit.
class Fixture {
 public:
  Fixture() {
    std::random_device rd;
    const auto dir = std::filesystem::temp_directory_path();
    const std::string tag = "upsim-trace-bench-" + std::to_string(rd());
    json_ = dir / (tag + ".json");
    gzip_ = dir / (tag + ".json.gz");
    const std::string text = synthetic_kineto_trace();
    bytes_ = text.size();
    std::ofstream(json_, std::ios::binary) << text;
    std::ofstream(gzip_, std::ios::binary) << gzip_level1(text);
  }
  ~Fixture() {
    std::error_code ec;
    std::filesystem::remove(json_, ec);
    std::filesystem::remove(gzip_, ec);
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;
  const std::filesystem::path& json() const { return json_; }
  const std::filesystem::path& gzip() const { return gzip_; }
  size_t bytes() const { return bytes_; }

 private:
  std::filesystem::path json_;
  std::filesystem::path gzip_;
  size_t bytes_ = 0;
};

void read_json(benchmark::State& state, const Fixture& f) {
  size_t events = 0;
  for (auto _ : state) {
    const KinetoTrace t = read_kineto_trace(f.json());
    events = t.events.size();
    benchmark::DoNotOptimize(events);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.bytes()));
  state.counters["events"] = static_cast<double>(events);
  state.counters["MB"] = static_cast<double>(f.bytes()) / 1e6;
}

void read_gzip(benchmark::State& state, const Fixture& f) {
  for (auto _ : state) {
    const KinetoTrace t = read_kineto_trace(f.gzip());
    benchmark::DoNotOptimize(t.events.size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.bytes()));
}

void read_and_build(benchmark::State& state, const Fixture& f) {
  size_t tasks = 0;
  for (auto _ : state) {
    std::vector<RankTrace> ranks(1);
    ranks[0].kineto = read_kineto_trace(f.json());
    TaskGraph graph;
    build_replay_graph(ranks, graph);
    graph.seal();
    tasks = graph.task_count();
    benchmark::DoNotOptimize(tasks);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.bytes()));
  state.counters["tasks"] = static_cast<double>(tasks);
}

}  // namespace
}  // namespace upsim

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The files are written once, before the benchmarks run, and removed when `files` goes.
  const upsim::Fixture files;
  benchmark::RegisterBenchmark("BM_ReadKinetoJson", upsim::read_json, std::cref(files))
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  benchmark::RegisterBenchmark("BM_ReadKinetoGzip", upsim::read_gzip, std::cref(files))
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  benchmark::RegisterBenchmark("BM_ReadAndBuildReplay", upsim::read_and_build, std::cref(files))
      ->Unit(benchmark::kMillisecond)
      ->Iterations(2);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// `upsim sweep` throughput: a 200-point study of the 2-GPU test DLRM
// (test/unit/tools/data/tiny.yaml: global batch x pooling x interconnect link, 10 x 5 x 4
// points), run from scratch at -j1 and -j2 into a fresh folder each iteration, as the command
// does it (study parsing, every point built and simulated, results.csv and results.h5 written).
//
// Counters: points (200), points_per_s.
//
// Run: build/bench/sweep_bench
// Measured (Release, GCC 12, a 2-core VM, idle): -j1 769 points/s (260 ms), -j2 1438 points/s
// (139 ms): 1.87x on 2 cores.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/sweep_command.h"

namespace upsim {
namespace {

void BM_Sweep_200Points(benchmark::State& state) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "upsim-sweep-bench";
  fs::create_directories(dir);
  const fs::path study = dir / "study.yaml";
  std::ofstream(study) << "study: bench\nbase: " << UPSIM_TOOLS_TEST_DATA << "/tiny.yaml\naxes:\n"
                       << "  workload.global_batch: [128, 256, 512, 1024, 2048, 4096, 8192, "
                          "16384, 32768, 65536]\n"
                       << "  workload.embeddings.tables.0.pooling: [1, 2, 4, 8, 16]\n"
                       << "  platform.interconnect.link: [nvlink3, pcie4, nvlink2, nvlink4]\n";
  for (auto _ : state) {
    std::ostringstream out;
    std::ostringstream err;
    const std::vector<std::string> args{study.string(), "--out", (dir / "out").string(),
                                        "--force",      "-j",    std::to_string(state.range(0))};
    if (cli::sweep_main(args, out, err) != 0) state.SkipWithError("a point failed");
  }
  state.counters["points"] = 200;
  state.counters["points_per_s"] =
      benchmark::Counter(200.0, benchmark::Counter::kIsIterationInvariantRate);
  fs::remove_all(dir);
}
BENCHMARK(BM_Sweep_200Points)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();

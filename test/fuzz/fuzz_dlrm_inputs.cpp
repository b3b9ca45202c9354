// Fuzzes the DLRM workload's input files: an embedding-table statistics file
// (embeddings.tables_file) as YAML / JSON or as CSV, and a sharding plan (sharding_plan, as
// `upsim shard` writes it). The input's role follows from its text (role_of: a plan names
// rank_of_table, a CSV starts with a line of commas), so that each execution parses it once. In
// a fixed scenario beside it (2 GPUs for a tables file; configs/dlrm_4gpu.yaml's 4 GPUs and 48
// tables for a plan), the workload parses it, places the tables, builds a training step's task
// graph (DlrmWorkload::build, as `upsim run` does), and the shipped A100 calibration prices
// every kernel of the graph. A ConfigError is a clean rejection; any other exception from an
// input the workload accepted (an internal error such as "reuse histogram sums to 0") escapes
// and aborts, a finding like a crash, a hang or unbounded memory. Pricing may still throw
// std::range_error (a time past the simulator's range, which the executor reports naming the
// kernel). Seeds: test/fuzz/seeds/dlrm/ and the plan `upsim shard` writes for
// configs/dlrm_4gpu.yaml (scripts/fuzz.sh).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"
#include "sim/task_graph.h"
#include "test/fuzz/fuzz_common.h"
#include "workloads/dlrm/dlrm_workload.h"

namespace {

namespace fs = std::filesystem;
using namespace upsim;

/// A per-process folder for the scenario and the input in its roles.
const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    const fs::path d =
        fs::temp_directory_path() / ("upsim-fuzz-dlrm-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The GPU of every rank and the kernel model: the shipped A100 profile and calibration.
struct Pricing {
  HardwareProfile hardware;
  CalibratedKernelCost model;
};

const Pricing& pricing() {
  static const Pricing p = [] {
    const fs::path configs = UPSIM_CONFIGS_DIR;
    ConfigDocument hw = ConfigDocument::load_file(configs / "hardware" / "a100_sxm4_80gb.yaml");
    HardwareProfile hardware = load_hardware_profile(hw.root());
    ConfigDocument cal =
        ConfigDocument::load_file(configs / "calibration" / "a100_llmcompass.yaml");
    return Pricing{hardware,
                   CalibratedKernelCost(load_kernel_calibration(cal.root()), hardware.achievable)};
  }();
  return p;
}

/// The model the tables files are for (the seeds' dim 32), up to the tables key.
constexpr std::string_view kTablesModel = R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [16, 32]
  top_mlp: [64, 1]
  embeddings:
    dim: 32
)";

/// configs/dlrm_4gpu.yaml's model (48 tables), which the seed plans are for.
constexpr std::string_view kPlanModel = R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [512, 1024, 256, 128]
  top_mlp: [1024, 512, 256, 1]
  embeddings:
    dim: 128
    tables:
      - {count: 6, rows: 4000000, pooling: 30}
      - {count: 10, rows: 2000000, pooling: 20}
      - {count: 14, rows: 500000, pooling: 10}
      - {count: 18, rows: 20000, pooling: 2}
  sharding: plan
  sharding_plan: input.yaml
)";

/// Builds `scenario` on `gpus` GPUs with `table_memory_fraction` of their memory for tables
/// and prices every kernel of the graph; returns quietly when the workload rejects the input.
void build_and_price(const std::string& scenario, uint32_t gpus, double table_memory_fraction) {
  ConfigDocument doc =
      ConfigDocument::parse_string(scenario, (scratch_dir() / "scenario.yaml").string());
  const Pricing& p = pricing();
  WorkloadPlatform platform;
  platform.gpus = gpus;
  platform.device = p.hardware.device;
  platform.table_memory_fraction = table_memory_fraction;
  platform.iterations = 1;
  platform.warmup_iterations = 0;
  TaskGraph graph;
  try {
    DlrmWorkload workload(doc.root().child("workload"));
    (void)workload.build(platform, graph);
    doc.check_all_keys_used();
  } catch (const ConfigError&) {
    return;  // a clean rejection: the file, line and key, and what was expected
  }
  graph.seal();  // the generator's graph is valid for every accepted input
  std::vector<bool> priced(graph.kernel_desc_count(), false);
  for (TaskId task = 0; task < graph.task_count(); ++task) {
    if (graph.task(task).kind != TaskKind::kKernel || priced[graph.kernel_desc_of(task)]) continue;
    priced[graph.kernel_desc_of(task)] = true;
    try {
      (void)p.model.kernel_duration(graph.kernel(task), platform.device);
    } catch (const std::range_error&) {
      // Past the simulator's time range: the executor names the kernel and the sizes to check.
    }
  }
}

enum class Role { kPlan, kCsvTables, kYamlTables };

/// A plan names rank_of_table; a tables CSV's first line that is neither blank nor a comment
/// has commas and no YAML or JSON punctuation; anything else is a YAML / JSON tables file.
Role role_of(std::string_view text) {
  if (text.find("rank_of_table") != std::string_view::npos) return Role::kPlan;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    const bool yaml = line.find_first_of(":{}[]\"") != std::string_view::npos;
    return !yaml && line.find(',') != std::string_view::npos ? Role::kCsvTables : Role::kYamlTables;
  }
  return Role::kYamlTables;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = fuzz::as_text(data, size);
  // The scenario is fixed (never malformed): only the file it references varies.
  switch (role_of(bytes)) {
    case Role::kPlan:
      write(scratch_dir() / "input.yaml", bytes);
      // 0.1 of 80 GiB: the seed plans fit (6.6 GB per rank), a plan that crowds a rank does not.
      build_and_price(std::string(kPlanModel), 4, 0.1);
      break;
    case Role::kCsvTables:
      write(scratch_dir() / "input.csv", bytes);
      build_and_price(std::string(kTablesModel) + "    tables_file: input.csv\n", 2, 0.8);
      break;
    case Role::kYamlTables:
      write(scratch_dir() / "input.yaml", bytes);
      build_and_price(std::string(kTablesModel) + "    tables_file: input.yaml\n", 2, 0.8);
      break;
  }
  return 0;
}

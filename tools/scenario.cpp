#include "tools/scenario.h"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <string_view>

#include "calibration/hardware_profile.h"
#include "calibration/model_registry.h"
#include "sim/config/quantity_parse.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/sharders.h"

namespace upsim::cli {

namespace {

constexpr std::array<std::string_view, 1> kWorkloadModels{"dlrm"};

/// Seed-method.md 5.2: the seed's task generator rejects table sets above 0.8 x GPU memory.
constexpr double kDefaultTableMemoryFraction = 0.8;

struct SimulationSection {
  uint32_t iterations;
  uint32_t warmup;
};

SimulationSection read_simulation(const ConfigNode& root) {
  const std::optional<ConfigNode> section = root.optional_child("simulation");
  if (!section) return {3, 1};  // the defaults below
  const ConfigNode& sim = *section;
  const int64_t iterations = sim.get_positive_int_or("iterations", 3);
  if (iterations > 1'000'000) sim.child("iterations").fail("must be at most 1000000");
  const int64_t warmup = sim.get_int_or("warmup_iterations", iterations > 1 ? 1 : 0);
  if (warmup < 0 || warmup >= iterations) {
    sim.child("warmup_iterations")
        .fail(fmt::format("must be between 0 and iterations - 1 = {}, got {}", iterations - 1,
                          warmup));
  }
  return {static_cast<uint32_t>(iterations), static_cast<uint32_t>(warmup)};
}

}  // namespace

Scenario build_scenario(ConfigDocument& doc) {
  Scenario s;
  const ConfigNode root = doc.root();
  s.name = root.get_string_or("name", doc.file().stem().string());
  const std::string description = root.get_string_or("description", "");

  // Platform: the GPUs and the models that price work on them.
  const ConfigNode platform = root.child("platform");
  const int64_t gpus = platform.get_positive_int("gpus");
  if (gpus > 65536) platform.child("gpus").fail("must be at most 65536");
  const HardwareProfile hardware = load_hardware_profile(platform.load_reference("gpu"));
  const double table_fraction =
      platform.get_double_or("table_memory_fraction", kDefaultTableMemoryFraction);
  if (!(table_fraction > 0.0 && table_fraction <= 1.0)) {
    platform.child("table_memory_fraction")
        .fail(fmt::format("must be in (0, 1], got {}", table_fraction));
  }
  const ConfigNode kernels = platform.child("kernels");
  const ConfigNode host = platform.child("host");
  const ConfigNode interconnect = platform.child("interconnect");
  s.models.kernels = make_kernel_cost_model(kernels, hardware);
  s.models.cpu = make_cpu_cost_model(host);
  s.models.collectives = make_collective_cost_model(interconnect, hardware);
  s.models.network = std::make_unique<AnalyticalNetwork>(*s.models.collectives);
  s.models.set.kernels = s.models.kernels.get();
  s.models.set.cpu = s.models.cpu.get();
  s.models.set.network = s.models.network.get();
  s.models.set.devices.assign(static_cast<size_t>(gpus), hardware.device);

  const SimulationSection sim = read_simulation(root);
  s.iterations = sim.iterations;
  s.warmup_iterations = sim.warmup;

  // Workload.
  const ConfigNode workload = root.child("workload");
  workload.get_choice("model", kWorkloadModels);
  const DlrmConfig dlrm = parse_dlrm_config(workload, static_cast<uint32_t>(gpus));
  doc.check_all_keys_used();

  DlrmPlacementInputs inputs;
  inputs.ranks = static_cast<uint32_t>(gpus);
  inputs.iterations = s.iterations;
  inputs.memory_capacity_bytes.assign(
      static_cast<size_t>(gpus),
      static_cast<int64_t>(static_cast<double>(hardware.device.hbm_bytes) * table_fraction));
  DlrmGraph built;
  try {
    built = generate_dlrm(dlrm, inputs, s.graph);
  } catch (const ShardingError& e) {
    workload.child("embeddings").child("tables").fail(e.what());
  }
  s.graph.seal();

  // What was simulated, for the summary.
  std::string text =
      fmt::format("scenario: {}{}{}\n", s.name, description.empty() ? "" : " — ", description);
  text += fmt::format("platform: {} x {}; kernels: {}; host: {}; interconnect: {}\n", gpus,
                      hardware.device.name, kernels.get_string("model"), host.get_string("model"),
                      interconnect.get_string("model"));
  text += fmt::format(
      "workload: dlrm, global batch {} ({} per rank), {} tables of dim {}, sharding {}, "
      "{} iterations ({} warm-up)\n",
      dlrm.global_batch, built.local_batch, dlrm.tables.size(), dlrm.embedding_dim,
      sharding_strategy_name(dlrm.sharding), s.iterations, s.warmup_iterations);
  text += "embedding tables:";
  for (size_t r = 0; r < built.placement.tables_of_rank.size(); ++r) {
    text += fmt::format("{} rank {} {} ({})", r == 0 ? "" : ",", r,
                        built.placement.tables_of_rank[r].size(),
                        format_bytes(built.placement.memory_bytes[r]));
  }
  text += "\n";
  s.description = std::move(text);
  return s;
}

}  // namespace upsim::cli

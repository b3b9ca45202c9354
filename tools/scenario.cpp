#include "tools/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <string_view>

#include "calibration/hardware_profile.h"
#include "calibration/model_registry.h"
#include "sim/config/quantity_parse.h"
#include "tools/trace_commands.h"
#include "topology/fabric_loader.h"
#include "topology/flow_network.h"
#include "topology/nccl_tuning.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/sharders.h"
#include "workloads/trace/chakra_trace.h"
#include "workloads/trace/trace_error.h"
#include "workloads/trace/trace_graph.h"
#include "workloads/trace/trace_replay.h"

namespace upsim::cli {

namespace {

constexpr std::array<std::string_view, 2> kWorkloadModels{"dlrm", "trace"};
/// The interconnect models a scenario may name: the registry's analytical collective models
/// (calibration/model_registry.h) and the fabric-aware flow network, which only tools/ can build.
std::vector<std::string_view> interconnect_models() {
  std::vector<std::string_view> names(kCollectiveModelNames.begin(), kCollectiveModelNames.end());
  names.push_back("flow");
  return names;
}

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

namespace {

/// What `workload: {model: trace, ...}` asks for (workloads/trace/trace_replay.h).
struct TraceWorkload {
  /// "kineto" (Kineto + execution traces) or "chakra" (Chakra ETs).
  std::string format;
  LoadedTraces traces;              ///< kineto
  std::vector<ChakraTrace> chakra;  ///< chakra, in rank order
  TraceSetOptions options;
  std::filesystem::path dir;
  /// `host`: measured, modelled (T1-T5 of the traces) or platform (platform.host's model).
  std::string host;

  size_t ranks() const { return format == "chakra" ? chakra.size() : traces.ranks.size(); }
};

TraceWorkload read_trace_workload(const ConfigNode& workload) {
  TraceWorkload t;
  t.dir = workload.get_path("traces");
  const bool explicit_format = workload.has("format");
  t.format = explicit_format ? workload.get_choice("format", {"kineto", "chakra"})
                             : (is_chakra_directory(t.dir) ? "chakra" : "kineto");
  const std::string mode = workload.get_choice_or("mode", {"replay", "model"}, "replay");
  t.options.graph.mode = mode == "model" ? TraceMode::kModel : TraceMode::kReplay;
  t.host = workload.get_choice_or("host", {"measured", "modelled", "platform"}, "measured");
  t.options.graph.host = t.host == "measured" ? TraceHost::kMeasured : TraceHost::kModelled;
  // A failure to read the traces is reported at `format` when the scenario chose the format.
  const std::string_view read_key = explicit_format ? "format" : "traces";
  if (t.format == "chakra") {
    // A Chakra ET holds one iteration per rank, CPU ops without the runtime calls T1-T5 are
    // placed by, and no execution-trace pairing.
    for (const char* key : {"iteration", "iteration_marker", "lenient_et"}) {
      if (workload.has(key)) {
        workload.child(key).fail(
            "not for Chakra traces (format: chakra): each trace is one iteration of one rank");
      }
    }
    if (t.host != "measured") {
      workload.child("host").fail(
          "Chakra traces hold no CUDA runtime calls to place T1-T5 host overheads by: host must be "
          "measured (format: chakra)");
    }
    try {
      t.chakra = load_chakra_directory(t.dir);
    } catch (const TraceError& e) {
      workload.child(read_key).fail(explicit_format ? fmt::format("format: chakra: {}", e.what())
                                                    : std::string(e.what()));
    }
    return t;
  }
  t.options.graph.iteration_marker = workload.get_string_or("iteration_marker", "ProfilerStep#");
  t.options.strict_et = !workload.get_bool_or("lenient_et", false);
  if (workload.has("iteration")) {
    const int64_t it = workload.get_int("iteration");
    if (it < 0) workload.child("iteration").fail("must not be negative");
    t.options.iteration = static_cast<uint32_t>(it);
  }
  try {
    t.traces = load_trace_directory(t.dir, t.options);
  } catch (const TraceError& e) {
    workload.child(read_key).fail(explicit_format ? fmt::format("format: kineto: {}", e.what())
                                                  : std::string(e.what()));
  }
  return t;
}

/// Rank 0's iteration marks, in order: the summary measures from the chosen one to the next.
std::vector<uint32_t> iteration_marks_of_rank0(const TaskGraph& g) {
  std::vector<uint32_t> marks;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind == TaskKind::kIterationMark && g.task(t).rank == 0) {
      marks.push_back(g.iteration_of(t));
    }
  }
  return marks;
}

}  // namespace

Scenario build_scenario(ConfigDocument& doc) {
  Scenario s;
  const ConfigNode root = doc.root();
  s.name = root.get_string_or("name", doc.file().stem().string());
  const std::string description = root.get_string_or("description", "");
  const ConfigNode workload = root.child("workload");
  const std::string workload_model = workload.get_choice("model", kWorkloadModels);
  std::optional<TraceWorkload> trace;
  if (workload_model == "trace") trace = read_trace_workload(workload);

  // Platform: the GPUs and the models that price work on them.
  const ConfigNode platform = root.child("platform");
  if (platform.has("topology")) {
    const ConfigNode topology = platform.load_reference("topology");
    s.models.fabric = std::make_unique<Fabric>(load_fabric(topology));
  }
  const int64_t fabric_gpus =
      s.models.fabric ? static_cast<int64_t>(s.models.fabric->gpus().size()) : 0;
  const int64_t implied_gpus = trace ? static_cast<int64_t>(trace->ranks()) : fabric_gpus;
  const int64_t gpus = implied_gpus > 0 ? platform.get_positive_int_or("gpus", implied_gpus)
                                        : platform.get_positive_int("gpus");
  if (gpus > 65536) platform.child("gpus").fail("must be at most 65536");
  if (s.models.fabric && gpus > fabric_gpus) {
    platform.child("gpus").fail(
        fmt::format("the topology `{}` has only {} GPUs", s.models.fabric->name(), fabric_gpus));
  }
  if (trace && gpus != implied_gpus) {
    platform.child("gpus").fail(fmt::format("the traces in {} have {} ranks, one per GPU",
                                            trace->dir.string(), implied_gpus));
  }
  const HardwareProfile hardware = load_hardware_profile(platform.load_reference("gpu"));
  const double table_fraction =
      trace ? kDefaultTableMemoryFraction
            : platform.get_double_or("table_memory_fraction", kDefaultTableMemoryFraction);
  if (!(table_fraction > 0.0 && table_fraction <= 1.0)) {
    platform.child("table_memory_fraction")
        .fail(fmt::format("must be in (0, 1], got {}", table_fraction));
  }
  const ConfigNode kernels = platform.child("kernels");
  const ConfigNode host = platform.child("host");
  const ConfigNode interconnect = platform.child("interconnect");
  s.models.kernels = make_kernel_cost_model(kernels, hardware);
  s.models.cpu = make_cpu_cost_model(host);
  if (trace && trace->host == "modelled") {
    s.models.cpu = std::make_unique<HostOverheadCpuCost>(trace_host_cost(trace->traces.ranks));
  }
  const std::string interconnect_model = interconnect.get_choice("model", interconnect_models());
  std::string interconnect_text = interconnect_model;
  if (interconnect_model == "flow") {
    if (!s.models.fabric) {
      interconnect.child("model").fail(
          "the flow network needs a fabric: add `platform.topology: topologies/<file>.yaml`");
    }
    CollectiveTuning tuning = nccl_like_tuning();
    if (interconnect.has("tuning")) {
      const ConfigNode t = interconnect.load_reference("tuning");
      tuning = load_collective_tuning(t);
    }
    s.models.network =
        std::make_unique<FlowNetwork>(*s.models.fabric, std::move(tuning),
                                      hardware.device.hbm_bandwidth * hardware.achievable.memory);
    interconnect_text = fmt::format("flow over `{}`", s.models.fabric->name());
  } else {
    s.models.collectives = make_collective_cost_model(interconnect, hardware);
    s.models.network = std::make_unique<AnalyticalNetwork>(*s.models.collectives);
  }
  s.models.set.kernels = s.models.kernels.get();
  s.models.set.cpu = s.models.cpu.get();
  s.models.set.network = s.models.network.get();
  s.models.set.devices.assign(static_cast<size_t>(gpus), hardware.device);

  std::string text =
      fmt::format("scenario: {}{}{}\n", s.name, description.empty() ? "" : " — ", description);
  text += fmt::format("platform: {} x {}; kernels: {}; host: {}; interconnect: {}\n", gpus,
                      hardware.device.name, kernels.get_string("model"), host.get_string("model"),
                      interconnect_text);

  if (trace) {
    doc.check_all_keys_used();
    const bool chakra = trace->format == "chakra";
    TraceGraphInfo info;
    std::vector<std::string> warnings = trace->traces.warnings;
    try {
      if (chakra) {
        ChakraGraphOptions options;
        options.mode = trace->options.graph.mode;
        info = build_chakra_graph(trace->chakra, s.graph, options, &warnings);
      } else {
        info = build_replay_graph(trace->traces.ranks, s.graph, trace->options.graph);
      }
    } catch (const TraceError& e) {
      workload.child("traces").fail(e.what());
    }
    s.graph.seal();
    // Measure the chosen iteration (or every complete one): from its mark to the next.
    const std::vector<uint32_t> marks = iteration_marks_of_rank0(s.graph);
    if (marks.size() < 2) workload.child("traces").fail("the traces hold no complete iteration");
    uint32_t first = 0;
    uint32_t count = static_cast<uint32_t>(marks.size() - 1);
    if (trace->options.iteration) {
      const auto it = std::find(marks.begin(), marks.end(), *trace->options.iteration);
      if (it == marks.end() || it + 1 == marks.end()) {
        workload.child("iteration")
            .fail(
                fmt::format("the traces have no complete iteration {}", *trace->options.iteration));
      }
      first = static_cast<uint32_t>(it - marks.begin());
      count = 1;
    }
    s.iterations = first + count;
    s.warmup_iterations = first;
    s.measured_iterations = count;
    for (const TraceRankSummary& r : info.ranks) {
      Duration measured = Duration::zero();
      uint32_t n = 0;
      for (const TraceIteration& it : r.iterations) {
        if (it.start_mark >= marks[first] && it.end_mark <= marks[first + count]) {
          measured += it.measured;
          ++n;
        }
      }
      s.measured_iteration.push_back(n > 0 ? measured / n : Duration::zero());
    }
    const bool model = trace->options.graph.mode == TraceMode::kModel;
    const std::string host_text = trace->host == "measured" ? ""
                                  : trace->host == "modelled"
                                      ? ", host time T1-T5 of the traces"
                                      : ", host time by the platform's host model";
    text += fmt::format(
        "workload: trace ({}{} mode{}) of {} ranks from {}; {}\n", chakra ? "Chakra ET, " : "",
        model ? "model" : "replay", host_text, info.ranks.size(), workload.get_string("traces"),
        trace->options.iteration ? fmt::format("iteration {}", *trace->options.iteration)
                                 : fmt::format("{} iteration{}", count, count == 1 ? "" : "s"));
    if (model) {
      uint64_t kernel_count = 0;
      uint64_t kernels_kept = 0;
      uint64_t collectives = 0;
      uint64_t collectives_kept = 0;
      for (const TraceRankSummary& r : info.ranks) {
        kernel_count += r.kernels;
        kernels_kept += r.kernels_kept_measured;
        collectives += r.collectives;
        collectives_kept += r.collectives_kept_measured;
      }
      text += fmt::format(
          "model mode: kept measured {} of {} kernels (no shapes, or no kernel model for the op), "
          "{} of {} collectives (no peer rank in the traces); the rest priced by the platform\n",
          kernels_kept, kernel_count, collectives_kept, collectives);
    }
    // Files named as the scenario names their folder, so the summary does not depend on where
    // the scenario is run from.
    const std::string dir_text = trace->dir.string();
    const std::string traces_text = workload.get_string("traces");
    for (std::string w : warnings) {
      if (w.starts_with(dir_text)) w = traces_text + w.substr(dir_text.size());
      text += "warning: " + w + "\n";
    }
    s.description = std::move(text);
    return s;
  }

  const SimulationSection sim = read_simulation(root);
  s.iterations = sim.iterations;
  s.warmup_iterations = sim.warmup;
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

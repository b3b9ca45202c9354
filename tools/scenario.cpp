#include "tools/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "calibration/borrowed_calibration.h"
#include "calibration/calibrated_kernel_cost.h"
#include "calibration/gemm_launch_config.h"
#include "calibration/hardware_profile.h"
#include "calibration/host_overhead_cpu_cost.h"
#include "calibration/kernel_calibration.h"
#include "calibration/model_registry.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/quantity_parse.h"
#include "tools/memory_limit.h"
#include "tools/unstated_models.h"
#include "topology/fabric_loader.h"
#include "topology/flow_network.h"
#include "topology/nccl_tuning.h"

namespace upsim::cli {

namespace {

/// The interconnect models a scenario may name: the registry's analytical collective models
/// (calibration/model_registry.h) and the fabric-aware flow network, which only tools/ can build.
std::vector<std::string_view> interconnect_models() {
  std::vector<std::string_view> names(kCollectiveModelNames.begin(), kCollectiveModelNames.end());
  names.push_back("flow");
  return names;
}

/// Uses (ConfigNode::read_for) of the platform's model sections: keys read through them change
/// nothing when the workload prices no work with that model.
constexpr std::string_view kKernelModelUse = "kernel model";
constexpr std::string_view kHostModelUse = "host model";
constexpr std::string_view kInterconnectModelUse = "interconnect model";

/// Which of the platform's models price the workload's work (a trace workload may replay
/// measured times); the reasons say why one does not.
struct WorkloadPricing {
  std::string no_gpu_work;  ///< empty: kernels, copies and collectives are priced
  std::string no_host;      ///< empty: platform.host prices host time
};

WorkloadPricing workload_pricing(const Workload& workload, const WorkloadBuild& built,
                                 bool measured) {
  WorkloadPricing p;
  if (workload.host_overheads()) {
    p.no_host =
        "the workload prices host time with the host overheads measured with it, not "
        "platform.host's model";
  }
  if (!measured) return p;
  if (!built.measured_run.prices_gpu_work) {
    p.no_gpu_work =
        "the workload replays its measured kernel, copy and collective times (no model prices "
        "GPU work)";
  }
  if (!built.measured_run.prices_host && p.no_host.empty()) {
    p.no_host = "the workload replays its measured host time (no model prices it)";
  }
  return p;
}

/// The uses (ConfigNode::read_for) of the scenario's files that no active model reads, with the
/// reasons (ConfigDocument::unused_key_warnings). `gpu_pcie_links`: the fabric's PCIe links at
/// GPUs, which the GPU's pcie_generation caps.
std::vector<InactiveUse> inactive_uses(const ConfigNode& kernels, const ConfigNode& interconnect,
                                       std::string_view interconnect_model,
                                       const HardwareProfile& hardware, const Fabric* fabric,
                                       bool gpu_pcie_links, const WorkloadPricing& pricing) {
  std::vector<InactiveUse> out;
  const auto add = [&](std::string_view use, const std::string& reason, bool only_if_set) {
    out.push_back(InactiveUse{std::string(use), reason, only_if_set});
  };
  if (!pricing.no_host.empty()) add(kHostModelUse, pricing.no_host, true);
  if (!pricing.no_gpu_work.empty()) {
    // Required sections and library facts: news only when a what-if changes them.
    for (std::string_view use :
         {kKernelModelUse, kInterconnectModelUse, kHardwareComputeUse, kHardwareMemoryUse,
          kHardwareL2Use, kHardwareFp8Use, kHardwareKernelOverheadUse, kHardwareHostLinkUse,
          kCalibrationKernelOverheadUse, kCalibrationAttentionUse, kCalibrationValidationUse,
          kFabricLinkCapacityUse}) {
      add(use, pricing.no_gpu_work, true);
    }
    return out;
  }
  for (InactiveUse& u : kernel_model_unread_uses(kernels, hardware))
    out.push_back(std::move(u));
  if (interconnect_model == "flow") {
    if (!gpu_pcie_links) {
      add(kHardwareHostLinkUse,
          fmt::format("the fabric `{}` has no PCIe link at a GPU for the GPU's pcie_generation "
                      "to cap (host copies cross the links it states)",
                      fabric->name()),
          true);
    }
    return out;
  }
  for (InactiveUse& u : collective_model_unread_uses(interconnect))
    out.push_back(std::move(u));
  // A fabric given with a model that does not read it: the scenario asked for both.
  if (fabric != nullptr) {
    add(kFabricLinkCapacityUse,
        fmt::format("interconnect model `{}` prices collectives and copies with {}, not the "
                    "fabric's links (only `flow` moves bytes over them)",
                    interconnect_model, collective_model_basis(interconnect_model)),
        false);
  }
  return out;
}

/// A --set pcie_generation that moves no PCIe link at the GPUs of the fabric (each is stated at
/// or below both generations' rates, and a link runs at its slower end): the warning naming the
/// GPU's key and the topology's.
std::optional<std::string> unchanged_pcie_links_warning(const ConfigNode& gpu_profile,
                                                        const std::vector<GpuPcieLink>& links) {
  const ConfigNode now = gpu_profile.read_for(kHardwareHostLinkUse).child("pcie_generation");
  const std::optional<ConfigNode> written = now.as_written();
  if (links.empty() || !written || !written->is_scalar()) return std::nullopt;
  const std::optional<Bandwidth> before = pcie_x16_bandwidth(written->as_int());
  const std::optional<Bandwidth> after = pcie_x16_bandwidth(now.as_int());
  if (!before || !after || *before == *after) return std::nullopt;
  for (const GpuPcieLink& link : links) {
    if (std::min(link.stated, *before) != std::min(link.stated, *after)) return std::nullopt;
  }
  const GpuPcieLink& first = links.front();
  return fmt::format(
      "{} is {} ({} per direction on x16) instead of the profile's {} ({}), but that moves no "
      "link: the topology states its {} PCIe link{} at the GPUs at {} ({} for {}), and a PCIe "
      "link runs at the slower of its two ends",
      now.key_path(), now.as_int(), format_bandwidth(*after), written->as_int(),
      format_bandwidth(*before), links.size(), links.size() == 1 ? "" : "s",
      format_bandwidth(first.stated), first.stated_at, first.name);
}

/// Seed-method.md 5.2: the seed's task generator rejects table sets above 0.8 x GPU memory.
constexpr double kDefaultTableMemoryFraction = 0.8;

struct SimulationSection {
  uint32_t iterations;
  uint32_t warmup;
  bool given;  ///< `iterations` was set; otherwise the steady-state search chooses
               ///< (tools/steady_state.h)
};

/// `simulation:` of a workload that simulates iterations. Without `iterations`, the run has
/// `chosen.iterations` of which all but the last `chosen.measured` are warm-up
/// (run_to_steady_state grows it).
SimulationSection read_simulation(const ConfigNode& root, ChosenIterations chosen_count) {
  const uint32_t measured = std::min(chosen_count.measured, chosen_count.iterations);
  const SimulationSection chosen{chosen_count.iterations, chosen_count.iterations - measured,
                                 false};
  const std::optional<ConfigNode> section = root.optional_child("simulation");
  if (!section) return chosen;
  const ConfigNode& sim = *section;
  if (!sim.has("iterations")) {
    if (sim.has("warmup_iterations")) {
      sim.child("warmup_iterations")
          .fail(
              "needs `iterations`: without it upsim simulates until the iteration time converges "
              "and leaves out every iteration before the last two");
    }
    return chosen;
  }
  const int64_t iterations = sim.get_positive_int("iterations");
  if (iterations > 1'000'000) sim.child("iterations").fail("must be at most 1000000");
  const int64_t warmup = sim.get_int_or("warmup_iterations", iterations > 1 ? 1 : 0);
  if (warmup < 0 || warmup >= iterations) {
    sim.child("warmup_iterations")
        .fail(fmt::format("must be between 0 and iterations - 1 = {}, got {}", iterations - 1,
                          warmup));
  }
  return {static_cast<uint32_t>(iterations), static_cast<uint32_t>(warmup), true};
}

/// `memory per GPU (rank 0): weights 1.2 GiB, gradients 1.2 GiB, total 2.4 GiB of 40 GiB
/// (A100-SXM4-40GB)`.
std::string memory_line(const MemoryFootprint& memory, const DeviceProfile& device) {
  std::string text = fmt::format("memory per GPU ({}):", memory.owner);
  for (size_t i = 0; i < memory.parts.size(); ++i) {
    text += fmt::format("{} {} {}", i == 0 ? "" : ",", memory.parts[i].name,
                        format_bytes(memory.parts[i].bytes));
  }
  text +=
      fmt::format("{} total {} of {} ({})", memory.parts.empty() ? "" : ",",
                  format_bytes(memory.total_bytes()), format_bytes(device.hbm_bytes), device.name);
  return text;
}

/// Words of a GPU name for gpu_names_match: lower case, split at non-alphanumerics, brand words
/// dropped.
std::set<std::string> gpu_name_words(std::string_view name) {
  std::set<std::string> words;
  std::string word;
  const auto flush = [&] {
    if (!word.empty() && word != "nvidia" && word != "tesla" && word != "geforce" &&
        word != "quadro") {
      words.insert(word);
    }
    word.clear();
  };
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      flush();
    }
  }
  flush();
  return words;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : std::string(separator)) + parts[i];
  return out;
}

/// platform.gpu_recorded_as (scenario.h, MeasuredComparison).
constexpr std::string_view kGpuRecordedAs = "platform.gpu_recorded_as";

/// platform.gpu_recorded_as: recorded GPU names (each one the measurements recorded) that
/// platform.gpu's profile stands for; empty when absent. Only for workloads with measured
/// iterations.
std::vector<std::string> read_gpu_recorded_as(const std::optional<ConfigNode>& node,
                                              const MeasuredRun& measured, bool has_measured) {
  if (!node) return {};
  if (!has_measured) {
    node->fail("names GPUs as measurements recorded them; this workload replays no measurement");
  }
  std::vector<std::string> names = node->as_string_list();
  for (const std::string& name : names) {
    if (std::find(measured.gpus.begin(), measured.gpus.end(), name) == measured.gpus.end()) {
      node->fail(fmt::format(
          "`{}` is no GPU the measurements recorded ({})", name,
          measured.gpus.empty() ? std::string("they record none") : join(measured.gpus, ", ")));
    }
  }
  return names;
}

/// The rule of MeasuredComparison (scenario.h). `overrides`: the document's --set key paths;
/// `host_model`: platform.host's model name. Appends a warning when the platform differs but
/// prices nothing (the prediction is then the measured platform's, whatever the platform says).
/// `recorded_as`: the recorded GPU names platform.gpu_recorded_as says the profile stands for.
MeasuredComparison compare_with_measured(const MeasuredRun& measured, const DeviceProfile& device,
                                         const std::vector<std::string>& recorded_as,
                                         const std::vector<std::string>& overrides,
                                         std::string_view host_model,
                                         std::vector<std::string>& warnings) {
  if (!measured.not_an_iteration.empty()) {
    return {MeasuredComparison::Kind::kNone, measured.not_an_iteration};
  }
  std::vector<std::string> differences;
  std::vector<std::string> other_gpus;
  for (const std::string& gpu : measured.gpus) {
    const bool stated = std::find(recorded_as.begin(), recorded_as.end(), gpu) != recorded_as.end();
    if (!stated && !gpu_names_match(gpu, device.name)) other_gpus.push_back(gpu);
  }
  if (!other_gpus.empty()) {
    differences.push_back(fmt::format("platform.gpu is {}, the traces ran on {}", device.name,
                                      join(other_gpus, ", ")));
  }
  std::vector<std::string> platform_overrides;
  for (const std::string& key : overrides) {
    // gpu_recorded_as changes no platform: it says which one the traces ran on.
    if (key == kGpuRecordedAs) continue;
    if (key == "platform" || key.starts_with("platform.") || key.starts_with("platform[")) {
      platform_overrides.push_back("--set " + key);
    }
  }
  if (!platform_overrides.empty()) differences.push_back(join(platform_overrides, ", "));
  if (measured.prices_host) {
    differences.push_back(
        fmt::format("host time priced by platform.host ({}), not the traced host", host_model));
  }
  if (differences.empty()) return {MeasuredComparison::Kind::kError, ""};
  const std::string reason = join(differences, "; ");
  if (!measured.prices_gpu_work && !measured.prices_host) {
    warnings.push_back(fmt::format(
        "the platform is not the measured one ({}), but the workload prices no work with the "
        "platform's models (every duration is the measured one), so the prediction is the "
        "measured platform's",
        reason));
  }
  return {MeasuredComparison::Kind::kWhatIf, reason};
}

}  // namespace

bool gpu_names_match(std::string_view recorded, std::string_view profile_name) {
  const std::set<std::string> a = gpu_name_words(recorded);
  const std::set<std::string> b = gpu_name_words(profile_name);
  if (a.empty() || b.empty()) return false;
  return std::includes(a.begin(), a.end(), b.begin(), b.end()) ||
         std::includes(b.begin(), b.end(), a.begin(), a.end());
}

namespace {

/// After `--set` overrides the file's description may no longer say what runs ("8x A100" on a
/// 1024x H100 run): the description then says which keys changed, in the summary and in the
/// resolved scenario.yaml alike. An overridden description is the user's own and kept.
void mark_description_as_overridden(ConfigDocument& doc) {
  const std::vector<std::string>& overrides = doc.overrides();
  if (overrides.empty()) return;
  for (const std::string& key : overrides) {
    if (key == "description") return;
  }
  const std::optional<ConfigNode> node = doc.root().optional_child("description");
  if (!node || !node->is_scalar()) return;
  std::string keys;
  for (const std::string& key : overrides)
    keys += (keys.empty() ? "" : ", ") + key;
  const std::string marked = fmt::format(
      "{} (as written before --set {}; the lines below are what runs)", node->as_string(), keys);
  std::string quoted = "\"";
  for (const char c : marked) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c == '\n' ? ' ' : c;
  }
  doc.apply_override("description=" + quoted + "\"");
}

}  // namespace

size_t machine_task_limit(size_t bytes_per_task) {
  const uint64_t bytes = process_memory_limit().bytes;
  return static_cast<size_t>(
      std::min<uint64_t>(bytes / std::max<size_t>(1, bytes_per_task), TaskGraph().task_limit()));
}

ConfigDocument load_scenario(const std::filesystem::path& file,
                             std::span<const std::string> overrides) {
  ConfigDocument doc = ConfigDocument::load_file(file);
  for (const std::string& assignment : overrides)
    doc.apply_override(assignment);
  return doc;
}

Scenario build_scenario(ConfigDocument& doc, ChosenIterations chosen) {
  return build_scenario(doc, default_workload_registry(), chosen);
}

namespace {

/// `platform.topology`, when given: the fabric, built with the GPU's PCIe interface capping the
/// PCIe links at it (topology/fabric_loader.h), and those links in `gpu_pcie_links`.
void load_platform_fabric(const ConfigNode& platform, const HardwareProfile& hardware,
                          ScenarioModels& models, std::vector<GpuPcieLink>& gpu_pcie_links) {
  if (platform.has("topology")) {
    const ConfigNode topology = platform.load_reference("topology");
    FabricOptions options;
    options.gpu_pcie_rate = hardware.device.host_link_bandwidth;
    models.fabric = std::make_unique<Fabric>(load_fabric(topology, options, &gpu_pcie_links));
  }
}

/// `platform.gpus`, checked against what the workload implies and what the fabric holds.
int64_t read_platform_gpus(const ConfigNode& platform, const Workload& workload,
                           const Fabric* fabric) {
  const int64_t fabric_gpus = fabric ? static_cast<int64_t>(fabric->gpus().size()) : 0;
  const std::optional<uint32_t> workload_gpus = workload.implied_gpus();
  const int64_t implied_gpus = workload_gpus ? static_cast<int64_t>(*workload_gpus) : fabric_gpus;
  const int64_t gpus = implied_gpus > 0 ? platform.get_positive_int_or("gpus", implied_gpus)
                                        : platform.get_positive_int("gpus");
  // The largest fabric the loader builds: kMaxNodes (16384) nodes of 8 GPUs.
  constexpr int64_t kMaxGpus = 131072;
  if (gpus > kMaxGpus) platform.child("gpus").fail(fmt::format("must be at most {}", kMaxGpus));
  if (fabric && gpus > fabric_gpus) {
    platform.child("gpus").fail(
        fmt::format("the topology `{}` has only {} GPUs", fabric->name(), fabric_gpus));
  }
  if (workload_gpus && gpus != implied_gpus) {
    platform.child("gpus").fail(workload.implied_gpus_reason());
  }
  // A run on part of a fabric changes what the collectives cross (e.g. 8 of 16 GPUs never touch
  // the network), so it must be asked for, not fall out of a stale gpus value.
  const bool partial_fabric = fabric && platform.get_bool_or("partial_fabric", false);
  if (fabric && gpus < fabric_gpus && !partial_fabric) {
    const ConfigNode at = platform.has("gpus") ? platform.child("gpus") : platform;
    at.fail(fmt::format(
        "{} GPUs, but the topology `{}` has {}: set `gpus: {}` (or the topology's `nodes`), or "
        "`platform.partial_fabric: true` to run on its first {} GPUs",
        gpus, fabric->name(), fabric_gpus, fabric_gpus, gpus));
  }
  return gpus;
}

/// `platform.table_memory_fraction`, read only for a generated workload.
double read_table_memory_fraction(const ConfigNode& platform, bool generated) {
  const double table_fraction =
      generated ? platform.get_double_or("table_memory_fraction", kDefaultTableMemoryFraction)
                : kDefaultTableMemoryFraction;
  if (!(table_fraction > 0.0 && table_fraction <= 1.0)) {
    platform.child("table_memory_fraction")
        .fail(fmt::format("must be in (0, 1], got {}", table_fraction));
  }
  return table_fraction;
}

/// The network model of `platform.interconnect` (`model` already read): the flow network over
/// the fabric, or the analytical collective model. Returns the platform line's interconnect text.
std::string make_network_model(const ConfigNode& interconnect,
                               const std::string& interconnect_model,
                               const HardwareProfile& hardware, int64_t gpus,
                               ScenarioModels& models) {
  std::string interconnect_text = interconnect_model;
  if (interconnect_model == "flow") {
    if (!models.fabric) {
      interconnect.child("model").fail(
          "the flow network needs a fabric: add `platform.topology: topologies/<file>.yaml`");
    }
    CollectiveTuning tuning = nccl_like_tuning();
    if (interconnect.has("tuning")) {
      const ConfigNode t = interconnect.load_reference("tuning");
      tuning = load_collective_tuning(t);
    }
    // Communication kernels take SMs and HBM bandwidth from compute (sim/executor.h); false
    // prices compute as if NCCL ran on SMs and memory of its own (the view of simulators without
    // interference).
    if (!interconnect.get_bool_or("compute_interference", true)) tuning.communication_sms.clear();
    models.network =
        std::make_unique<FlowNetwork>(*models.fabric, std::move(tuning),
                                      hardware.device.hbm_bandwidth * hardware.achievable.memory);
    interconnect_text = fmt::format("flow over `{}`", models.fabric->name());
    const int64_t fabric_gpus = static_cast<int64_t>(models.fabric->gpus().size());
    if (gpus < fabric_gpus) {
      interconnect_text += fmt::format(" (its first {} of {} GPUs)", gpus, fabric_gpus);
    }
  } else {
    models.collectives = make_collective_cost_model(interconnect, hardware);
    models.network = std::make_unique<AnalyticalNetwork>(*models.collectives);
  }
  return interconnect_text;
}

/// The platform's model sections, read for their uses (ConfigNode::read_for), so that a workload
/// that prices no work with one of them names the keys that then change nothing (inactive_uses).
struct PlatformModelSections {
  // Absent only for a trace workload that left the section out (a replay prices nothing with
  // it); require_pricing_sections refuses the scenario when the workload would.
  std::optional<ConfigNode> kernels;
  std::optional<ConfigNode> host;
  std::optional<ConfigNode> interconnect;
  std::string kernel_model;  ///< the section's `model`, or kUnstatedModel
  std::string host_model;
  std::string interconnect_model;
  std::string interconnect_text;    ///< the platform line's
  std::string gemm_launch_warning;  ///< a GEMM schedule asked for and not priced, else empty
};

/// The platform line's model name for a section a trace replay left out.
constexpr std::string_view kUnstatedModel = "none (replayed)";

/// The kernel model of `platform.kernels`, or a stand-in without it.
void make_kernel_model(PlatformModelSections& sections, const HardwareProfile& hardware,
                       ScenarioModels& models) {
  if (!sections.kernels) {
    models.kernels = std::make_unique<UnstatedKernelModel>();
    sections.kernel_model = kUnstatedModel;
    return;
  }
  models.kernels = make_kernel_cost_model(*sections.kernels, hardware);
  sections.kernel_model = sections.kernels->get_string("model");
  models.set.gemm_launch = read_gemm_launch(*sections.kernels, hardware.device);
  // A static persistent schedule needs the GEMMs' tiles; a kernel model that states none
  // (KernelCostModel::gemm_ctas: roofline) shares SMs in proportion, and the platform line says so.
  if (models.set.gemm_launch.schedule == GemmSchedule::kStaticPersistent &&
      models.kernels->gemm_ctas(gemm_kernel(DType::kBf16, 1, 4096, 4096, 4096), hardware.device) ==
          0) {
    models.set.gemm_launch.schedule = GemmSchedule::kPerTile;
    if (sections.kernels->has("gemm_schedule")) {
      sections.gemm_launch_warning = fmt::format(
          "platform.kernels.gemm_schedule: static_persistent needs a kernel model that tiles "
          "GEMMs; the `{}` model states no tiles, so GEMMs share SMs with communication in "
          "proportion (per_tile)",
          sections.kernel_model);
    }
  }
}

/// The kernel, host and network models of the platform's sections, into `models` (with
/// `models.set` pointing at them and one device per GPU). A workload that simulates iterations
/// needs all three sections; a trace workload may leave out those its replay does not use.
PlatformModelSections make_platform_models(const ConfigNode& platform, const Workload& workload,
                                           const HardwareProfile& hardware, int64_t gpus,
                                           ScenarioModels& models) {
  const bool may_leave_out = !workload.simulates_iterations();
  const auto section = [&](std::string_view key,
                           std::string_view use) -> std::optional<ConfigNode> {
    if (may_leave_out && !platform.has(key)) return std::nullopt;
    return platform.child(key).read_for(use);
  };
  PlatformModelSections sections;
  sections.kernels = section("kernels", kKernelModelUse);
  sections.host = section("host", kHostModelUse);
  sections.interconnect = section("interconnect", kInterconnectModelUse);
  models.set.devices.assign(static_cast<size_t>(gpus), hardware.device);
  make_kernel_model(sections, hardware, models);
  if (sections.host) {
    models.cpu = make_cpu_cost_model(*sections.host);
    sections.host_model = sections.host->get_string("model");
  } else {
    models.cpu = std::make_unique<UnstatedCpuModel>();
    sections.host_model = kUnstatedModel;
  }
  if (const std::optional<HostOverheads> measured = workload.host_overheads()) {
    models.cpu = std::make_unique<HostOverheadCpuCost>(*measured);
  }
  if (sections.interconnect) {
    const ConfigNode& interconnect = *sections.interconnect;
    sections.interconnect_model = interconnect.get_choice("model", interconnect_models());
    sections.interconnect_text =
        make_network_model(interconnect, sections.interconnect_model, hardware, gpus, models);
    // The flow network's link rates take their share of the kernels' HBM bandwidth
    // (sim/hbm_sharing.h), unless compute_interference is off.
    if (sections.interconnect_model == "flow" &&
        interconnect.get_bool_or("compute_interference", true)) {
      models.set.achievable_memory_fraction = hardware.achievable.memory;
    }
  } else {
    models.collectives = std::make_unique<UnstatedCollectiveModel>();
    models.network = std::make_unique<AnalyticalNetwork>(*models.collectives);
    sections.interconnect_text = kUnstatedModel;
  }
  models.set.kernels = models.kernels.get();
  models.set.cpu = models.cpu.get();
  models.set.network = models.network.get();
  return sections;
}

/// Refuses a scenario that left out a model section its workload prices work with, naming the
/// section and why it is needed.
void require_pricing_sections(const ConfigNode& platform, const PlatformModelSections& sections,
                              bool prices_gpu_work, bool prices_host) {
  const auto missing = [&](std::string_view key, std::string_view what) {
    platform.fail(fmt::format(
        "missing `{}`: this workload prices {} with the platform's model (a replay of measured "
        "times would not need it); e.g. {}",
        key, what,
        key == "kernels" ? "kernels: {model: roofline}"
        : key == "host"  ? "host: {model: host_overheads, overheads: host/v100_pytorch_kineto.yaml}"
                         : "interconnect: {model: alpha_beta, link: nvlink2}"));
  };
  if (prices_gpu_work && !sections.kernels) missing("kernels", "its kernels");
  if (prices_gpu_work && !sections.interconnect) missing("interconnect", "its collectives");
  if (prices_host && !sections.host) missing("host", "its host time");
}

/// The scenario and platform lines of the summary; fills `s.description_text` and `s.platform`.
std::string describe_platform(Scenario& s, const std::string& description, int64_t gpus,
                              const HardwareProfile& hardware,
                              const PlatformModelSections& sections) {
  std::string text =
      fmt::format("scenario: {}{}{}\n", s.name, description.empty() ? "" : " — ", description);
  // A power-capped or clock-limited part says at what clock its peaks are priced.
  const DeviceProfile& d = hardware.device;
  const std::string clock =
      d.sustained_sm_clock_mhz > 0
          ? fmt::format(" (SMs at {} MHz sustained, of {} MHz boost: peaks scaled to it)",
                        d.sustained_sm_clock_mhz, d.sm_boost_clock_mhz)
          : "";
  // How GEMMs share SMs with communication kernels (sim/gemm_launch.h), when not per tile.
  const GemmLaunch& launch = s.models.set.gemm_launch;
  std::string gemms;
  if (launch.schedule != GemmSchedule::kPerTile || launch.sm_carveout > 0) {
    gemms = fmt::format(
        " (GEMMs {}{})", gemm_schedule_name(launch.schedule),
        launch.sm_carveout > 0 ? fmt::format(", {} SMs carved out", launch.sm_carveout) : "");
  }
  text += fmt::format("platform: {} x {}{}; kernels: {}{}; host: {}; interconnect: {}\n", gpus,
                      d.name, clock, sections.kernel_model, gemms, sections.host_model,
                      sections.interconnect_text);
  s.description_text = description;
  s.platform.gpus = static_cast<uint32_t>(gpus);
  s.platform.gpu = hardware.device.name;
  s.platform.gpu_memory_bytes = hardware.device.hbm_bytes;
  s.platform.kernel_model = sections.kernel_model;
  s.platform.host_model = sections.host_model;
  s.platform.interconnect = sections.interconnect_text;
  if (s.models.fabric) s.platform.fabric = s.models.fabric->name();
  return text;
}

/// The workload's build into `graph`; a graph past the task limit or the allocator fails at
/// `workload_node`: as a SharedMemoryLimitError when the run had a share of the limit, else as a
/// MachineLimitError unless the limit is this run's own.
WorkloadBuild build_workload(Workload& workload, const WorkloadPlatform& on, TaskGraph& graph,
                             const ConfigNode& workload_node, const ScenarioLimits& limits) {
  const bool shared = limits.memory_shares > 1;
  // `own_limit`: the limit passed is limits.max_tasks, this run's own, not the machine's.
  const auto fail = [&](const std::string& message, bool own_limit) {
    try {
      workload_node.fail(message);
    } catch (const ConfigError& e) {
      if (shared) throw SharedMemoryLimitError(MachineLimitError(e));
      if (own_limit) throw;
      throw MachineLimitError(e);
    }
  };
  const MemoryLimit memory = process_memory_limit();
  const std::string memory_text =
      format_bytes(static_cast<int64_t>(std::min<uint64_t>(memory.bytes, INT64_MAX)));
  const std::string share_text =
      shared ? fmt::format(", shared by {} runs at once", limits.memory_shares) : std::string();
  try {
    return workload.build(on, graph);
  } catch (const TaskLimitError&) {
    fail(
        fmt::format(
            "the run needs more than {} tasks (about {} of memory at {} B a task), more than {}{}: "
            "simulate fewer GPUs (platform.gpus), layers or iterations (simulation.iterations)",
            graph.task_limit(),
            format_bytes(static_cast<int64_t>(graph.task_limit()) *
                         static_cast<int64_t>(workload.peak_bytes_per_task())),
            workload.peak_bytes_per_task(),
            limits.max_tasks != 0
                ? std::string("this run's limit")
                : fmt::format("this process's memory holds ({}: {})", memory.source, memory_text),
            share_text),
        limits.max_tasks != 0);
  } catch (const std::bad_alloc&) {
    // The graph outgrew what the allocator could give before the task limit was reached (a
    // limit the lookup could not see, or other state larger than peak_bytes_per_task predicts).
    fail(fmt::format(
             "ran out of memory building the task graph after {} tasks ({}: {}{}): simulate fewer "
             "GPUs (platform.gpus), layers or iterations (simulation.iterations)",
             graph.task_count(), memory.source, memory_text, share_text),
         false);
  }
  throw std::logic_error("build_workload: a failure that did not throw");
}

/// The memory line of the summary, into `text`; a footprint over the GPU's memory fails at
/// `workload_node`, or with platform.memory_check: warn becomes the first warning.
void check_memory(const MemoryFootprint& memory, const DeviceProfile& device,
                  bool memory_check_warns, const ConfigNode& workload_node, std::string& text,
                  std::vector<std::string>& warnings) {
  text += memory_line(memory, device) + "\n";
  // The caching allocator's reserve above the peak allocation (transformer_memory.h) is given
  // back when an allocation fails (the allocator frees its cached blocks and retries): a
  // footprint that fits without it runs, with those retries.
  const int64_t allocated = memory.allocated_bytes();
  const int64_t reserve = memory.total_bytes() - allocated;
  // A footprint within the memory model's largest held-out underestimate of the GPU's memory
  // may not fit it.
  const auto total = static_cast<double>(memory.total_bytes());
  if (memory.total_bytes() <= device.hbm_bytes &&
      total * (1.0 + kMemoryModelLargestUnderestimate) > static_cast<double>(device.hbm_bytes)) {
    warnings.push_back(fmt::format(
        "memory: {} on {} is {:.1f}% of the {} of the {}, within the memory model's largest "
        "held-out underestimate ({:.1f}%, `upsim validate memory`) of it: the step may reach "
        "cudaMalloc retries (the caching allocator frees its cache and synchronizes the GPU), "
        "which upsim does not price; published runs this close to the GPU's memory ran slower "
        "than predicted",
        format_bytes(memory.total_bytes()), memory.owner,
        100.0 * total / static_cast<double>(device.hbm_bytes), format_bytes(device.hbm_bytes),
        device.name, 100.0 * kMemoryModelLargestUnderestimate));
  }
  if (allocated <= device.hbm_bytes && memory.total_bytes() > device.hbm_bytes) {
    warnings.push_back(fmt::format(
        "memory: {} allocated at the peak on {} fits the {} of the {}, but not with the caching "
        "allocator's reserve ({}): expect cudaMalloc retries (the allocator frees its cache and "
        "synchronizes the GPU), which upsim does not price; PyTorch's expandable segments "
        "(workload.allocator: expandable_segments) avoid them",
        format_bytes(allocated), memory.owner, format_bytes(device.hbm_bytes), device.name,
        format_bytes(reserve)));
  }
  if (allocated > device.hbm_bytes) {
    const std::string need = fmt::format(
        "needs {} of GPU memory on {}, more than the {} of the {} (platform.gpu)",
        format_bytes(allocated), memory.owner, format_bytes(device.hbm_bytes), device.name);
    if (!memory_check_warns) {
      workload_node.fail(fmt::format(
          "{}; use a larger GPU or a smaller workload, or set platform.memory_check: warn to "
          "simulate it anyway",
          need));
    }
    warnings.insert(warnings.begin(), "the workload " + need);
  }
}

/// The build's results into `s`, its description lines and memory line into `text`.
/// `recorded_as`: platform.gpu_recorded_as when given.
void take_build(Scenario& s, WorkloadBuild& built, const ConfigDocument& doc,
                const HardwareProfile& hardware, const PlatformModelSections& sections,
                bool memory_check_warns, const ConfigNode& workload_node,
                const std::optional<ConfigNode>& recorded_as_node, std::string& text) {
  s.iterations = built.iterations;
  s.warmup_iterations = built.warmup_iterations;
  s.measured_iterations = built.measured_iterations;
  s.measured_iteration = std::move(built.measured_iteration);
  s.measured_step_labels = std::move(built.measured_step_labels);
  s.measured_step_times = std::move(built.measured_step_times);
  s.warnings = std::move(built.warnings);
  const std::vector<std::string> recorded_as =
      read_gpu_recorded_as(recorded_as_node, built.measured_run, !s.measured_iteration.empty());
  if (!s.measured_iteration.empty()) {
    // The profile's own recorded_names (CUDA's names for its GPU) stand for it as the rule does.
    std::vector<std::string> stands_for = recorded_as;
    stands_for.insert(stands_for.end(), hardware.recorded_names.begin(),
                      hardware.recorded_names.end());
    s.comparison = compare_with_measured(built.measured_run, hardware.device, stands_for,
                                         doc.overrides(), sections.host_model, s.warnings);
  }
  s.trace_ranks = std::move(built.trace_ranks);
  s.iteration_period = built.iteration_period;
  for (const std::string& line : built.description)
    text += line + "\n";
  if (!recorded_as.empty()) {
    text += fmt::format("measured on: {} recorded as {} ({}: the profile stands for it)\n",
                        hardware.device.name, join(recorded_as, ", "), kGpuRecordedAs);
  }
  s.memory = built.memory;
  s.work = built.work;
  if (built.memory) {
    check_memory(*built.memory, hardware.device, memory_check_warns, workload_node, text,
                 s.warnings);
  }
}

/// Warnings for what prices with parameters or keys that do not apply (never silently): kernels
/// priced with parameters measured for something else, keys read for no active model, and a GPU
/// pcie_generation that no link of the fabric follows.
/// A scenario's `platform.kernels.attention` section that no attention kernel of the run is
/// priced with (KernelCalibration::attention_for: an implementation's own section, else
/// flash2's): one warning naming it and what the run's kernels are.
void add_unused_attention_section_warnings(Scenario& s, const ConfigNode& kernels) {
  if (!kernels.is_map() || !kernels.has("attention")) return;
  const auto* calibrated = dynamic_cast<const CalibratedKernelCost*>(s.models.kernels.get());
  if (calibrated == nullptr) return;
  const ConfigNode attention = kernels.child("attention");
  if (!attention.is_map()) return;
  std::set<AttentionKernel> run;
  for (TaskId id = 0; id < s.graph.task_count(); ++id) {
    const Task& task = s.graph.task(id);
    if (task.kind != TaskKind::kKernel || task.fixed_ps >= 0) continue;
    const KernelDesc& k = s.graph.kernel(id);
    if (k.cls == KernelClass::kAttention) run.insert(k.attention.implementation);
  }
  const KernelCalibration& c = calibrated->calibration();
  const auto priced_with = [&](AttentionKernel section) {
    for (AttentionKernel k : run) {
      if (k == section) return true;
      if (section == AttentionKernel::kFlash2 && !c.attention[static_cast<size_t>(k)]) return true;
    }
    return false;
  };
  std::vector<std::string> names;
  for (AttentionKernel k : run)
    names.emplace_back(attention_kernel_name(k));
  const std::string runs =
      names.empty() ? "no fused attention" : fmt::format("{}", fmt::join(names, ", "));
  bool named = false;
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    const auto impl = static_cast<AttentionKernel>(i);
    const std::string_view name = attention_kernel_name(impl);
    if (!attention.has(name)) continue;
    named = true;
    if (!priced_with(impl)) {
      s.warnings.push_back(fmt::format(
          "platform.kernels.attention.{}: no attention kernel of this run is priced with it (the "
          "run has {}): the section changes nothing",
          name, runs));
    }
  }
  if (!named && !priced_with(AttentionKernel::kFlash2)) {
    s.warnings.push_back(fmt::format(
        "platform.kernels.attention: its parameters are the flash2 section, and no attention "
        "kernel of this run is priced with it (the run has {}): the section changes nothing",
        runs));
  }
}

void add_inapplicable_warnings(Scenario& s, ConfigDocument& doc, const Workload& workload,
                               const WorkloadBuild& built, const HardwareProfile& hardware,
                               const ConfigNode& gpu_profile,
                               const std::vector<GpuPcieLink>& gpu_pcie_links,
                               const PlatformModelSections& sections) {
  for (const std::string& note :
       borrowed_calibration_notes(*s.models.kernels, s.graph, s.models.set.devices)) {
    s.warnings.push_back("kernel model: " + note);
  }
  if (!sections.gemm_launch_warning.empty()) s.warnings.push_back(sections.gemm_launch_warning);
  const WorkloadPricing pricing = workload_pricing(workload, built, !s.measured_iteration.empty());
  // A section a replay left out: nothing of it to warn about.
  if (!sections.kernels || !sections.interconnect) return;
  const std::vector<InactiveUse> inactive =
      inactive_uses(*sections.kernels, *sections.interconnect, sections.interconnect_model,
                    hardware, s.models.fabric.get(), !gpu_pcie_links.empty(), pricing);
  for (std::string& w : doc.unused_key_warnings(inactive))
    s.warnings.push_back(std::move(w));
  add_unused_attention_section_warnings(s, *sections.kernels);
  if (sections.interconnect_model == "flow" && pricing.no_gpu_work.empty()) {
    if (std::optional<std::string> w = unchanged_pcie_links_warning(gpu_profile, gpu_pcie_links)) {
      s.warnings.push_back(std::move(*w));
    }
  }
}

}  // namespace

Scenario build_scenario(ConfigDocument& doc, const WorkloadRegistry& workloads,
                        ChosenIterations chosen, const ScenarioLimits& limits) {
  if (chosen.iterations < 2 || chosen.measured < 1) {
    throw std::invalid_argument(
        "build_scenario: the chosen iteration count must be at least 2, the measured at least 1");
  }
  Scenario s;
  const ConfigNode root = doc.root();
  root.expect_map("a scenario: platform and workload sections");
  s.name = root.get_string_or("name", doc.file().stem().string());
  mark_description_as_overridden(doc);
  const std::string description = root.get_string_or("description", "");
  const ConfigNode workload_node = root.child("workload");
  const std::unique_ptr<Workload> workload = workloads.make(workload_node);
  const size_t task_limit = limits.max_tasks != 0
                                ? limits.max_tasks
                                : machine_task_limit(workload->peak_bytes_per_task());
  s.graph.set_task_limit(task_limit / std::max<size_t>(1, limits.memory_shares),
                         limits.memory_shares > 1);
  // Generated workloads simulate iterations and plan memory; replayed ones bring both along.
  const bool generated = workload->simulates_iterations();

  // Platform: the GPUs and the models that price work on them.
  const ConfigNode platform = root.child("platform");
  const ConfigNode gpu_profile = platform.load_reference("gpu");
  const HardwareProfile hardware = load_hardware_profile(gpu_profile);
  std::vector<GpuPcieLink> gpu_pcie_links;
  load_platform_fabric(platform, hardware, s.models, gpu_pcie_links);
  const int64_t gpus = read_platform_gpus(platform, *workload, s.models.fabric.get());
  const double table_fraction = read_table_memory_fraction(platform, generated);
  const bool memory_check_warns =
      generated && platform.get_choice_or("memory_check", {"error", "warn"}, "error") == "warn";
  const PlatformModelSections sections =
      make_platform_models(platform, *workload, hardware, gpus, s.models);
  std::string text = describe_platform(s, description, gpus, hardware, sections);

  WorkloadPlatform on;
  on.gpus = static_cast<uint32_t>(gpus);
  if (s.models.fabric) on.node_of_gpu = s.models.fabric->gpu_nodes(on.gpus);
  on.device = hardware.device;
  on.table_memory_fraction = table_fraction;
  s.simulates_iterations = generated;
  if (generated) {
    const SimulationSection sim = read_simulation(root, chosen);
    on.iterations = sim.iterations;
    on.warmup_iterations = sim.warmup;
    s.iterations_chosen = !sim.given;
  }
  workload->prepare(on);
  // Asked before the key check; checked against what the measurements recorded after the build.
  const std::optional<ConfigNode> recorded_as = platform.optional_child("gpu_recorded_as");
  if (recorded_as) recorded_as->as_string_list();
  doc.check_all_keys_used();
  if (limits.keys_only) {
    s.header = text;
    return s;
  }

  WorkloadBuild built = build_workload(*workload, on, s.graph, workload_node, limits);
  take_build(s, built, doc, hardware, sections, memory_check_warns, workload_node, recorded_as,
             text);
  const WorkloadPricing pricing = workload_pricing(*workload, built, !s.measured_iteration.empty());
  require_pricing_sections(platform, sections, pricing.no_gpu_work.empty(),
                           pricing.no_host.empty());
  add_inapplicable_warnings(s, doc, *workload, built, hardware, gpu_profile, gpu_pcie_links,
                            sections);
  s.header = text;
  for (const std::string& w : s.warnings)
    text += "warning: " + w + "\n";
  s.graph.seal();
  if (s.work) {
    for (TaskId t = 0; t < s.graph.task_count(); ++t) {
      // Index bytes move memory, not arithmetic: any value gives the same FLOPs.
      if (s.graph.task(t).kind == TaskKind::kKernel) {
        s.kernel_flops += roofline_work(s.graph.kernel(t), 8).flops;
      }
    }
  }
  s.represented_gpus = built.represented_gpus > 0 ? built.represented_gpus
                                                  : static_cast<uint32_t>(s.graph.rank_count());
  s.description = std::move(text);
  return s;
}

}  // namespace upsim::cli

namespace upsim::cli {

std::span<const KeyMeaning> scenario_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"name", "the run's name; default: the file's stem"},
      {"description", "one line printed in the summary"},
      {"platform.gpus", "GPUs of the run, one rank each; default with a topology: its GPUs"},
      {"platform.gpu", "the GPU's hardware profile (a file)"},
      {"platform.topology", "the fabric: nodes, devices, links and network (a file)"},
      {"platform.partial_fabric", "with a topology: run on its first `gpus` GPUs"},
      {"platform.table_memory_fraction", "share of a GPU's memory embedding tables may use"},
      {"platform.gpu_recorded_as[]",
       "GPU names the measurements recorded that platform.gpu's profile stands for"},
      {"platform.memory_check", "a footprint above the GPU's memory: error or warn"},
      {"workload.model", "the workload family: dlrm, trace or transformer"},
      {"simulation.iterations", "training steps simulated; default: until steady state"},
      {"simulation.warmup_iterations", "leading steps left out of the reported mean"},
  };
  return kMeanings;
}

}  // namespace upsim::cli

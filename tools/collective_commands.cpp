#include "tools/collective_commands.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <cmath>
#include <filesystem>
#include <ostream>

#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/shipped_files.h"
#include "topology/fabric_loader.h"
#include "topology/fitting/collective_cross_validation.h"
#include "topology/fitting/collective_fit.h"
#include "topology/fitting/collective_validation.h"
#include "topology/fitting/nccl_tests_output.h"
#include "topology/nccl_tuning.h"

namespace upsim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {
// Accuracy bounds of the collective models: plateau bus bandwidth within 5% of the measured one,
// and a geomean |error| of at most 15% over every full size sweep (ASTRA-sim publishes 9.7-20.6%
// for HGX H100 all-reduce).
constexpr double kPlateauBound = 0.05;
constexpr double kGeomeanBound = 0.15;

Fabric read_fabric(const fs::path& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  Fabric fabric = load_fabric(doc.root());
  doc.check_all_keys_used();
  return fabric;
}

CollectiveTuning read_tuning(const std::string& path) {
  if (path.empty()) return nccl_like_tuning();
  ConfigDocument doc = ConfigDocument::load_file(path);
  CollectiveTuning tuning = load_collective_tuning(doc.root());
  doc.check_all_keys_used();
  return tuning;
}

}  // namespace

int validate_collectives_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string configs = shipped_path("configs");
  std::string data = shipped_path("test/data");
  std::string tuning_file;
  std::string prior_file;
  bool held_out = false;
  int held_out_evaluations = CrossValidationOptions{}.max_evaluations;
  int jobs = 0;
  bool points = false;
  po::options_description desc(
      "usage: upsim validate collectives [options]\n\n"
      "Simulates all-reduce at every measured size on the fabric of each measured system "
      "(4x A100\nNVLink3, GCP A3 Mega 2x8 H100, OCI 2x8 H100, OCI 1x8 and 2x8 A100, DGX H100, "
      "2x8 and 4x8 H100\non InfiniBand) with the flow network and NCCL-like algorithms, and "
      "prints per point the measured\nand predicted time, the error, the bus bandwidths and the "
      "chosen algorithm/protocol, then the\ngeomean |error| and the plateau error. Each table "
      "names its measurements, its tuning and\nwhether its points are IN-SAMPLE (the tuning was "
      "fitted on them: the built-in tuning was fitted\non all 166 points shown) or HELD OUT.\n\n"
      "--held-out adds leave-one-system-out validation: for each system with a full sweep (<= "
      "64 KiB\nto >= 256 MiB), the calibrated parameters are refitted on the other systems only, "
      "from a prior\ntuning that no measurement chose (NCCL's tables, datasheets), and the "
      "held-out "
      "system is\nvalidated with that fit, by a maximum a posteriori fit from two starts; a "
      "system with link\nfamilies of its own also gets a PARTLY IN-SAMPLE variant with just those "
      "fitted on its points\n(method: topology/fitting/collective_cross_validation.h; about 90 s "
      "of CPU, "
      "the folds in parallel\non the machine's cores).\n\n"
      "Exits 1 if a system exceeds the in-sample bounds (plateau 5%, geomean 15%). "
      "The defaults are\nthe shipped files (the repository root, or the installed "
      "share/upsim).\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("configs", po::value<std::string>(&configs)->default_value(configs),
       "folder holding topologies/")  //
      ("data", po::value<std::string>(&data)->default_value(data),
       "folder holding nccl-tests/ and llmcompass/ measurements")  //
      ("tuning", po::value<std::string>(&tuning_file),
       "collective tuning file for the in-sample tables (default: the built-in NCCL-like "
       "tuning, as in configs/collectives/nccl_like.yaml)")  //
      ("held-out", po::bool_switch(&held_out),
       "also run leave-one-system-out validation (refits per held-out system)")  //
      ("prior", po::value<std::string>(&prior_file),
       "start tuning of the held-out fits (default: the built-in prior, NCCL's tables and "
       "datasheet values for every calibrated parameter)")  //
      ("held-out-evaluations",
       po::value<int>(&held_out_evaluations)->default_value(held_out_evaluations),
       "bound on objective evaluations per held-out fit")  //
      ("jobs,j", po::value<int>(&jobs)->default_value(jobs),
       "held-out folds fitted in parallel (0: one per hardware thread); the result is the same "
       "for any number")  //
      ("points", po::bool_switch(&points), "also print every held-out point");
  po::variables_map vm;
  if (!parse_command_line(args, desc, out, vm)) return 0;
  if (jobs < 0) throw po::error("--jobs must be 0 (one per hardware thread) or more");

  const CollectiveTuning tuning = read_tuning(tuning_file);
  const std::string tuning_name =
      tuning_file.empty()
          ? fmt::format(
                "the built-in NCCL-like tuning (configs/collectives/nccl_like.yaml), "
                "whose {} calibrated parameters were fitted on all 166 points of the "
                "eight systems of the repository's test/data",
                calibrated_tuning_parameters().size())
          : tuning_file;
  const std::string sample =
      tuning_file.empty() ? "IN-SAMPLE (the tuning was fitted on these points)"
                          : "in-sample if the tuning file was fitted on these points (see its "
                            "header)";
  out << "== In-sample validation ==\n";
  out << fmt::format("tuning: {}\n\n", tuning_name);
  bool within = true;
  std::vector<CollectiveFitSystem> systems;
  std::vector<CollectiveValidation> in_sample;
  for (const CollectiveValidationCase& c : collective_validation_cases()) {
    Fabric fabric = read_fabric(fs::path(configs) / c.topology);
    std::vector<MeasuredCollective> measured = read_case(c, data);
    const CollectiveValidation v =
        validate_all_reduce(fabric, tuning, measured, c.system, c.harness_overhead);
    out << fmt::format("measurements: {}{}; harness: {}\nfabric: {}; {}\n", c.data_file,
                       c.run_id.empty() ? "" : fmt::format(" (run {})", c.run_id), c.harness,
                       c.topology, sample);
    out << format_validation(v) << "\n";
    const bool sweep = v.points.size() > 1;
    within = within && std::abs(v.plateau_error) <= kPlateauBound &&
             (!sweep || v.geomean_abs_error <= kGeomeanBound);
    in_sample.push_back(v);
    systems.push_back(CollectiveFitSystem{c.system, std::move(fabric), CollectiveKind::kAllReduce,
                                          std::move(measured), c.harness_overhead});
  }
  out << (within ? "in-sample: all systems within bounds (plateau <= 5%, sweep geomean <= 15%)\n"
                 : "in-sample: SOME SYSTEMS EXCEED THE BOUNDS (plateau <= 5%, sweep geomean <= "
                   "15%)\n");
  if (held_out) {
    const CollectiveTuning prior =
        prior_file.empty() ? nccl_prior_tuning() : read_tuning(prior_file);
    const std::string prior_name =
        prior_file.empty() ? "the built-in prior (nccl_prior_tuning: NCCL's tables and datasheet "
                             "values, no measured point)"
                           : prior_file;
    CrossValidationOptions options;
    options.parameters = calibrated_tuning_parameters();
    options.max_evaluations = held_out_evaluations;
    options.threads = static_cast<unsigned>(jobs);
    const std::vector<HeldOutFold> folds = leave_one_system_out(systems, prior, options);
    out << "\n== Held-out validation (leave one system out) ==\n";
    out << format_cross_validation(folds, prior_name, points);
    out << fmt::format("{:<32} {:>6}  {:>22}  {:>22}  {:>26}\n", "system", "points",
                       "in-sample (128K-32M)", "held out (128K-32M)", "own network fitted (band)");
    for (const HeldOutFold& f : folds) {
      double in = 0.0;
      double in_band = 0.0;
      for (const CollectiveValidation& v : in_sample) {
        if (v.system != f.held_out) continue;
        in = v.geomean_abs_error;
        in_band = band_geomean_abs_error(v, kBandLowBytes, kBandHighBytes, nullptr);
      }
      const std::string own =
          f.own_parameters.empty()
              ? std::string("-")
              : fmt::format("{:.2f}% ({:.2f}%)", 100.0 * f.own_validation.geomean_abs_error,
                            100.0 * f.own_band_geomean);
      out << fmt::format("{:<32} {:>6}  {:>22}  {:>22}  {:>26}\n", f.held_out,
                         f.validation.points.size(),
                         fmt::format("{:.2f}% ({:.2f}%)", 100.0 * in, 100.0 * in_band),
                         fmt::format("{:.2f}% ({:.2f}%)", 100.0 * f.validation.geomean_abs_error,
                                     100.0 * f.band_geomean),
                         own);
    }
    out << "(geomean |error|; in-sample: the tuning above; held out: fitted on the other systems "
           "only; own network fitted: PARTLY IN-SAMPLE, the held-out system's own link families "
           "fitted on its points, see above)\n";
  }
  return within ? 0 : 1;
}

namespace {

/// The options of `upsim calibrate collectives`.
struct CalibrateCollectivesArgs {
  std::string output;
  bool force = false;
  std::vector<std::string> logs;
  std::vector<std::string> topologies;
  std::vector<std::string> harness_overheads;
  std::string collective;
  bool validation_systems = false;
  std::string configs = shipped_path("configs");
  std::string data = shipped_path("test/data");
  std::vector<std::string> fit;
  std::string tuning_file;
  int max_evaluations = CollectiveFitOptions{}.max_evaluations;
  int fit_jobs = 0;
  bool points = false;
};

constexpr const char* kCalibrateCollectivesUsage =
    "usage: upsim calibrate collectives --topology FABRIC.yaml --nccl-tests LOG --out FILE "
    "[options]\n\n"
    "Fits NCCL-like collective tuning parameters to measured collective times and writes a "
    "tuning file\nfor `upsim validate collectives --tuning FILE` and scenarios. Every measured "
    "point is simulated\nwith the flow network as `upsim validate collectives` does; the fit "
    "minimises the sum over\nsystems of the mean Huber loss of the log error (each system weighs "
    "the "
    "same) by Nelder-Mead from the\nstart tuning. Prints, per system, the points, geomean "
    "|error|, plateau busbw error and max |error|\nbefore and after. Deterministic.\n\n"
    "Measured systems: each --nccl-tests LOG (the stdout of all_reduce_perf, all_gather_perf,\n"
    "reduce_scatter_perf, alltoall_perf or broadcast_perf) runs on a --topology fabric: one "
    "--topology\nfor every log, or one per log in the same order. Every GPU of the fabric is a "
    "rank.\n\n"
    "Parameters (--fit) are key paths of the tuning YAML: launch_overhead, net_overhead,\n"
    "tree_efficiency, nvls_efficiency, nvls_tree_efficiency,\n"
    "protocols.<LL|LL128|Simple>.injection_cap, "
    "protocols.<P>.single_node_injection_caps.<kind>,\n"
    "protocols.<P>.base_latency.<tree|ring|nvls>,\n"
    "protocols.<P>.hop_latency.<nvlink|pci|net>.<tree|ring|nvls>,\n"
    "link_families.<name>.efficiency, link_families.<name>.extra_hop_latency.<P>.\n"
    "Small sizes determine latencies, mid sizes the LL / LL128 caps, the largest sizes the\n"
    "efficiency of their bottleneck links (method: "
    "topology/fitting/collective_fit.h)\n\noptions";

void add_calibrate_collectives_options(po::options_description& desc, CalibrateCollectivesArgs& a) {
  desc.add_options()("help,h", "this help")                                             //
      ("out,o", po::value<std::string>(&a.output)->required(), "tuning file to write")  //
      ("force", po::bool_switch(&a.force), "overwrite an existing --out file")          //
      ("nccl-tests", po::value<std::vector<std::string>>(&a.logs)->composing(),
       "raw nccl-tests output of one run (repeatable)")  //
      ("topology", po::value<std::vector<std::string>>(&a.topologies)->composing(),
       "fabric YAML the logs were measured on: once for all logs, or once per log in "
       "order")  //
      ("harness-overhead", po::value<std::vector<std::string>>(&a.harness_overheads)->composing(),
       "what the measuring harness adds to every call, e.g. 12us for a PyTorch-level benchmark "
       "that times torch.distributed calls (default 0: nccl-tests): once for all logs or once "
       "per log in order; added to every predicted time of that log, so the fit does not bend "
       "NCCL latencies to absorb it")  //
      ("collective", po::value<std::string>(&a.collective),
       "collective of logs without a `# Collective test starting:` line (nccl-tests before "
       "2.16.7): all_reduce, all_gather, reduce_scatter, alltoall or broadcast")  //
      ("validation-systems", po::bool_switch(&a.validation_systems),
       "also fit on the eight measured all-reduce systems of `upsim validate collectives` "
       "(read from --configs and --data)")  //
      ("configs", po::value<std::string>(&a.configs)->default_value(a.configs),
       "folder holding topologies/, for --validation-systems")  //
      ("data", po::value<std::string>(&a.data)->default_value(a.data),
       "folder holding nccl-tests/ and llmcompass/, for --validation-systems")  //
      ("fit", po::value<std::vector<std::string>>(&a.fit)->composing(),
       "parameters to fit, comma-separated or repeated (default: launch_overhead when a point "
       "is <= 64 KiB, and the efficiency of each link family with a bottleneck link at a "
       "system's largest size)")  //
      ("tuning", po::value<std::string>(&a.tuning_file),
       "start tuning file (default: the built-in NCCL-like tuning, as in "
       "configs/collectives/nccl_like.yaml); the values not fitted are copied from it")  //
      ("max-evaluations", po::value<int>(&a.max_evaluations)->default_value(a.max_evaluations),
       "bound on objective evaluations (each simulates every point once)")  //
      ("jobs,j", po::value<int>(&a.fit_jobs)->default_value(a.fit_jobs),
       "measured systems simulated in parallel in each evaluation (0: one per hardware "
       "thread); the fit is the same for any number")  //
      ("points", po::bool_switch(&a.points), "also print every point after the fit");
}

/// Measured systems are given: logs with one --topology for all or one per log, or
/// --validation-systems.
void check_measurement_counts(const CalibrateCollectivesArgs& a) {
  if (a.logs.empty() && !a.validation_systems) {
    throw std::runtime_error(
        "no measurements: give --nccl-tests LOG with --topology FABRIC, or --validation-systems");
  }
  if (!a.logs.empty() && a.topologies.size() != 1 && a.topologies.size() != a.logs.size()) {
    throw std::runtime_error(fmt::format(
        "{} --nccl-tests logs but {} --topology files: give one --topology for all logs or one "
        "per log",
        a.logs.size(), a.topologies.size()));
  }
}

/// The --harness-overhead of each log (zero when none is given).
std::vector<Duration> read_harness_overheads(const CalibrateCollectivesArgs& a) {
  const std::vector<std::string>& harness_overheads = a.harness_overheads;
  if (!harness_overheads.empty() && harness_overheads.size() != 1 &&
      harness_overheads.size() != a.logs.size()) {
    throw std::runtime_error(fmt::format(
        "{} --nccl-tests logs but {} --harness-overhead values: give one for all logs or one per "
        "log",
        a.logs.size(), harness_overheads.size()));
  }
  std::vector<Duration> harness(a.logs.size(), Duration::zero());
  for (size_t i = 0; i < a.logs.size() && !harness_overheads.empty(); ++i) {
    const std::string& text =
        harness_overheads.size() == 1 ? harness_overheads[0] : harness_overheads[i];
    try {
      harness[i] = parse_duration(text);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("--harness-overhead `{}`: {}", text, e.what()));
    }
    if (harness[i] < Duration::zero() || harness[i] > kMaxConfiguredLatency) {
      throw std::runtime_error(
          fmt::format("--harness-overhead `{}`: must be between 0 and 1 s", text));
    }
  }
  return harness;
}

/// How the logs are read: --collective, when given, names the collective of logs that do not.
NcclTestsReadOptions nccl_tests_read_options(const std::string& collective) {
  NcclTestsReadOptions read_options;
  if (!collective.empty()) {
    read_options.kind = nccl_tests_collective(collective);
    if (!read_options.kind) {
      throw std::runtime_error(fmt::format("--collective `{}`: expected one of {}", collective,
                                           nccl_tests_collective_names()));
    }
  }
  return read_options;
}

/// The systems to fit on: each log on its fabric, then with --validation-systems the measured
/// all-reduce systems of `upsim validate collectives`.
std::vector<CollectiveFitSystem> read_measured_systems(const CalibrateCollectivesArgs& a,
                                                       const std::vector<Duration>& harness,
                                                       const NcclTestsReadOptions& read_options) {
  const std::vector<std::string>& logs = a.logs;
  const std::vector<std::string>& topologies = a.topologies;
  std::vector<CollectiveFitSystem> systems;
  for (size_t i = 0; i < logs.size(); ++i) {
    const fs::path topology = topologies.size() == 1 ? topologies[0] : topologies[i];
    const NcclTestsLog log = read_nccl_tests_output(logs[i], read_options);
    Fabric fabric = read_fabric(topology);
    const auto gpus = static_cast<uint32_t>(fabric.gpus().size());
    if (log.ranks != 0 && log.ranks != gpus) {
      throw std::runtime_error(fmt::format("{}: the log lists {} ranks, but {} has {} GPUs",
                                           logs[i], log.ranks, topology.string(), gpus));
    }
    systems.push_back(
        CollectiveFitSystem{fmt::format("{} on {}", fs::path(logs[i]).filename().string(),
                                        topology.filename().string()),
                            std::move(fabric), log.kind, measured_points(log), harness[i]});
  }
  if (a.validation_systems) {
    for (const CollectiveValidationCase& c : collective_validation_cases()) {
      systems.push_back(CollectiveFitSystem{c.system, read_fabric(fs::path(a.configs) / c.topology),
                                            CollectiveKind::kAllReduce, read_case(c, a.data),
                                            c.harness_overhead});
    }
  }
  return systems;
}

/// The fit from `start` on `systems`, its report, and the tuning file it writes.
void fit_and_write_tuning(const CalibrateCollectivesArgs& a,
                          const std::vector<CollectiveFitSystem>& systems,
                          const CollectiveTuning& start, std::ostream& out) {
  CollectiveFitOptions options;
  options.parameters = split_commas(a.fit);
  if (options.parameters.empty()) options.parameters = default_fit_parameters(systems, start);
  if (options.parameters.empty()) {
    throw std::runtime_error("nothing to fit: name parameters with --fit");
  }
  options.max_evaluations = a.max_evaluations;
  options.threads = static_cast<unsigned>(a.fit_jobs);
  const CollectiveFitResult result = fit_collective_tuning(systems, start, options);
  if (a.points) {
    for (const CollectiveValidation& v : result.after)
      out << format_validation(v) << "\n";
  }
  out << format_fit_report(result);
  const std::string start_name =
      a.tuning_file.empty() ? "the built-in NCCL-like tuning (configs/collectives/nccl_like.yaml)"
                            : a.tuning_file;
  write_file_atomically(
      a.output, format_collective_tuning(result.tuning, fit_file_header(result, start_name)));
  out << fmt::format("wrote {}\n", a.output);
}

}  // namespace

int calibrate_collectives_main(const std::vector<std::string>& args, std::ostream& out) {
  CalibrateCollectivesArgs a;
  po::options_description desc(kCalibrateCollectivesUsage);
  add_calibrate_collectives_options(desc, a);
  po::variables_map vm;
  if (!parse_command_line(args, desc, out, vm)) return 0;
  if (a.fit_jobs < 0) throw po::error("--jobs must be 0 (one per hardware thread) or more");
  refuse_to_overwrite(a.output, a.force);
  check_measurement_counts(a);
  const std::vector<Duration> harness = read_harness_overheads(a);
  if (a.logs.empty() && !a.topologies.empty()) {
    throw std::runtime_error("--topology without --nccl-tests: which log was measured on it?");
  }
  const NcclTestsReadOptions read_options = nccl_tests_read_options(a.collective);
  const CollectiveTuning start = read_tuning(a.tuning_file);
  const std::vector<CollectiveFitSystem> systems = read_measured_systems(a, harness, read_options);
  fit_and_write_tuning(a, systems, start, out);
  return 0;
}

}  // namespace upsim::cli

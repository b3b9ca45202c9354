#include "tools/trace_commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>

#include "calibration/fitting/kernel_measurements.h"
#include "calibration/host_overhead_cpu_cost.h"
#include "sim/config/config_node.h"
#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_host_overheads.h"
#include "workloads/trace/trace_replay.h"
#include "workloads/trace/trace_workload.h"
#include "workloads/trace/traced_kernels.h"

namespace upsim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int validate_traces_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string dir;
  std::string marker = "ProfilerStep#";
  std::string host = "measured";
  std::string host_file;
  int64_t step = -1;
  bool lenient = false;
  po::options_description desc(
      "usage: upsim validate traces DIR [options]\n\n"
      "Reads one PyTorch Kineto trace per rank from DIR (*.json or *.json.gz, with the "
      "matching\nexecution traces if present; or Chakra *.et[.gz] files), rebuilds the task "
      "graph "
      "(CPU threads,\nlaunches, streams, event waits, syncs, cross-rank collectives), replays it "
      "with the measured\ndurations in one multi-rank simulation, and prints per rank the "
      "measured and predicted\niteration time and the error. With --host modelled the host "
      "time is not replayed but priced by\nthe seed's T1-T5 overheads (extracted from the "
      "traces themselves, or read from --host-overheads):\nthe check of the host model alone, "
      "GPU work keeping its measured durations.\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("step", po::value<int64_t>(&step),
       "measure this iteration only (e.g. 10 for ProfilerStep#10); default: the mean of every "
       "complete iteration")  //
      ("iteration-marker", po::value<std::string>(&marker)->default_value(marker),
       "name prefix of the annotations that start an iteration")  //
      ("host", po::value<std::string>(&host)->default_value(host),
       "host time: measured (replayed) or modelled (T1-T5)")  //
      ("host-overheads", po::value<std::string>(&host_file),
       "with --host modelled: T1-T5 from this host-overhead file (configs/host/ schema) instead "
       "of the traces' own")  //
      ("lenient-et", po::bool_switch(&lenient),
       "replay a rank from its Kineto trace alone when its execution trace belongs to another "
       "run (default: an error)");
  if (!parse_with_positional(args, desc, out, "dir", dir)) return 0;
  if (dir.empty()) throw po::error("upsim validate traces: missing DIR");
  if (host != "measured" && host != "modelled") {
    throw po::error("upsim validate traces: --host must be measured or modelled, not `" + host +
                    "`");
  }
  if (!host_file.empty() && host != "modelled") {
    throw po::error("upsim validate traces: --host-overheads needs --host modelled");
  }

  TraceSetOptions options;
  options.graph.iteration_marker = marker;
  options.strict_et = !lenient;
  if (step >= 0) options.iteration = static_cast<uint32_t>(step);
  TraceReplayResult result;
  if (host == "measured") {
    result = validate_trace_directory(dir, options);
  } else {
    options.graph.host = TraceHost::kModelled;
    LoadedTraces loaded = load_trace_directory(dir, options);
    std::optional<HostOverheadCpuCost> cost;
    if (host_file.empty()) {
      cost.emplace(trace_host_overheads(loaded.ranks));
    } else {
      ConfigDocument doc = ConfigDocument::load_file(host_file);
      cost.emplace(load_host_overheads(doc.root()));
      doc.check_all_keys_used();
    }
    result = replay_traces(loaded.ranks, options, &*cost);
    result.warnings.insert(result.warnings.begin(), loaded.warnings.begin(), loaded.warnings.end());
  }
  for (const std::string& w : result.warnings)
    out << "warning: " << w << "\n";
  out << format_trace_validation(result.ranks) << format_trace_steps(result.ranks);
  return 0;
}

int calibrate_host_overheads_main(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<std::string> traces;
  std::string output;
  std::string t4 = "mean";
  bool force = false;
  po::options_description desc(
      "usage: upsim calibrate host-overheads TRACE... --out FILE\n\n"
      "Extracts the host-side overheads T1-T5 of the seed method (Lin et al., TPDS 2024: gap "
      "between ops,\nop start to first launch, after the last launch, launch call, between "
      "launches) from PyTorch\nKineto traces (.json or .json.gz) and writes them as a "
      "host-overhead file for scenarios:\n`host: {model: host_overheads, overheads: FILE}`.\n\n"
      "options");
  desc.add_options()("help,h", "this help")                                                  //
      ("out,o", po::value<std::string>(&output)->required(), "host-overhead file to write")  //
      ("force", po::bool_switch(&force), "overwrite an existing --out file")                 //
      ("t4", po::value<std::string>(&t4)->default_value(t4),
       "T4 (launch call) statistic: `mean` of every cudaLaunchKernel (the seed's extraction "
       "script), or `cleaned`: the mean after Tukey's rule, for GPU-bound runs whose launches "
       "block on a full launch queue");
  po::options_description hidden;
  hidden.add_options()("trace", po::value<std::vector<std::string>>(&traces));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("trace", -1);
  po::variables_map vm;
  if (!parse_command_line(args, all, out, vm, &positional, &desc)) return 0;
  if (traces.empty()) throw po::error("upsim calibrate host-overheads: give at least one TRACE");
  if (t4 != "mean" && t4 != "cleaned") {
    throw po::error(
        fmt::format("upsim calibrate host-overheads: --t4 `{}`; valid: mean, cleaned", t4));
  }
  refuse_to_overwrite(output, force);
  std::vector<KinetoTrace> loaded;
  loaded.reserve(traces.size());
  for (const std::string& t : traces)
    loaded.push_back(read_kineto_trace(t));
  std::vector<const KinetoTrace*> pointers;
  for (const KinetoTrace& t : loaded)
    pointers.push_back(&t);
  const ExtractedHostOverheads overheads = extract_host_overheads(pointers);
  write_file_atomically(
      output, format_host_overheads_yaml(overheads, t4 == "mean" ? LaunchStatistic::kMean
                                                                 : LaunchStatistic::kCleanedMean));
  out << fmt::format("T1 samples {}, cudaLaunchKernel samples {}, {} ops; wrote {}\n",
                     overheads.t1.size(), overheads.launch_kernel_us.size(), overheads.ops.size(),
                     output);
  return 0;
}

namespace {

/// The measurement rows of one rank's kernels (measurement_of); counts what has none.
struct RankRows {
  std::vector<KernelMeasurement> rows;
  size_t collectives = 0;
  size_t undescribed = 0;  // kept measured by model mode (no shapes, embeddings, ...)
  size_t unstated = 0;     // described, but not as a gemm or an m x n memory op
};

RankRows rank_rows(const RankTrace& trace, size_t rank) {
  RankRows out;
  for (const TracedKernel& k : traced_kernels(trace)) {
    if (k.collective) {
      ++out.collectives;
      continue;
    }
    if (!k.desc) {
      ++out.undescribed;
      continue;
    }
    std::optional<KernelMeasurement> row =
        measurement_of(*k.desc, k.duration.seconds(),
                       fmt::format("{} rank {}: {}", trace.kineto.file, rank, k.name));
    if (!row) {
      ++out.unstated;
      continue;
    }
    out.rows.push_back(std::move(*row));
  }
  return out;
}

}  // namespace

int convert_traces_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string dir;
  std::string output;
  std::string provenance = "measured";
  bool force = false;
  bool lenient = false;
  po::options_description desc(
      "usage: upsim convert traces DIR --out FILE.csv [options]\n\n"
      "Writes the GPU kernels of a directory of PyTorch traces (one Kineto trace per rank, with "
      "its\nexecution trace where there is one) as a kernel measurement table "
      "(calibration/fitting/\nkernel_measurements.h): per kernel, what it computes as model mode "
      "reads it from its op's\nshapes (a GEMM, or a memory-bound op of m x n elements and its "
      "traffic) and its measured\nduration, the kernel's own GPU time (`# harness: none`). "
      "Kernels model mode keeps measured\n(embedding lookups, convolutions, ops without shapes), "
      "collectives and copies are left out.\nSplit: with several ranks, even ranks train and "
      "odd ranks are held out; with one, rows\nalternate per op. Calibrate on it with `upsim "
      "calibrate kernels --csv FILE.csv --hardware ...`.\n\noptions");
  desc.add_options()("help,h", "this help")                                        //
      ("out,o", po::value<std::string>(&output)->required(), "CSV file to write")  //
      ("force", po::bool_switch(&force), "overwrite an existing --out file")       //
      ("provenance", po::value<std::string>(&provenance)->default_value(provenance),
       "the table's `# provenance:`: measured (your own traces) or published (someone "
       "else's)")  //
      ("lenient-et", po::bool_switch(&lenient),
       "read a rank from its Kineto trace alone when its execution trace belongs to another run");
  if (!parse_with_positional(args, desc, out, "dir", dir)) return 0;
  if (dir.empty()) throw po::error("upsim convert traces: give the trace directory DIR");
  if (provenance != "measured" && provenance != "published") {
    throw po::error(fmt::format(
        "upsim convert traces: --provenance `{}`; valid: measured, published", provenance));
  }
  refuse_to_overwrite(output, force);
  TraceSetOptions options;
  options.strict_et = !lenient;
  const LoadedTraces traces = load_trace_directory(dir, options);
  for (const std::string& w : traces.warnings)
    out << "warning: " << w << "\n";
  std::vector<KernelMeasurement> rows;
  RankRows total;
  std::set<std::string> gpus;
  for (size_t r = 0; r < traces.ranks.size(); ++r) {
    RankRows part = rank_rows(traces.ranks[r], r);
    for (const KinetoDevice& d : traces.ranks[r].kineto.devices)
      gpus.insert(d.name);
    for (KernelMeasurement& row : part.rows)
      row.held_out = traces.ranks.size() > 1 && r % 2 == 1;
    total.collectives += part.collectives;
    total.undescribed += part.undescribed;
    total.unstated += part.unstated;
    rows.insert(rows.end(), part.rows.begin(), part.rows.end());
  }
  if (traces.ranks.size() == 1) assign_alternating_split(rows);
  std::vector<std::pair<std::string, std::string>> metadata{
      {"source", fmt::format("upsim convert traces {}", fs::path(dir).filename().string())},
      {"harness", "none"},
      {"provenance", provenance}};
  if (!gpus.empty()) metadata.emplace_back("gpu", fmt::format("{}", fmt::join(gpus, "; ")));
  write_file_atomically(output, measurement_csv_text(rows, metadata));
  std::map<std::string, std::array<size_t, 2>> per_op;
  for (const KernelMeasurement& row : rows)
    ++per_op[row.op == "gemm" ? fmt::format("gemm/{}", dtype_name(row.kernel.dtype)) : row.op]
            [row.held_out ? 1 : 0];
  for (const auto& [op, n] : per_op) {
    out << fmt::format("{:<16} {:>6} kernels ({} train, {} held out)\n", op, n[0] + n[1], n[0],
                       n[1]);
  }
  out << fmt::format(
      "left out: {} collective kernels, {} kernels model mode keeps measured, {} described "
      "otherwise than as a gemm or an m x n memory op\nwrote {} ({} rows from {} ranks; GPU: "
      "{})\n",
      total.collectives, total.undescribed, total.unstated, output, rows.size(),
      traces.ranks.size(),
      gpus.empty() ? "not stated in the traces" : fmt::format("{}", fmt::join(gpus, "; ")));
  return 0;
}

}  // namespace upsim::cli

#include "tools/trace_commands.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <filesystem>
#include <optional>
#include <ostream>

#include "calibration/host_overhead_cpu_cost.h"
#include "sim/config/config_node.h"
#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_host_overheads.h"
#include "workloads/trace/trace_replay.h"
#include "workloads/trace/trace_workload.h"

namespace upsim::cli {

namespace po = boost::program_options;

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
  po::options_description hidden;
  hidden.add_options()("dir", po::value<std::string>(&dir));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vm;
  if (!parse_command_line(args, all, out, vm, &positional, &desc)) return 0;
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

}  // namespace upsim::cli

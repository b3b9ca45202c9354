#include "tools/trace_commands.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <filesystem>
#include <optional>
#include <ostream>

#include "tools/output_folder.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_host_overheads.h"
#include "workloads/trace/trace_replay.h"

namespace upsim::cli {

namespace po = boost::program_options;

int validate_traces_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string dir;
  std::string marker = "ProfilerStep#";
  int64_t step = -1;
  bool lenient = false;
  po::options_description desc(
      "usage: upsim validate traces DIR [options]\n\n"
      "Reads one PyTorch Kineto trace per rank from DIR (*.json or *.json.gz, with the "
      "matching\nexecution traces if present; or Chakra *.et files), rebuilds the task graph "
      "(CPU threads,\nlaunches, streams, event waits, syncs, cross-rank collectives), replays it "
      "with the measured\ndurations in one multi-rank simulation, and prints per rank the "
      "measured and predicted\niteration time and the error.\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("step", po::value<int64_t>(&step),
       "measure this iteration only (e.g. 10 for ProfilerStep#10); default: the mean of every "
       "complete iteration")  //
      ("iteration-marker", po::value<std::string>(&marker)->default_value(marker),
       "name prefix of the annotations that start an iteration")  //
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
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  po::notify(vm);
  if (dir.empty()) throw po::error("upsim validate traces: missing DIR");

  TraceSetOptions options;
  options.graph.iteration_marker = marker;
  options.strict_et = !lenient;
  if (step >= 0) options.iteration = static_cast<uint32_t>(step);
  const TraceReplayResult result = validate_trace_directory(dir, options);
  for (const std::string& w : result.warnings)
    out << "warning: " << w << "\n";
  out << format_trace_validation(result.ranks);
  return 0;
}

int calibrate_host_overheads_main(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<std::string> traces;
  std::string output;
  bool force = false;
  po::options_description desc(
      "usage: upsim calibrate host-overheads TRACE... --out FILE\n\n"
      "Extracts the host-side overheads T1-T5 of the seed method (seed-method.md 1.3: gap "
      "between ops,\nop start to first launch, after the last launch, launch call, between "
      "launches) from PyTorch\nKineto traces (.json or .json.gz) and writes them as a "
      "host-overhead file for scenarios:\n`host: {model: host_overheads, overheads: FILE}`.\n\n"
      "options");
  desc.add_options()("help,h", "this help")                                                  //
      ("out,o", po::value<std::string>(&output)->required(), "host-overhead file to write")  //
      ("force", po::bool_switch(&force), "overwrite an existing --out file");
  po::options_description hidden;
  hidden.add_options()("trace", po::value<std::vector<std::string>>(&traces));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("trace", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  po::notify(vm);
  if (traces.empty()) throw po::error("upsim calibrate host-overheads: give at least one TRACE");
  if (std::filesystem::exists(output) && !force) {
    throw std::runtime_error(fmt::format(
        "{} already exists; upsim does not overwrite files unasked: pass --force", output));
  }
  std::vector<KinetoTrace> loaded;
  loaded.reserve(traces.size());
  for (const std::string& t : traces)
    loaded.push_back(read_kineto_trace(t));
  std::vector<const KinetoTrace*> pointers;
  for (const KinetoTrace& t : loaded)
    pointers.push_back(&t);
  const ExtractedHostOverheads overheads = extract_host_overheads(pointers);
  write_file_atomically(output, format_host_overheads_yaml(overheads));
  out << fmt::format("T1 samples {}, cudaLaunchKernel samples {}, {} ops; wrote {}\n",
                     overheads.t1.size(), overheads.launch_kernel_us.size(), overheads.ops.size(),
                     output);
  return 0;
}

}  // namespace upsim::cli

#include "tools/trace_commands.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <optional>
#include <ostream>

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

}  // namespace upsim::cli

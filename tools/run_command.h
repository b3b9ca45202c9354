// `upsim run`: load a scenario, build the models and the workload, simulate, write outputs.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

struct RunOptions {
  std::string scenario;
  std::vector<std::string> overrides;  ///< "a.b=value", applied in order
  std::string out_dir;                 ///< empty: upsim-out/<scenario stem>[-N]
  std::string trace_file;              ///< empty: <out>/trace.json
  bool no_trace = false;
  bool force = false;
  bool quiet = false;
};

/// Runs one scenario and prints its summary to `out`. Throws ConfigError for bad input,
/// SimulationError when the run cannot complete, std::runtime_error for I/O problems.
void run_scenario(const RunOptions& options, std::ostream& out);

}  // namespace upsim::cli

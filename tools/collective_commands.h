// `upsim validate collectives`: the flow network's all-reduce against measured sweeps.
// `upsim calibrate collectives`: fits collective tuning parameters to measured nccl-tests logs
// (topology/fitting/collective_fit.h) and writes a tuning file.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns 0 when every system is within its bounds, 1 otherwise; bad input throws.
int validate_collectives_main(const std::vector<std::string>& args, std::ostream& out);

/// Returns 0 after writing the tuning file; bad input (options, files, logs) throws.
int calibrate_collectives_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli

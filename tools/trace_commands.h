// `upsim validate traces DIR`: replay a directory of per-rank PyTorch traces with their measured
// durations and compare each rank's predicted iteration time with the measured one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns the exit code; bad input throws (TraceError names the file) for main to report.
int validate_traces_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli

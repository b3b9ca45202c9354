// `upsim calibrate kernels` and `upsim validate kernels`: fit the calibrated kernel model on
// measured sweeps, and compare a calibration with measurements (held-out points).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Both commands return the process exit code; bad input throws (ConfigError,
/// CalibrationDataError, std::runtime_error) for main to report.
int calibrate_kernels_main(const std::vector<std::string>& args, std::ostream& out);
int validate_kernels_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli

// `upsim calibrate kernels`, `upsim validate kernels` and `upsim convert kernels`: fit the
// calibrated kernel model on measured sweeps, compare a calibration with measurements (held-out
// points), and convert measurement tables from CSV to HDF5.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Both commands return the process exit code; bad input throws (ConfigError,
/// CalibrationDataError, std::runtime_error) for main to report.
int calibrate_kernels_main(const std::vector<std::string>& args, std::ostream& out);
int validate_kernels_main(const std::vector<std::string>& args, std::ostream& out);
/// `upsim calibrate launch`: the launch-floor table of bench/gpu/gpu_microbench -> the hardware
/// profile's kernel_overhead.
int calibrate_launch_main(const std::vector<std::string>& args, std::ostream& out);
/// `upsim convert kernels`: CSV measurement tables to the HDF5 layout.
int convert_kernels_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli

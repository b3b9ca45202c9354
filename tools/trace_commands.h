// `upsim validate traces DIR`: replay a directory of per-rank PyTorch traces with their measured
// durations and compare each rank's predicted iteration time with the measured one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns the exit code; bad input throws (ParseError names the file) for main to report.
int validate_traces_main(const std::vector<std::string>& args, std::ostream& out);

/// `upsim calibrate host-overheads TRACE... --out FILE`: the seed's T1-T5 host overheads
/// extracted from Kineto traces into a host-overhead file (configs/host/ schema).
int calibrate_host_overheads_main(const std::vector<std::string>& args, std::ostream& out);

/// `upsim convert traces DIR --out FILE.csv`: the traced GPU kernels as a kernel measurement
/// table (traced_kernels.h, kernel_measurements.h) to calibrate the kernel model on.
int convert_traces_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli

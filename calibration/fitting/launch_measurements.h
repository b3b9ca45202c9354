// The launch-floor table of bench/gpu/gpu_microbench (launch.csv) and what `upsim calibrate
// launch` takes from it for a hardware profile.
//
// Format: `# key: value` lines (the GPU, driver, clocks and UTC time of the run), then a header
// `quantity,bytes,time_us` and one measured quantity per line:
//   empty_kernel_back_to_back      GPU time per empty kernel launched back to back on one stream
//                                  (CUDA events around the calls): the per-kernel floor of a busy
//                                  stream, the hardware profile's kernel_overhead
//   empty_kernel_launch_and_sync   host wall time of one launch + cudaStreamSynchronize
//   empty_kernel_launch_host       host time of one kernel launch call
//   event_record_host, stream_wait_event_host   host time of cudaEventRecord / StreamWaitEvent
//   memcpy_<h2d|d2h>_<pinned|pageable>          host wall time of one cudaMemcpyAsync of
//                                               `bytes` + synchronize
// Blank lines are skipped, and blanks around a field dropped; fields are CSV as
// sim/formats/csv.h reads it (RFC 4180 quoting). Unknown quantities are kept (a newer benchmark
// may add some). Errors name the file and line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/time.h"

namespace upsim {

struct LaunchQuantity {
  std::string name;
  int64_t bytes = 0;
  double time_us = 0.0;
  int line = 0;
};

struct LaunchTable {
  std::filesystem::path path;
  /// The `# key: value` lines, by key.
  std::map<std::string, std::string> metadata;
  std::vector<LaunchQuantity> rows;

  /// The row of `name` with `bytes`, or nullptr.
  const LaunchQuantity* find(const std::string& name, int64_t bytes = 0) const;
};

/// Throws CalibrationDataError (file:line and what was expected) on unreadable or malformed input,
/// ParseError (file:line:column) on malformed quoting.
LaunchTable read_launch_csv(const std::filesystem::path& path);

/// kernel_overhead of the hardware profile: empty_kernel_back_to_back. Throws
/// CalibrationDataError naming the file when the table lacks it.
Duration kernel_overhead_from(const LaunchTable& table);

}  // namespace upsim

// The table `upsim sweep` prints when it is done: one line per point with its axis values, its
// status and the numbers a reader compares first (iteration time, throughput, MFU, exposed
// communication, memory per GPU), in aligned columns; results.csv holds every column.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sim/formats/csv.h"

namespace upsim::cli {

/// An axis value as tables and plots show it: a YAML file by its stem
/// ("configs/hardware/h100_sxm5_80gb.yaml" -> "h100_sxm5_80gb"), anything else as it is.
std::string short_axis_value(std::string_view value);

/// Rows printed before "... N more points" (results.csv has them all).
inline constexpr size_t kSweepTableRows = 40;

/// `records`: results.csv read back (the header, then one record per point); `axis_columns`:
/// how many columns after `point` are axis keys. An axis value that names a YAML file is shown
/// by its file stem; a number no shown point has is left out. Returns "" for a table without
/// points.
std::string format_sweep_table(const std::vector<CsvRecord>& records, size_t axis_columns,
                               size_t max_rows = kSweepTableRows);

}  // namespace upsim::cli

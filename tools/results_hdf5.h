// A sweep's results table as HDF5 (results.h5), for h5py / pandas / MATLAB users: group
// "/results" holds one dataset per column of results.csv, row i of every dataset being point i.
// Columns whose every value is a number (or empty) are float64 (empty -> NaN); the others are
// variable-length UTF-8 strings. The group's attribute "columns" lists the names in table order.
// No object timestamps are stored, so the same table gives the same bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace upsim::cli {

/// Writes `header` and `rows` (rows[i][c], as parsed from the CSV) to `path` (created or
/// replaced through <path>.tmp). Throws std::runtime_error naming the file on failure.
void write_results_hdf5(const std::filesystem::path& path, const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace upsim::cli

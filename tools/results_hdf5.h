// A sweep's results table as HDF5 (results.h5), for h5py / pandas / MATLAB users: group
// "/results" holds one dataset per column of results.csv, row i of every dataset being point i.
// Columns whose every value is an integer (none empty) are int64 (the point index, memory bytes,
// an integer axis); other columns whose every value is a number (or empty) are float64 (empty ->
// NaN); the others are variable-length UTF-8 strings. The group's attribute "columns" lists the
// names in table order. No object timestamps are stored, so the same table gives the same bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace upsim::cli {

/// The HDF5 file of `header` and `rows` (rows[i][c], as parsed from the CSV), built in memory
/// (libhdf5's core driver without a backing store: libhdf5 opens no path). The same table gives
/// the same bytes. Throws std::runtime_error when libhdf5 fails.
std::string results_hdf5_image(const std::vector<std::string>& header,
                               const std::vector<std::vector<std::string>>& rows);

/// Writes results_hdf5_image(header, rows) to `path` with write_file_atomically (through
/// <path>.tmp; a symbolic link or any other non-regular file at either name is refused, never
/// followed). Throws std::runtime_error naming the file on failure.
void write_results_hdf5(const std::filesystem::path& path, const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace upsim::cli

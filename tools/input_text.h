// An input file read whole, the way sim/input_file.h says inputs are read: a regular file of at
// most a stated size, never a device or a pipe (which could be read forever), with the reason
// when it cannot be read. For the tables and summaries that `upsim plot` and `upsim diff` read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace upsim::cli {

/// Reads all of `path` into `text`. Returns nullopt, or why the file cannot be read: the answer
/// of input_file_problem(path, max_bytes) ("file not found", "a named pipe, not a regular
/// file", "N bytes, more than ..."), or the system's reason. The file is opened without blocking
/// and checked again once open (a file swapped for a pipe in between is refused too), and never
/// more than `max_bytes` are read.
std::optional<std::string> read_input_text(const std::filesystem::path& path,
                                           std::uintmax_t max_bytes, std::string& text);

}  // namespace upsim::cli

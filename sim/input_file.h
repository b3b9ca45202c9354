// Input files are read the same way everywhere: regular files only (a device such as /dev/zero
// or /dev/urandom, or a pipe, never ends), at most a bound that each format states, and the
// system's reason when a file cannot be read. Readers call input_file_problem() first and throw
// their own error type with its answer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace upsim {

inline constexpr std::uintmax_t kMiB = std::uintmax_t{1} << 20;
inline constexpr std::uintmax_t kGiB = std::uintmax_t{1} << 30;

/// What a file of this type is, for messages: "a symbolic link", "a folder", "a device", "a
/// named pipe", "a socket", "a regular file", "not a regular file" (anything else).
std::string_view file_type_name(std::filesystem::file_type type);

/// Why `path` cannot be read as an input of at most `max_bytes` ("file not found", "not a
/// regular file (a device)", "3 GiB, more than the 1 GiB ..."), or nullopt when it can.
std::optional<std::string> input_file_problem(const std::filesystem::path& path,
                                              std::uintmax_t max_bytes);

}  // namespace upsim

#include "sim/input_file.h"

#include <system_error>

namespace upsim {

std::optional<std::string> input_file_problem(const std::filesystem::path& path,
                                              std::uintmax_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows links to what they name
  if (ec || !fs::exists(st)) {
    return ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "file not found";
  }
  switch (st.type()) {
    case fs::file_type::regular:
      break;
    case fs::file_type::directory:
      return "a folder, not a file";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device, not a regular file";
    case fs::file_type::fifo:
      return "a pipe, not a regular file";
    default:
      return "not a regular file";
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) return ec.message();
  if (size > max_bytes) {
    return std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
           " bytes such an input may have";
  }
  return std::nullopt;
}

}  // namespace upsim

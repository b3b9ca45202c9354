#include "sim/input_file.h"

#include <system_error>

namespace upsim {

std::string_view file_type_name(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::regular:
      return "a regular file";
    case std::filesystem::file_type::symlink:
      return "a symbolic link";
    case std::filesystem::file_type::directory:
      return "a folder";
    case std::filesystem::file_type::block:
    case std::filesystem::file_type::character:
      return "a device";
    case std::filesystem::file_type::fifo:
      return "a named pipe";
    case std::filesystem::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

std::optional<std::string> input_file_problem(const std::filesystem::path& path,
                                              std::uintmax_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows links to what they name
  if (ec || !fs::exists(st)) {
    return ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "file not found";
  }
  if (st.type() == fs::file_type::directory) return "a folder, not a file";
  if (st.type() != fs::file_type::regular) {
    const std::string_view what = file_type_name(st.type());
    return what == "not a regular file" ? std::string(what)
                                        : std::string(what) + ", not a regular file";
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

#include "tools/input_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "sim/input_file.h"

namespace upsim::cli {

std::optional<std::string> read_input_text(const std::filesystem::path& path,
                                           std::uintmax_t max_bytes, std::string& text) {
  text.clear();
  if (auto why = input_file_problem(path, max_bytes)) return why;
  // O_NONBLOCK: opening a pipe put here since the check above does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return std::string(std::strerror(errno));
  struct stat st {};
  std::optional<std::string> problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  }
  std::array<char, 1 << 16> buffer{};
  while (!problem) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem = std::strerror(errno);
      break;
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      problem = "more than the " + std::to_string(max_bytes) + " bytes such an input may have";
      break;
    }
    text.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  if (problem) text.clear();
  return problem;
}

}  // namespace upsim::cli

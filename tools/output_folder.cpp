#include "tools/output_folder.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "sim/input_file.h"
#include "tools/interrupt_cleanup.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

/// What is at `p` when it is there and not a regular file ("a symbolic link", ...), else "".
std::string not_regular(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st)) return "";
  return std::string(file_type_name(st.type()));
}

}  // namespace

void check_replaceable(const fs::path& path) {
  for (const fs::path& p : {path, fs::path(path.string() + ".tmp")}) {
    const std::string what = not_regular(p);
    if (!what.empty()) {
      throw std::runtime_error(
          fmt::format("{} is {}; upsim writes and replaces regular files only, even with --force",
                      p.string(), what));
    }
  }
}

fs::path prepare_output_folder(const fs::path& scenario_file, const fs::path& requested_out,
                               const std::vector<std::string>& planned_files, bool force) {
  fs::path out;
  std::error_code ec;
  if (!requested_out.empty()) {
    out = requested_out;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
      throw std::runtime_error(fmt::format("--out {}: exists and is not a folder", out.string()));
    }
    for (const std::string& name : planned_files) {
      check_replaceable(out / name);
      if (force) continue;
      // A file's temporary twin (<name>.tmp) would be replaced too.
      for (const fs::path& p : {out / name, out / (name + ".tmp")}) {
        if (fs::exists(fs::symlink_status(p, ec))) {
          throw std::runtime_error(fmt::format(
              "{} already exists; upsim does not overwrite files unasked: choose another --out "
              "folder, or pass --force to overwrite",
              p.string()));
        }
      }
    }
  } else {
    const fs::path base = fs::path("upsim-out") / scenario_file.stem();
    out = base;
    for (int i = 2; fs::exists(out, ec); ++i) {
      out = fs::path(base.string() + "-" + std::to_string(i));
    }
  }
  fs::create_directories(out, ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("cannot create output folder {}: {}", out.string(), ec.message()));
  }
  return out;
}

void write_file_atomically(const fs::path& path, std::string_view content) {
  check_replaceable(path);
  const fs::path tmp = fs::path(path.string() + ".tmp");
  const TempFileGuard guard(tmp);
  auto fail = [&](int err, bool remove_tmp) {
    if (remove_tmp) ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
  };
  // Never through a symbolic link planted at the temporary name.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno, false);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail(err, true);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(errno, true);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(errno, true);
}

}  // namespace upsim::cli

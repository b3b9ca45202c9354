#include "tools/output_folder.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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

/// Writes `content` to `tmp` (created or truncated, never through a symbolic link); on failure
/// removes what it wrote and throws naming `path`, the file it stands for.
void write_temporary(const fs::path& tmp, const fs::path& path, std::string_view content) {
  auto fail = [&](int err, bool remove_tmp) {
    if (remove_tmp) ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
  };
  // Never through a symbolic link planted at the temporary name, never onto a pipe or device
  // planted there (O_NONBLOCK: opening a pipe without a reader fails instead of waiting).
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno, false);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(
        fmt::format("cannot write {}: {} is not a regular file", path.string(), tmp.string()));
  }
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
}

fs::path temporary_of(const fs::path& path) {
  return fs::path(path.string() + ".tmp");
}

/// SIGINT and SIGTERM held back on this thread while it lives.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &held, &previous_);
  }
  ~SignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t previous_{};
};

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

OutputFolder prepare_output_folder(const fs::path& scenario_file, const fs::path& requested_out,
                                   const std::vector<std::string>& planned_files, bool force,
                                   const std::vector<std::string>& planned_folders) {
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
    for (const std::string& name : planned_folders) {
      const fs::path p = out / name;
      const fs::file_status st = fs::symlink_status(p, ec);
      if (!fs::exists(st)) continue;
      if (!fs::is_directory(st)) {
        throw std::runtime_error(
            fmt::format("{} is {}; upsim writes its files into a folder there, even with --force",
                        p.string(), file_type_name(st.type())));
      }
      if (!force) {
        throw std::runtime_error(fmt::format(
            "{} already exists; upsim does not overwrite files unasked: choose another --out "
            "folder, or pass --force to overwrite",
            p.string()));
      }
    }
  } else {
    const fs::path base = fs::path("upsim-out") / scenario_file.stem();
    out = base;
    for (int i = 2; fs::exists(out, ec); ++i) {
      out = fs::path(base.string() + "-" + std::to_string(i));
    }
  }
  const bool created = fs::create_directories(out, ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("cannot create output folder {}: {}", out.string(), ec.message()));
  }
  return OutputFolder{out, created};
}

void write_file_atomically(const fs::path& path, std::string_view content) {
  check_replaceable(path);
  const fs::path tmp = temporary_of(path);
  const TempFileGuard guard(tmp);
  write_temporary(tmp, path, content);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
  }
}

OutputFiles::OutputFiles(OutputFolder folder) : folder_(std::move(folder)) {}

OutputFiles::~OutputFiles() {
  if (committed_) return;
  remove_temporaries();
  for (auto it = made_folders_.rbegin(); it != made_folders_.rend(); ++it) {
    std::error_code ec;
    if (fs::is_empty(*it, ec) && !ec) fs::remove(*it, ec);
  }
  if (folder_.created) {
    std::error_code ec;
    if (fs::is_empty(folder_.path, ec) && !ec) fs::remove(folder_.path, ec);
  }
}

void OutputFiles::remove_temporaries() noexcept {
  for (Entry& e : entries_)
    ::unlink(e.tmp.c_str());
  entries_.clear();
}

fs::path OutputFiles::reserve(const fs::path& path) {
  if (committed_) throw std::logic_error("OutputFiles::reserve after commit");
  check_replaceable(path);
  for (const Entry& e : entries_) {
    if (e.path == path) return e.tmp;
  }
  Entry e{path, temporary_of(path), nullptr};
  e.guard = std::make_unique<TempFileGuard>(e.tmp);
  entries_.push_back(std::move(e));
  return entries_.back().tmp;
}

void OutputFiles::release(const fs::path& path) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->path != path) continue;
    ::unlink(it->tmp.c_str());
    entries_.erase(it);
    return;
  }
}

void OutputFiles::make_folder(const fs::path& path) {
  if (committed_) throw std::logic_error("OutputFiles::make_folder after commit");
  std::error_code ec;
  const bool made = fs::create_directories(path, ec);
  if (ec || !fs::is_directory(fs::symlink_status(path, ec))) {
    throw std::runtime_error(fmt::format("cannot create folder {}: {}", path.string(),
                                         ec ? ec.message() : "not a folder"));
  }
  if (made) made_folders_.push_back(path);
}

void OutputFiles::stage(const fs::path& path, std::string_view content) {
  const fs::path tmp = reserve(path);
  write_temporary(tmp, path, content);
}

void OutputFiles::commit(const std::vector<fs::path>& stale) {
  if (committed_) return;
  for (const Entry& e : entries_) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(e.tmp, ec))) {
      throw std::runtime_error(fmt::format("cannot write {}: its temporary file {} was not written",
                                           e.path.string(), e.tmp.string()));
    }
  }
  const SignalsHeld held;
  for (Entry& e : entries_) {
    if (::rename(e.tmp.c_str(), e.path.c_str()) != 0) {
      const int err = errno;
      throw std::runtime_error(
          fmt::format("cannot write {}: {}", e.path.string(), std::strerror(err)));
    }
    e.guard.reset();
  }
  for (const fs::path& p : stale) {
    std::error_code ec;
    if (fs::is_regular_file(fs::symlink_status(p, ec))) fs::remove(p, ec);
  }
  entries_.clear();
  committed_ = true;
}

}  // namespace upsim::cli

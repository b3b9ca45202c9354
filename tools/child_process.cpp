#include "tools/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

extern char** environ;

namespace upsim::cli {

namespace {

using Clock = std::chrono::steady_clock;

/// A descriptor closed when it goes out of scope.
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { close(); }
  int get() const { return fd_; }
  void reset(int fd) {
    close();
    fd_ = fd;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// Both ends of a pipe, close-on-exec (the child gets only what its file actions give it).
struct Pipe {
  Descriptor read_end;
  Descriptor write_end;

  /// False (errno set) when the system has no pipe to give.
  bool open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    read_end.reset(fds[0]);
    write_end.reset(fds[1]);
    return true;
  }
};

class SpawnFileActions {
 public:
  SpawnFileActions() { ::posix_spawn_file_actions_init(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() { ::posix_spawnattr_init(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

/// Waits for the child on every path: a child not yet waited for is killed first.
class ChildGuard {
 public:
  ChildGuard(pid_t pid, std::string program) : pid_(pid), program_(std::move(program)) {}
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard() {
    if (waited_) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }

  /// Kills the child (it is waited for by the destructor or wait()).
  void kill() { ::kill(pid_, SIGKILL); }

  /// The child's wait status, waiting until `deadline` (none: as long as it takes); throws on
  /// the deadline (the destructor then kills it) or when waitpid fails.
  int wait(std::optional<Clock::time_point> deadline) {
    while (true) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, deadline ? WNOHANG : 0);
      if (r == pid_) {
        waited_ = true;
        return status;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        const int err = errno;
        waited_ = err == ECHILD;  // nothing left to wait for
        throw ChildProcessError(
            fmt::format("cannot wait for {} to finish: {}", program_, std::strerror(err)), false);
      }
      if (Clock::now() >= *deadline) throw timed_out();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  ChildProcessError timed_out() const {
    return ChildProcessError(fmt::format("{} did not finish in time and was stopped", program_),
                             false);
  }

 private:
  pid_t pid_;
  std::string program_;
  bool waited_ = false;
};

/// Starts `argv` with stdin from /dev/null and stdout / stderr on the pipes' write ends.
pid_t spawn(const std::vector<std::string>& argv, const Pipe& out, const Pipe& err) {
  const std::string& program = argv.front();
  const auto fail = [&](int error) {
    return ChildProcessError(fmt::format("cannot start {}: {}", program, std::strerror(error)),
                             error == ENOENT);
  };
  SpawnFileActions actions;
  int rc =
      ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(actions.get(), out.write_end.get(), 1);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(actions.get(), err.write_end.get(), 2);
  if (rc == 0) rc = ::posix_spawn_file_actions_addclosefrom_np(actions.get(), 3);
  if (rc != 0) throw fail(rc);
  SpawnAttributes attributes;
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT, SIGCHLD})
    sigaddset(&defaults, s);
  rc = ::posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (rc == 0) rc = ::posix_spawnattr_setsigmask(attributes.get(), &none);
  if (rc == 0) rc = ::posix_spawnattr_setsigdefault(attributes.get(), &defaults);
  if (rc != 0) throw fail(rc);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));  // posix_spawnp does not write them
  args.push_back(nullptr);
  pid_t pid = -1;
  rc = ::posix_spawnp(&pid, program.c_str(), actions.get(), attributes.get(), args.data(), environ);
  if (rc != 0) throw fail(rc);
  return pid;
}

}  // namespace

std::string ChildProcessResult::how_it_ended() const {
  if (signal != 0) return fmt::format("signal {}", signal);
  return fmt::format("exit status {}", exit_status);
}

ChildProcessResult run_program(const std::vector<std::string>& argv,
                               const ChildProcessLimits& limits) {
  if (argv.empty() || argv.front().empty()) {
    throw std::invalid_argument("run_program: no program given");
  }
  const std::string& program = argv.front();
  Pipe out;
  Pipe err;
  if (!out.open() || !err.open()) {
    throw ChildProcessError(fmt::format("cannot start {}: {}", program, std::strerror(errno)),
                            false);
  }
  ChildGuard child(spawn(argv, out, err), program);
  out.write_end.close();
  err.write_end.close();
  std::optional<Clock::time_point> deadline;
  if (limits.timeout.count() > 0) deadline = Clock::now() + limits.timeout;

  ChildProcessResult result;
  std::array<pollfd, 2> fds{pollfd{out.read_end.get(), POLLIN, 0},
                            pollfd{err.read_end.get(), POLLIN, 0}};
  std::array<char, 1 << 16> buffer{};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    int wait_ms = -1;
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) throw child.timed_out();
      wait_ms = static_cast<int>(std::min<int64_t>(left.count() + 1, 60'000));
    }
    const int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      throw ChildProcessError(
          fmt::format("cannot read the output of {}: {}", program, std::strerror(errno)), false);
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) {
        throw ChildProcessError(
            fmt::format("cannot read the output of {}: {}", program, std::strerror(errno)), false);
      }
      if (n == 0) {
        fds[i].fd = -1;  // poll() skips negative descriptors
        continue;
      }
      const auto bytes = static_cast<size_t>(n);
      if (i == 0) {
        if (result.stdout_bytes.size() + bytes > limits.max_stdout_bytes) {
          child.kill();
          throw ChildProcessError(
              fmt::format("{} wrote more than {} bytes to its standard output and was stopped",
                          program, limits.max_stdout_bytes),
              false);
        }
        result.stdout_bytes.append(buffer.data(), bytes);
      } else {
        const size_t room = limits.max_stderr_bytes - result.stderr_text.size();
        result.stderr_text.append(buffer.data(), std::min(room, bytes));
        result.stderr_truncated = result.stderr_truncated || bytes > room;
      }
    }
  }
  const int status = child.wait(deadline);
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace upsim::cli

// The one way upsim starts another program (today: gnuplot for `upsim plot`).
//
// Contract:
//  - The program is started with posix_spawnp and an argument vector: no shell is involved, so
//    nothing in an argument (a path, a label) is ever interpreted; a name without a slash is
//    looked up on PATH, the environment is upsim's own.
//  - The child's standard input is /dev/null; its standard output and standard error are
//    captured through pipes (read together with poll(), so neither can block the other). Every
//    other descriptor is closed in the child; signals it starts with are unblocked and at their
//    defaults (SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT, SIGCHLD).
//  - At most `max_stdout_bytes` of standard output are accepted: a child that writes more is
//    killed and the call throws. Standard error is kept up to `max_stderr_bytes` (the rest is
//    read and dropped, `stderr_truncated` says so). With a non-zero `timeout`, a child still
//    running then is killed and the call throws.
//  - The child is always waited for, on every path out of run_program (exceptions included):
//    never a zombie. EINTR is retried everywhere.
//  - Errors are ChildProcessError naming the program and the system's reason; when the program
//    cannot be found (ENOENT from posix_spawnp) program_not_found() is true, so a caller can
//    treat a missing optional tool as such.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace upsim::cli {

struct ChildProcessLimits {
  size_t max_stdout_bytes = size_t{1} << 28;  ///< 256 MiB
  size_t max_stderr_bytes = size_t{1} << 16;  ///< 64 KiB
  std::chrono::milliseconds timeout{0};       ///< 0: none
};

/// How a finished child ended and what it wrote.
struct ChildProcessResult {
  std::string stdout_bytes;
  std::string stderr_text;
  bool stderr_truncated = false;
  int exit_status = -1;  ///< its exit status when it exited, else -1
  int signal = 0;        ///< the signal that ended it, else 0

  bool succeeded() const { return signal == 0 && exit_status == 0; }
  /// "exit status 1", "signal 9 (Killed)".
  std::string how_it_ended() const;
};

class ChildProcessError : public std::runtime_error {
 public:
  ChildProcessError(const std::string& message, bool program_not_found)
      : std::runtime_error(message), program_not_found_(program_not_found) {}
  bool program_not_found() const { return program_not_found_; }

 private:
  bool program_not_found_;
};

/// Runs `argv[0]` with arguments `argv` to its end (see the contract above). Throws
/// std::invalid_argument for an empty `argv`, ChildProcessError when the program cannot be
/// started, writes more than the limit, or runs past the timeout.
ChildProcessResult run_program(const std::vector<std::string>& argv,
                               const ChildProcessLimits& limits = {});

}  // namespace upsim::cli

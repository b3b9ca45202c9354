// Temporary output files removed when the user interrupts a run.
//
// Contract:
//  - install_interrupt_cleanup() (once, from main) handles SIGINT and SIGTERM: it removes every
//    file registered at that moment and exits with status 128 + the signal (130, 143), as
//    shells report an interrupted program.
//  - A TempFileGuard registers one path for its lifetime (threads may register at once); at most
//    kMaxTempFiles at once (more are simply not registered: a sweep's workers each hold a few).
//    Paths longer than kMaxTempPath are not registered either.
//  - The handler does only async-signal-safe work (unlink, _exit) on a fixed table; that table
//    is the process's one piece of global state, which a signal handler cannot do without.
#pragma once

#include <cstddef>
#include <filesystem>

namespace upsim::cli {

inline constexpr size_t kMaxTempFiles = 256;
inline constexpr size_t kMaxTempPath = 4096;

/// Installs the SIGINT / SIGTERM handler. Idempotent.
void install_interrupt_cleanup();

/// Registers `path` for removal on SIGINT / SIGTERM while the guard lives.
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::filesystem::path& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace upsim::cli

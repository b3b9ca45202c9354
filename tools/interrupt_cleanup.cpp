#include "tools/interrupt_cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>

namespace upsim::cli {
namespace {

struct Slot {
  std::atomic<bool> claimed{false};
  std::atomic<bool> used{false};
  char path[kMaxTempPath] = {};
};

// The handler's table (see the header: the one global a signal handler needs).
std::array<Slot, kMaxTempFiles>
    g_slots;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void remove_temp_files_and_exit(int signal_number) {
  for (Slot& slot : g_slots) {
    if (slot.used.load(std::memory_order_acquire)) ::unlink(slot.path);
  }
  ::_exit(128 + signal_number);
}

}  // namespace

void install_interrupt_cleanup() {
  struct sigaction action {};
  action.sa_handler = remove_temp_files_and_exit;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

TempFileGuard::TempFileGuard(const std::filesystem::path& path) {
  const std::string text = path.string();
  if (text.size() >= kMaxTempPath) return;
  for (size_t i = 0; i < g_slots.size(); ++i) {
    Slot& slot = g_slots[i];
    // Claimed before it is filled (threads of a sweep register at once); the handler reads a
    // slot only once `used`, and `claimed` keeps two threads off one slot.
    bool expected = false;
    if (!slot.claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) continue;
    std::memcpy(slot.path, text.c_str(), text.size() + 1);
    slot.used.store(true, std::memory_order_release);
    slot_ = static_cast<int>(i);
    return;
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ < 0) return;
  Slot& slot = g_slots[static_cast<size_t>(slot_)];
  slot.used.store(false, std::memory_order_release);
  slot.claimed.store(false, std::memory_order_release);
}

}  // namespace upsim::cli

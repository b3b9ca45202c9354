#include "tools/shipped_files.h"

#include <system_error>

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

bool holds_shipped_files(const fs::path& root) {
  std::error_code ec;
  return fs::is_directory(root / "configs", ec) && fs::is_directory(root / "test" / "data", ec);
}

}  // namespace

std::filesystem::path shipped_root() {
  if (holds_shipped_files(".")) return {};
  std::error_code ec;
  // Linux: the running program's own path, whatever the working directory or PATH.
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path above = program.parent_path().parent_path();
    const fs::path installed = above / "share" / "upsim";
    if (holds_shipped_files(installed)) return installed;
    // A build folder inside a checkout (<root>/build/upsim).
    if (holds_shipped_files(above)) return above;
  }
  return {};
}

std::string shipped_path(std::string_view relative) {
  if (relative.empty()) return {};
  const fs::path root = shipped_root();
  return root.empty() ? std::string(relative) : (root / relative).string();
}

std::string shipped_pair(std::string_view table_eq_profile) {
  const size_t eq = table_eq_profile.find('=');
  if (eq == std::string_view::npos) return shipped_path(table_eq_profile);
  return shipped_path(table_eq_profile.substr(0, eq)) + "=" +
         shipped_path(table_eq_profile.substr(eq + 1));
}

}  // namespace upsim::cli

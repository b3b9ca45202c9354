#include "tools/memory_limit.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

/// cgroup v1 writes "no limit" as the largest page-aligned int64 (9223372036854771712).
constexpr uint64_t kNoCgroupLimit = uint64_t{1} << 62;

/// At most the first 64 KiB of a file (a cgroup file is a few bytes, /proc/self/cgroup a line a
/// hierarchy); empty when it cannot be read.
std::string read_small_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return "";
  std::string text(64 * 1024, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  return text;
}

void take_tighter(std::optional<MemoryLimit>& best, uint64_t bytes, std::string source) {
  if (!best || bytes < best->bytes) best = MemoryLimit{bytes, std::move(source)};
}

/// The limit files of `cgroup` (a path such as "/a/b") and its ancestors below `mount`.
void tightest_along(const fs::path& mount, std::string_view cgroup, const char* file,
                    std::optional<MemoryLimit>& best) {
  std::error_code ec;
  if (!fs::is_directory(mount, ec)) return;
  std::string path(cgroup);
  for (;;) {
    const fs::path dir = mount / fs::path(path).relative_path();
    if (const std::optional<uint64_t> v = parse_cgroup_memory_limit(read_small_file(dir / file))) {
      take_tighter(best, *v, fmt::format("cgroup {} ({})", file, path.empty() ? "/" : path));
    }
    const size_t slash = path.find_last_of('/');
    if (path.empty() || slash == std::string::npos) break;
    path.resize(slash);
  }
}

}  // namespace

std::optional<uint64_t> parse_cgroup_memory_limit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text.empty() || text == "max") return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v >= kNoCgroupLimit) {
    return std::nullopt;
  }
  return v;
}

std::optional<MemoryLimit> cgroup_memory_limit(std::string_view proc_self_cgroup,
                                               const fs::path& cgroup_root) {
  std::optional<MemoryLimit> best;
  std::istringstream lines{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-ID:controller-list:cgroup-path (cgroups(7)); v2 has ID 0 and no controllers.
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string_view controllers =
        std::string_view(line).substr(first + 1, second - first - 1);
    const std::string_view path = std::string_view(line).substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      tightest_along(cgroup_root, path, "memory.max", best);
      tightest_along(cgroup_root / "unified", path, "memory.max", best);
      continue;
    }
    bool memory = false;
    for (size_t at = 0; at <= controllers.size();) {
      const size_t comma = std::min(controllers.find(',', at), controllers.size());
      memory = memory || controllers.substr(at, comma - at) == "memory";
      at = comma + 1;
    }
    if (memory) tightest_along(cgroup_root / "memory", path, "memory.limit_in_bytes", best);
  }
  return best;
}

MemoryLimit process_memory_limit() {
  std::optional<MemoryLimit> best;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0) {
    take_tighter(best, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes),
                 "physical memory");
  }
  for (const auto& [resource, name] :
       {std::pair{RLIMIT_AS, "RLIMIT_AS (ulimit -v)"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA"}}) {
    rlimit limit{};
    if (::getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      take_tighter(best, static_cast<uint64_t>(limit.rlim_cur), name);
    }
  }
  if (const std::optional<MemoryLimit> cgroup =
          cgroup_memory_limit(read_small_file("/proc/self/cgroup"), "/sys/fs/cgroup")) {
    take_tighter(best, cgroup->bytes, cgroup->source);
  }
  return best.value_or(MemoryLimit{UINT64_MAX, "no known limit"});
}

}  // namespace upsim::cli

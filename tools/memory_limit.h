// How much memory this process may use, so that a run too large for it is refused with its reason
// before it runs out (std::bad_alloc, or the kernel's OOM killer under a cgroup limit).
//
// Contract:
//  - process_memory_limit() is the least of: the machine's physical memory (sysconf), the soft
//    address-space and data-segment limits (RLIMIT_AS, `ulimit -v`; RLIMIT_DATA), and the memory
//    limit of the process's cgroup and of each of its ancestors (cgroup v2 `memory.max`, cgroup v1
//    `memory.limit_in_bytes`, as containers, Slurm and `systemd-run -p MemoryMax=` set them). Its
//    `source` names the one that binds, for messages.
//  - The cgroup lookup reads /proc/self/cgroup and the files below /sys/fs/cgroup; anything it
//    cannot read counts as no limit. cgroup_memory_limit() takes both as arguments (tests).
//  - "max" (v2), and v1's "unlimited" (a value of at least 2^62), mean no limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace upsim::cli {

struct MemoryLimit {
  uint64_t bytes = 0;
  /// "physical memory", "RLIMIT_AS (ulimit -v)", "RLIMIT_DATA", "cgroup memory.max (/a/b)", ...
  std::string source;
};

MemoryLimit process_memory_limit();

/// The value of a cgroup memory limit file ("max", "8589934592"); nullopt for no limit or text
/// that is not a limit.
std::optional<uint64_t> parse_cgroup_memory_limit(std::string_view text);

/// The tightest cgroup memory limit for a process whose /proc/self/cgroup reads
/// `proc_self_cgroup`, with the cgroup file systems mounted below `cgroup_root` (v2 at the root
/// itself or at `unified/`, v1's memory controller at `memory/`); nullopt: none.
std::optional<MemoryLimit> cgroup_memory_limit(std::string_view proc_self_cgroup,
                                               const std::filesystem::path& cgroup_root);

}  // namespace upsim::cli

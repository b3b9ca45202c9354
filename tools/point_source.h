// What a sweep point's row is computed from (PointSource, tools/sweep_records.h): the upsim
// version and a content hash of the point's fully resolved scenario — the base scenario's bytes,
// the overrides as applied and the bytes of every file the scenario references, transitively
// (sim/config/referenced_files.h: GPU profiles, calibrations, fabrics, host overheads, tables,
// plans, traces). A row whose source differs from its point's now is stale.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tools/sweep_records.h"

namespace upsim::cli {

/// The SHA-256 of each file, read once per sweep; safe to share between threads.
class FileHashes {
 public:
  /// The hash of the file at `path` (absolute). A file that cannot be read, or is not a regular
  /// file, hashes as the reason, so that it differs from any content.
  FileHash of(const std::filesystem::path& path);

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> hashes_;
};

/// The source of the point `base` + `overrides` ("key=value", as applied): never throws for a
/// bad scenario or override (such a point fails when it runs; its hash covers what there is).
PointSource point_source(const std::filesystem::path& base,
                         const std::vector<std::string>& overrides, FileHashes& hashes);

}  // namespace upsim::cli

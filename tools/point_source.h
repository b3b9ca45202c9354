// What a sweep point's row is computed from (PointSource, tools/sweep_records.h): the upsim
// version and a content hash of the point's fully resolved scenario — the base scenario's bytes,
// the overrides as applied and the bytes of every file the scenario references, transitively
// (sim/config/referenced_files.h: GPU profiles, calibrations, fabrics, host overheads, tables,
// plans, traces). A row whose source differs from its point's now is stale.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/config/referenced_files.h"
#include "tools/sweep_records.h"

namespace upsim::cli {

/// The sources of a sweep's points. Each file is hashed once, and each referenced YAML file read
/// once (the files are taken not to change while the sweep reads them). One thread at a time.
class PointSources {
 public:
  /// The source of the point `base` + `overrides` ("key=value", as applied). Never throws for a
  /// bad scenario or override (such a point fails when it runs; its hash covers what there is).
  PointSource of(const std::filesystem::path& base, const std::vector<std::string>& overrides);

 private:
  /// A file that cannot be read, or is not a regular file, hashes as the reason, so that it
  /// differs from any content.
  FileHash hash(const std::filesystem::path& path);

  std::map<std::string, std::string> hashes_;
  ReferencedFilesCache names_;
};

}  // namespace upsim::cli

// The records a sweep keeps in its folder (tools/sweep_command.h): the study manifest
// (study.points: which study the folder holds, each point's content hash, the upsim version) and
// one record per finished point (points/<n>.row: the point, what its row was computed from, the
// row, under a checksum). Text, one field per line, tab-separated; paths, identities and rows
// escaped (\\ \t \n \r), so that any text fits one line.
//
//   study.points                              points/<n>.row
//   upsim-study 1                             upsim-sweep-row 1
//   version<TAB>0.1.0                         checksum<TAB><sha256 of every line below>
//   base<TAB>/abs/base.yaml                   point<TAB>3
//   fits_memory          (only when set)      version<TAB>0.1.0
//   point<TAB>0<TAB><sha256><TAB><identity>   scenario<TAB><sha256>
//   point<TAB>1<TAB>...                       file<TAB><sha256><TAB>/abs/file   (one per file)
//                                             identity<TAB><identity>
//                                             row<TAB><the results-table line>
//
// Contract:
//  - parse_*(format_*(r)) == r. The parsers take any bytes: anything but a record the formatter
//    wrote (an edit, a truncation, two records glued, another file) is nullopt with the reason,
//    never an exception; a row record whose checksum does not match its lines is refused.
//  - Manifests written before these records (a `base` line first, then `<n><TAB><identity>`
//    lines, no version) parse with an empty version, so their folders are still this study's.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace upsim::cli {

/// A file a point's scenario depends on, and the SHA-256 of its bytes.
struct FileHash {
  std::string path;  ///< absolute
  std::string sha256;
  bool operator==(const FileHash&) const = default;
};

/// What a point's row is computed from: the upsim version and the content of its scenario.
struct PointSource {
  std::string version;
  /// SHA-256 over the base scenario's path, the overrides as applied and every file's hash.
  std::string scenario_sha256;
  std::vector<FileHash> files;  ///< sorted by path (the base scenario among them)
  bool operator==(const PointSource&) const = default;
};

/// points/<n>.row.
struct RowRecord {
  size_t point = 0;
  std::string identity;  ///< the point's overrides, as the manifest states them
  PointSource source;
  std::string row;  ///< the results-table line, with its newline
  bool operator==(const RowRecord&) const = default;
};

/// The SHA-256 of a point's scenario: over the base scenario's path, the overrides as applied,
/// in order, and each file's path and hash (PointSource::scenario_sha256).
std::string scenario_sha256(std::string_view base, const std::vector<std::string>& overrides,
                            const std::vector<FileHash>& files);

std::string format_row_record(const RowRecord& record);
/// nullopt, with the reason in `why`, for anything format_row_record did not write.
std::optional<RowRecord> parse_row_record(std::string_view text, std::string& why);

struct ManifestPoint {
  std::string scenario_sha256;  ///< empty in a manifest written before hashes were recorded
  std::string identity;
  bool operator==(const ManifestPoint&) const = default;
};

/// study.points; points[i] is point i.
struct Manifest {
  std::string version;  ///< empty: written before versions were recorded
  std::string base;     ///< the base scenario, absolute
  bool fits_memory = false;
  std::vector<ManifestPoint> points;
  bool operator==(const Manifest&) const = default;
};

std::string format_manifest(const Manifest& manifest);
/// nullopt, with the reason in `why`, for anything but a manifest (either format).
std::optional<Manifest> parse_manifest(std::string_view text, std::string& why);

/// Whether `a` and `b` describe the same study: the same base, fits_memory and points (each
/// point's identity), whatever the versions and hashes.
bool same_study(const Manifest& a, const Manifest& b);

}  // namespace upsim::cli

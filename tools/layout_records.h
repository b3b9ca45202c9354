// The record `upsim plan` keeps of each layout it simulated (tools/layout_search.h), so that
// `upsim plan --resume` takes a layout's results instead of simulating it again when nothing it
// was computed from has changed: <folder>/layouts/<scenario sha256>.layout, in the row-record
// format of the sweep (tools/sweep_records.h: the upsim version and the content hash of the
// layout's fully resolved scenario, under a checksum). The row holds the results, one field per
// tab: iteration, exposed tensor / pipeline / data / other communication and bubble (integer
// picoseconds), tokens/s, model TFLOP/s per GPU and MFU (17 significant digits, or `-`), then
// the layout's resolved scenario (best.yaml's body).
//
// Contract:
//  - parse_layout_result(format_layout_result(l), l) restores every simulated field of l
//    exactly, or the reason of an invalid one or of one too large for the machine: the result
//    of a layout simulated on another MPI rank travels as this text (tools/mpi_jobs.h).
//  - A record is taken only when it parses, its checksum holds and its source equals the
//    layout's source now (same version, same scenario hash); anything else is nullopt with the
//    reason, and the layout is simulated again.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "tools/layout_search.h"
#include "tools/sweep_records.h"

namespace upsim::cli {

/// The record's file in `dir` for a layout whose scenario hashes to `source`.
std::filesystem::path layout_record_path(const std::filesystem::path& dir,
                                         const PointSource& source);

/// A simulated layout's results as a row (see the file comment), "invalid\t<reason>\n" for a
/// layout the workload refused, or "machine_limit\t<reason>\n" for one whose graph this
/// machine's memory cannot hold.
std::string format_layout_result(const PlannedLayout& layout);

/// `layout` with the results of `row`; nullopt with the reason in `why` when it is malformed.
std::optional<PlannedLayout> parse_layout_result(std::string_view row, const PlannedLayout& layout,
                                                 std::string& why);

/// The record of a simulated layout.
std::string format_layout_record(const PlannedLayout& layout, const PointSource& source);

/// `layout` with the record's results, when the record at `path` is one for `source`; nullopt
/// with the reason in `why` otherwise (no file, another version or input, a damaged record).
std::optional<PlannedLayout> read_layout_record(const std::filesystem::path& path,
                                                const PointSource& source,
                                                const PlannedLayout& layout, std::string& why);

}  // namespace upsim::cli

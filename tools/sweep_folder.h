// A sweep's folder (tools/sweep_command.h has the rules): which study it holds, which of its
// points' rows still stand and why the others run again, and what --force replaces. It reads and
// replaces regular files only: a pipe, device, socket, folder or symbolic link at a name it reads
// is refused, naming it, without being opened.
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/sweep_records.h"

namespace upsim::cli {

inline constexpr const char* kResultsFile = "results.csv";
inline constexpr const char* kResultsHdf5File = "results.h5";
inline constexpr const char* kManifestFile = "study.points";
inline constexpr const char* kPointsDir = "points";
/// The plots `--plot` draws beside results.csv (tools/plot_command.h).
inline constexpr std::array<const char*, 4> kPlotFiles{
    "results_iteration.svg", "results_iteration.gp", "results_breakdown.svg",
    "results_breakdown.gp"};
/// What --point-outputs writes to points/<n>/.
inline constexpr std::array<const char*, 6> kPointOutputFiles{
    "summary.txt", "summary.json", "ranks.csv", "links.csv", "ops.csv", "scenario.yaml"};

/// "points/<n>.row", relative to the folder.
std::string row_file_name(size_t point);

/// Makes `dir` the folder of the study `manifest` describes (created when missing) and returns
/// the manifest of an earlier run of the same study to resume, if any. Throws
/// std::runtime_error for another study's folder, a study.points that is not a manifest or a
/// non-empty folder without one (each unless `force`, which then replaces the sweep's files
/// there and nothing else), and for a non-regular study.points (even with `force`).
std::optional<Manifest> open_sweep_folder(const std::filesystem::path& dir,
                                          const Manifest& manifest, bool force);

/// Why a point with a row runs again: for it alone, and for several that share the reason.
struct Rerun {
  std::string one;
  std::string many;
};

/// The points of a resumed folder: each one's recorded row when it stands, and why the others
/// with a row run again.
struct Resume {
  std::vector<std::optional<std::string>> rows;
  std::vector<std::pair<Rerun, size_t>> reruns;  ///< in point order
};

/// Reads each point's row record in `dir` and keeps those written for the point as it is now:
/// its identity (manifest.points[i]), the upsim version and its scenario's content
/// (sources[i]), and with `point_outputs` (points/, for --point-outputs) its own outputs. Changed
/// files are named relative to `base_dir`. With `rerun_all` no row is kept. Throws
/// std::runtime_error for a non-regular file at a row's name.
Resume read_rows(const std::filesystem::path& dir, const Manifest& manifest,
                 const std::vector<PointSource>& sources, const std::filesystem::path& base_dir,
                 const std::filesystem::path& point_outputs, bool rerun_all);

/// One line per reason: "point 3: <why>; running it again", "points 0-7: <why>; running them
/// again", in the order of their first point.
void report_reruns(const Resume& resume, std::ostream& err);

}  // namespace upsim::cli

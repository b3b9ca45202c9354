#include "tools/sweep_folder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "sim/input_file.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

/// The largest row record read back (a row and its point's file list take kilobytes).
constexpr size_t kMaxRowRecordBytes = size_t{1} << 20;
/// The largest manifest read back (2^20 points of a few hundred bytes each).
constexpr size_t kMaxManifestBytes = size_t{1} << 30;

/// The refusal of a file that is not a regular file at a name the sweep reads or replaces.
[[noreturn]] void refuse_non_regular(const fs::path& p, std::string_view what) {
  throw std::runtime_error(fmt::format(
      "{} is {}; a sweep reads and replaces regular files only, so it does not read this one: "
      "remove it, or choose another --out",
      p.string(), what));
}

/// A record file read back: absent, or its text (or why it could not be read).
struct RecordFile {
  bool present = false;
  std::string text;
  std::string problem;  ///< empty when `text` is the whole file
};

/// Reads the record at `p` (at most `max_bytes`). Never opens anything but a regular file (a pipe
/// would block, a device never end): anything else there is refused, naming it.
RecordFile read_record(const fs::path& p, size_t max_bytes) {
  RecordFile r;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (!fs::exists(st)) return r;
  r.present = true;
  if (!fs::is_regular_file(st)) refuse_non_regular(p, file_type_name(st.type()));
  // O_NOFOLLOW and O_NONBLOCK: what was checked above cannot be swapped for a link or a pipe.
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    r.problem = std::strerror(errno);
    return r;
  }
  struct stat fst {};
  if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
    ::close(fd);
    refuse_non_regular(p, "not a regular file");
  }
  std::vector<char> buffer(64 * 1024);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) r.problem = std::strerror(errno);
    if (n <= 0) break;
    r.text.append(buffer.data(), static_cast<size_t>(n));
    if (r.text.size() > max_bytes) {
      r.problem = fmt::format("larger than the {} bytes of any record", max_bytes);
      break;
    }
  }
  ::close(fd);
  return r;
}

/// Removes `p` when it is a regular file (never what a link points to, never a folder).
void remove_regular(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(p, ec))) fs::remove(p, ec);
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

/// --force: removes the files a sweep writes in `dir` (and their temporary twins), nothing else:
/// results.csv, results.h5, study.points, the plots, points/<n>.row and points/<n>/'s outputs;
/// points/<n>/ and points/ themselves once empty.
void clear_sweep_files(const fs::path& dir) {
  std::vector<std::string> names{kResultsFile, kResultsHdf5File, kManifestFile};
  names.insert(names.end(), kPlotFiles.begin(), kPlotFiles.end());
  for (const std::string& n : names) {
    remove_regular(dir / n);
    remove_regular(dir / (n + ".tmp"));
  }
  const fs::path points = dir / kPointsDir;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(points, ec))) return;
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(points, ec))
    entries.push_back(e.path());
  for (const fs::path& e : entries) {
    const std::string name = e.filename().string();
    const size_t dot = name.find('.');
    if (dot != std::string::npos && all_digits(name.substr(0, dot)) &&
        (name.substr(dot) == ".row" || name.substr(dot) == ".row.tmp")) {
      remove_regular(e);
    } else if (all_digits(name) && fs::is_directory(fs::symlink_status(e, ec))) {
      for (const char* f : kPointOutputFiles) {
        remove_regular(e / f);
        remove_regular(e / (std::string(f) + ".tmp"));
      }
      fs::remove(e, ec);  // only when empty
    }
  }
  fs::remove(points, ec);  // only when empty
}

/// The files whose content differs between `was` and `now`, or that only one of them has, as
/// paths relative to the base scenario's folder.
std::string changed_files(const PointSource& was, const PointSource& now, const fs::path& dir) {
  std::map<std::string, std::string> before;
  for (const FileHash& f : was.files)
    before.emplace(f.path, f.sha256);
  std::set<std::string> changed;
  for (const FileHash& f : now.files) {
    const auto it = before.find(f.path);
    if (it == before.end() || it->second != f.sha256) changed.insert(f.path);
    if (it != before.end()) before.erase(it);
  }
  for (const auto& [path, sha] : before)
    changed.insert(path);
  std::string out;
  for (const std::string& p : changed) {
    if (!out.empty()) out += ", ";
    out += fs::path(p).lexically_proximate(dir).string();
  }
  return out.empty() ? "its overrides" : out;
}

/// Whether points/<n>/ holds every output --point-outputs writes.
bool has_point_outputs(const fs::path& own) {
  return std::all_of(kPointOutputFiles.begin(), kPointOutputFiles.end(), [&](const char* f) {
    std::error_code ec;
    return fs::is_regular_file(own / f, ec);
  });
}

/// "0-3, 7, 9-12".
std::string index_ranges(const std::vector<size_t>& sorted) {
  std::string out;
  for (size_t a = 0; a < sorted.size();) {
    size_t b = a;
    while (b + 1 < sorted.size() && sorted[b + 1] == sorted[b] + 1)
      ++b;
    if (!out.empty()) out += ", ";
    out += b == a ? std::to_string(sorted[a]) : fmt::format("{}-{}", sorted[a], sorted[b]);
    a = b + 1;
  }
  return out;
}

}  // namespace

std::string row_file_name(size_t point) {
  return fmt::format("{}/{}.row", kPointsDir, point);
}

std::optional<Manifest> open_sweep_folder(const fs::path& dir, const Manifest& manifest,
                                          bool force) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw std::runtime_error(fmt::format("{} exists and is not a folder", dir.string()));
  }
  std::optional<Manifest> previous;
  std::string refusal;
  if (fs::exists(st)) {
    const RecordFile file = read_record(dir / kManifestFile, kMaxManifestBytes);
    if (file.present) {
      std::string why = file.problem;
      std::optional<Manifest> parsed;
      if (why.empty()) parsed = parse_manifest(file.text, why);
      if (!parsed) {
        refusal = fmt::format(
            "{} holds a {} that is not a sweep's ({}); choose another --out, or pass --force to "
            "replace the sweep's files there",
            dir.string(), kManifestFile, why);
      } else if (!same_study(*parsed, manifest)) {
        refusal = fmt::format(
            "{} holds the results of another study (or of this one with other points); choose "
            "another --out, or pass --force to replace them",
            dir.string());
      } else {
        previous = std::move(parsed);
      }
    } else if (!fs::is_empty(dir, ec)) {
      refusal = fmt::format(
          "{} is not empty and holds no sweep (no {}); upsim does not write into it unasked: "
          "choose another --out, or pass --force (which replaces only the files a sweep writes)",
          dir.string(), kManifestFile);
    }
  }
  if (!refusal.empty() && !force) throw std::runtime_error(refusal);
  if (force) {
    clear_sweep_files(dir);
    previous.reset();
  }
  fs::create_directories(dir, ec);
  if (ec) {
    throw std::runtime_error(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  }
  return previous;
}

Resume read_rows(const fs::path& dir, const Manifest& manifest,
                 const std::vector<PointSource>& sources, const fs::path& base_dir,
                 const fs::path& point_outputs, bool rerun_all) {
  Resume r;
  r.rows.resize(manifest.points.size());
  for (size_t i = 0; i < manifest.points.size(); ++i) {
    const RecordFile file = read_record(dir / row_file_name(i), kMaxRowRecordBytes);
    if (!file.present || rerun_all) continue;
    std::string why = file.problem;
    std::optional<RowRecord> record;
    if (why.empty()) record = parse_row_record(file.text, why);
    if (record && (record->point != i || record->identity != manifest.points[i].identity)) {
      why = "it is the row of another point";
      record.reset();
    }
    if (!record) {
      const std::string damaged = fmt::format("{} is damaged ({})", row_file_name(i), why);
      r.reruns.push_back({{damaged, damaged}, i});
    } else if (record->source.version != sources[i].version) {
      const std::string v = record->source.version;
      r.reruns.push_back(
          {{fmt::format("its row was written by upsim {} (this is {})", v, sources[i].version),
            fmt::format("their rows were written by upsim {} (this is {})", v, sources[i].version)},
           i});
    } else if (record->source.scenario_sha256 != sources[i].scenario_sha256) {
      const std::string files = changed_files(record->source, sources[i], base_dir);
      r.reruns.push_back(
          {{fmt::format("its scenario changed since its row was written ({})", files),
            fmt::format("their scenario changed since their rows were written ({})", files)},
           i});
    } else if (!point_outputs.empty() && !has_point_outputs(point_outputs / std::to_string(i))) {
      r.reruns.push_back(
          {{fmt::format("--point-outputs: its own outputs ({}/{}/) are missing", kPointsDir, i),
            fmt::format("--point-outputs: their own outputs ({}/<n>/) are missing", kPointsDir)},
           i});
    } else {
      r.rows[i] = std::move(record->row);
    }
  }
  return r;
}

void report_reruns(const Resume& r, std::ostream& err) {
  std::vector<std::pair<const Rerun*, std::vector<size_t>>> groups;
  std::map<std::string, size_t> group_of;
  for (const auto& [why, point] : r.reruns) {
    const auto [it, added] = group_of.try_emplace(why.many, groups.size());
    if (added) groups.push_back({&why, {}});
    groups[it->second].second.push_back(point);
  }
  for (const auto& [why, members] : groups) {
    if (members.size() == 1) {
      err << fmt::format("point {}: {}; running it again\n", members.front(), why->one);
    } else {
      err << fmt::format("points {}: {}; running them again\n", index_ranges(members), why->many);
    }
  }
}

}  // namespace upsim::cli

#include "tools/kineto_trace_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>

#include "sim/input_file.h"
#include "tools/output_folder.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

/// rank_<digits>.json or rank_<digits>.json.gz.
bool is_rank_trace_name(const std::string& name) {
  constexpr std::string_view kPrefix = "rank_";
  if (!name.starts_with(kPrefix)) return false;
  size_t i = kPrefix.size();
  const size_t digits = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9')
    ++i;
  if (i == digits) return false;
  const std::string_view rest = std::string_view(name).substr(i);
  return rest == ".json" || rest == ".json.gz";
}

}  // namespace

std::vector<KinetoRankFile> kineto_rank_files(const TaskGraph& graph,
                                              const std::optional<std::vector<RankId>>& ranks,
                                              const fs::path& folder, bool gzip) {
  std::vector<RankId> chosen;
  if (ranks) {
    chosen = *ranks;
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  } else {
    for (RankId r = 0; r < graph.rank_count(); ++r)
      chosen.push_back(r);
  }
  std::vector<KinetoRankFile> files;
  std::map<uint32_t, RankId> rank_of_gpu;
  for (const RankId r : chosen) {
    const uint32_t gpu = graph.device_of(r);
    if (const auto [it, added] = rank_of_gpu.emplace(gpu, r); !added) {
      throw std::invalid_argument(fmt::format(
          "Kineto traces: graph ranks {} and {} both run on GPU {}; a trace folder holds one "
          "file per GPU",
          it->second, r, gpu));
    }
    files.push_back(KinetoRankFile{r, folder / kineto_trace_file_name(gpu, gzip)});
  }
  return files;
}

void check_kineto_folder(const fs::path& folder) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(folder, ec);
  if (!fs::exists(st) || fs::is_directory(st)) return;
  throw std::runtime_error(
      fmt::format("{} is {}; a Kineto trace is a folder of files, one per rank: name a folder",
                  folder.string(), file_type_name(st.type())));
}

void check_kineto_files_free(const std::vector<KinetoRankFile>& files, bool force,
                             std::string_view choose) {
  for (const KinetoRankFile& f : files) {
    check_replaceable(f.path);
    std::error_code ec;
    if (!force && fs::exists(fs::symlink_status(f.path, ec))) {
      throw std::runtime_error(fmt::format(
          "{} already exists; upsim does not overwrite files unasked: {}, or pass --force to "
          "overwrite",
          f.path.string(), choose));
    }
  }
}

std::vector<fs::path> stale_kineto_files(const fs::path& folder,
                                         const std::vector<KinetoRankFile>& keep) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(folder, ec))) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const fs::path& p = e.path();
    if (!is_rank_trace_name(p.filename().string())) continue;
    if (!fs::is_regular_file(fs::symlink_status(p, ec))) continue;
    const bool kept =
        std::any_of(keep.begin(), keep.end(), [&](const KinetoRankFile& f) { return f.path == p; });
    if (!kept) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace upsim::cli

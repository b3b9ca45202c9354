#include "tools/output_folder.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>
#include <system_error>

namespace upsim::cli {

namespace fs = std::filesystem;

fs::path prepare_output_folder(const fs::path& scenario_file, const fs::path& requested_out,
                               const std::vector<std::string>& planned_files, bool force) {
  fs::path out;
  std::error_code ec;
  if (!requested_out.empty()) {
    out = requested_out;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
      throw std::runtime_error(fmt::format("--out {}: exists and is not a folder", out.string()));
    }
    if (!force) {
      for (const std::string& name : planned_files) {
        if (fs::exists(out / name, ec)) {
          throw std::runtime_error(fmt::format(
              "{} already exists; upsim does not overwrite files unasked: choose another --out "
              "folder, or pass --force to overwrite",
              (out / name).string()));
        }
      }
    }
  } else {
    const fs::path base = fs::path("upsim-out") / scenario_file.stem();
    out = base;
    for (int i = 2; fs::exists(out, ec); ++i) {
      out = fs::path(base.string() + "-" + std::to_string(i));
    }
  }
  fs::create_directories(out, ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("cannot create output folder {}: {}", out.string(), ec.message()));
  }
  return out;
}

void write_file_atomically(const fs::path& path, std::string_view content) {
  const fs::path tmp = fs::path(path.string() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!f) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("cannot write {}", path.string()));
  }
}

}  // namespace upsim::cli

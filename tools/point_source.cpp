#include "tools/point_source.h"

#include <optional>
#include <system_error>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "tools/sha256.h"
#include "tools/version.h"

namespace upsim::cli {

namespace fs = std::filesystem;

FileHash PointSources::hash(const fs::path& path) {
  const auto it = hashes_.find(path.string());
  if (it != hashes_.end()) return {it->first, it->second};
  std::string why;
  const std::optional<std::string> sha = sha256_of_file(path, why);
  const std::string hash = sha ? *sha : sha256_hex("unreadable: " + why);
  hashes_.emplace(path.string(), hash);
  return {path.string(), hash};
}

PointSource PointSources::of(const fs::path& base, const std::vector<std::string>& overrides) {
  std::error_code ec;
  const fs::path base_abs = fs::absolute(base, ec).lexically_normal();
  std::vector<std::string> set_values;
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq != std::string::npos) set_values.push_back(o.substr(eq + 1));
  }
  std::vector<fs::path> files;
  try {
    ConfigDocument doc = ConfigDocument::load_file(base);
    for (const std::string& o : overrides) {
      try {
        doc.apply_override(o);
      } catch (const ConfigError&) {
        // A malformed override: the point fails when it runs; its text is in the hash.
      }
    }
    files = referenced_files(doc, set_values, &names_);
  } catch (const ConfigError&) {
    files = {base_abs};  // not YAML: its bytes are all there is
  }
  PointSource s;
  s.version = kVersion;
  for (const fs::path& f : files)
    s.files.push_back(hash(f));
  s.scenario_sha256 = scenario_sha256(base_abs.string(), overrides, s.files);
  return s;
}

}  // namespace upsim::cli

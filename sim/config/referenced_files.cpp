#include "sim/config/referenced_files.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <set>
#include <string_view>
#include <system_error>

#include "sim/config/config_error.h"

namespace upsim {

namespace fs = std::filesystem;

namespace {

/// The longest value taken as a possible path (PATH_MAX on Linux).
constexpr size_t kMaxPathText = 4096;

bool is_yaml(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".yaml" || ext == ".yml";
}

/// Whether `text` could be a path at all: not empty, one line, not made only of `.` and `/`.
bool could_be_path(std::string_view text) {
  if (text.empty() || text.size() > kMaxPathText) return false;
  if (text.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos) return false;
  return text.find_first_not_of("./") != std::string_view::npos;
}

fs::path absolute_normal(const fs::path& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}

/// What the values of one document name directly: the files (its own and inlined ones
/// included), and among them the YAML files whose values name more.
class DirectNames {
 public:
  void document(ConfigDocument& doc) {
    add_source(doc.file());
    node(doc.root());
  }
  /// A value given as --set: resolved as written.
  void set_value(const std::string& text) { value(text, fs::path(std::string(kOverrideSource))); }
  ReferencedFilesCache::Names take() { return std::move(names_); }

 private:
  void node(const ConfigNode& n) {
    add_source(n.file());
    if (n.is_scalar()) {
      value(n.as_string(), n.file());
    } else if (n.is_sequence()) {
      for (const ConfigNode& item : n.items())
        node(item);
    } else if (n.is_map()) {
      for (const auto& entry : n.peek_map_entries())
        node(entry.second);
    }
  }

  /// A file a value was read from (once per file: a document has few).
  void add_source(const fs::path& file) {
    if (file == kOverrideSource || !sources_.insert(file.string()).second) return;
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) names_.files.push_back(absolute_normal(file));
  }

  void value(const std::string& text, const fs::path& holder) {
    if (!could_be_path(text)) return;
    const fs::path written(text);
    const fs::path resolved = written.is_absolute() || holder == kOverrideSource
                                  ? written
                                  : holder.parent_path() / written;
    std::error_code ec;
    const fs::file_status st = fs::status(resolved, ec);
    if (ec) return;
    if (fs::is_regular_file(st)) {
      const fs::path file = absolute_normal(resolved);
      names_.files.push_back(file);
      if (is_yaml(file)) names_.yaml.push_back(file);
    } else if (fs::is_directory(st)) {
      const fs::path dir = absolute_normal(resolved);
      if (!listed_dirs_.insert(dir.string()).second) return;
      for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        std::error_code entry_ec;
        if (e.is_regular_file(entry_ec)) names_.files.push_back(absolute_normal(e.path()));
      }
    }
  }

  ReferencedFilesCache::Names names_;
  std::set<std::string> sources_;
  std::set<std::string> listed_dirs_;
};

/// What the YAML file at `file` names directly; a file that is not valid YAML names nothing.
ReferencedFilesCache::Names names_of_yaml(const fs::path& file) {
  DirectNames names;
  try {
    ConfigDocument doc = ConfigDocument::load_file(file);
    names.document(doc);
  } catch (const ConfigError&) {
    // Not YAML (or not readable as such): the file is listed, nothing it names can be known.
  }
  return names.take();
}

}  // namespace

const ReferencedFilesCache::Names& ReferencedFilesCache::of(const fs::path& yaml_file) {
  const auto it = names_.find(yaml_file.string());
  if (it != names_.end()) return it->second;
  return names_.emplace(yaml_file.string(), names_of_yaml(yaml_file)).first->second;
}

std::vector<fs::path> referenced_files(ConfigDocument& doc, std::span<const std::string> set_values,
                                       ReferencedFilesCache* cache) {
  ReferencedFilesCache local;
  ReferencedFilesCache& names = cache != nullptr ? *cache : local;
  DirectNames top;
  top.document(doc);
  for (const std::string& v : set_values)
    top.set_value(v);
  const ReferencedFilesCache::Names direct = top.take();
  std::set<fs::path> files(direct.files.begin(), direct.files.end());
  // Every YAML file named, once each whatever its name (a cycle ends at the second visit).
  std::set<std::string> followed;
  std::deque<fs::path> queue(direct.yaml.begin(), direct.yaml.end());
  while (!queue.empty()) {
    const fs::path file = queue.front();
    queue.pop_front();
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(file, ec);
    if (ec) canonical = file;
    if (!followed.insert(canonical.string()).second) continue;
    const ReferencedFilesCache::Names& own = names.of(file);
    files.insert(own.files.begin(), own.files.end());
    queue.insert(queue.end(), own.yaml.begin(), own.yaml.end());
  }
  return {files.begin(), files.end()};
}

}  // namespace upsim

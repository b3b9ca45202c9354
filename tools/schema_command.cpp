#include "tools/schema_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <map>
#include <ostream>

#include "calibration/hardware_profile.h"
#include "calibration/host_overhead_cpu_cost.h"
#include "calibration/kernel_calibration.h"
#include "calibration/model_registry.h"
#include "sim/config/key_meaning.h"
#include "tools/command_line.h"
#include "tools/scenario.h"
#include "tools/shipped_files.h"
#include "topology/fabric_loader.h"
#include "topology/nccl_tuning.h"
#include "workloads/workload_registry.h"

namespace upsim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

void add_distinct(std::vector<std::string>& values, const std::string& v) {
  if (!v.empty() && std::find(values.begin(), values.end(), v) == values.end()) {
    values.push_back(v);
  }
}

std::string joined(const std::vector<std::string>& values, std::string_view empty) {
  if (values.empty()) return std::string(empty);
  std::string out;
  for (const std::string& v : values)
    out += (out.empty() ? "" : " | ") + v;
  return out;
}

/// The choices of a "one of a, b, c" type.
std::vector<std::string> choices_of(std::string_view type) {
  std::vector<std::string> out;
  if (!type.starts_with("one of ")) return out;
  type.remove_prefix(7);
  while (!type.empty()) {
    const size_t comma = type.find(", ");
    out.emplace_back(type.substr(0, comma));
    if (comma == std::string_view::npos) break;
    type.remove_prefix(comma + 2);
  }
  return out;
}

/// Adds `type` unless a choice list already there holds all its choices (readers of one key
/// may check it against a part of its choices); a list that holds an earlier one replaces it.
void add_type(std::vector<std::string>& types, const std::string& type) {
  const std::vector<std::string> mine = choices_of(type);
  const auto within = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return !a.empty() && std::all_of(a.begin(), a.end(), [&](const std::string& c) {
      return std::find(b.begin(), b.end(), c) != b.end();
    });
  };
  for (std::string& t : types) {
    const std::vector<std::string> theirs = choices_of(t);
    if (within(mine, theirs)) return;
    if (within(theirs, mine)) {
      t = type;
      return;
    }
  }
  add_distinct(types, type);
}

/// Values that differ by scenario (a default derived from other keys, a range from the GPU):
/// one is itself, a few are joined, more are one example.
std::string by_scenario(const std::vector<std::string>& values, std::string_view none) {
  if (values.empty()) return std::string(none);
  if (values.size() == 1) return values.front();
  if (values.size() <= 3) return joined(values, none) + " (by scenario)";
  return fmt::format("by scenario, e.g. {}", values.front());
}

/// The shipped scenarios the default schema is read from: the starters first (their order is
/// the page's), then configs/*.yaml, then configs/schema/*.yaml (scenarios that state the
/// optional keys the others leave at their defaults), each folder in name order.
std::vector<fs::path> shipped_scenarios() {
  std::vector<fs::path> out;
  for (const char* folder : {"configs/starters", "configs", "configs/schema"}) {
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(shipped_path(folder))) {
      if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

/// `path` with each sequence index as `[]` ("a.tables.0.rows" -> "a.tables[].rows"): one key of
/// the schema for every item.
std::string schema_path(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string_view segment = path.substr(start, dot - start);
    const bool index = !segment.empty() && std::all_of(segment.begin(), segment.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
    if (index) {
      out += "[]";
    } else {
      if (!out.empty()) out += '.';
      out.append(segment);
    }
    start = dot + 1;
  }
  return out;
}

/// A reader's meaning table and the path its keys are relative to ("" or ending in '.').
struct MeaningTable {
  std::string_view prefix;
  std::span<const KeyMeaning> table;
};

/// The tables key_meaning() consults, the referenced files' first (their prefixes are longer);
/// `family_table` is the workload family's.
std::vector<MeaningTable> meaning_tables(std::span<const KeyMeaning> family_table) {
  return {{"platform.gpu.", hardware_profile_key_meanings()},
          {"platform.kernels.calibration.", kernel_calibration_key_meanings()},
          {"platform.host.overheads.", host_overhead_key_meanings()},
          {"platform.topology.", fabric_key_meanings()},
          {"platform.interconnect.tuning.", collective_tuning_key_meanings()},
          {"platform.", platform_model_key_meanings()},
          {"workload.", family_table},
          {"", scenario_key_meanings()}};
}

}  // namespace

std::optional<std::string> key_meaning(const std::string& path,
                                       std::span<const KeyMeaning> family_meanings) {
  for (const MeaningTable& t : meaning_tables(family_meanings)) {
    if (!path.starts_with(t.prefix)) continue;
    const KeyMeaning* m = find_key_meaning(t.table, std::string_view(path).substr(t.prefix.size()));
    if (m != nullptr) return std::string(m->meaning);
  }
  return std::nullopt;
}

std::string meaning_text(const SchemaKey& key) {
  const bool one = std::all_of(key.meanings.begin(), key.meanings.end(), [&](const auto& m) {
    return m.second == key.meanings.front().second;
  });
  if (key.meanings.empty()) return "";
  if (one) return key.meanings.front().second;
  std::string out;
  for (const auto& [family, meaning] : key.meanings)
    out += fmt::format("{}{}: {}", out.empty() ? "" : " | ", family, meaning);
  return out;
}

std::vector<std::string> key_meaning_patterns() {
  std::vector<std::string> out;
  const WorkloadRegistry workloads = default_workload_registry();
  for (const std::string_view family : workloads.names()) {
    for (const MeaningTable& t : meaning_tables(workloads.key_meanings(family))) {
      for (const KeyMeaning& m : t.table) {
        const std::string pattern = fmt::format("{}{}", t.prefix, m.key);
        if (std::find(out.begin(), out.end(), pattern) == out.end()) out.push_back(pattern);
      }
    }
  }
  return out;
}

std::vector<const SchemaKey*> keys_below(const std::vector<SchemaKey>& schema,
                                         const std::string& prefix) {
  std::vector<const SchemaKey*> out;
  for (const SchemaKey& k : schema) {
    if (prefix.empty() || k.path == prefix || k.path.starts_with(prefix + ".") ||
        k.path.starts_with(prefix + "[]")) {
      out.push_back(&k);
    }
  }
  return out;
}

void merge_schema(std::vector<SchemaKey>& schema, const std::vector<ReadKey>& keys,
                  const std::string& family, std::span<const KeyMeaning> family_meanings) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < schema.size(); ++i)
    index.emplace(schema[i].path, i);
  for (const ReadKey& k : keys) {
    const std::string path = schema_path(k.path);
    const auto [it, added] = index.try_emplace(path, schema.size());
    if (added) schema.push_back(SchemaKey{path, {}, {}, {}, {}, k.in_referenced_file, {}});
    SchemaKey& s = schema[it->second];
    add_type(s.types, k.type);
    add_distinct(s.ranges, k.range);
    if (k.default_value)
      add_distinct(s.defaults, k.default_value->empty() ? "\"\"" : *k.default_value);
    add_distinct(s.families, family);
    std::sort(s.families.begin(), s.families.end());
    if (std::none_of(s.meanings.begin(), s.meanings.end(),
                     [&](const auto& m) { return m.first == family; })) {
      if (std::optional<std::string> meaning = key_meaning(path, family_meanings))
        s.meanings.emplace_back(family, std::move(*meaning));
    }
  }
}

std::string format_schema(const std::vector<SchemaKey>& schema, const std::string& prefix,
                          bool markdown) {
  const std::vector<const SchemaKey*> shown = keys_below(schema, prefix);
  std::string out;
  if (markdown) {
    out += "| key | meaning | read as | range | default | families |\n|---|---|---|---|---|---|\n";
    for (const SchemaKey* k : shown) {
      const auto cell = [](std::string text) {
        std::string escaped;
        for (const char c : text)
          escaped += c == '|' ? std::string("\\|") : std::string(1, c);
        return escaped;
      };
      out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", k->path, cell(meaning_text(*k)),
                         cell(joined(k->types, "")), cell(by_scenario(k->ranges, "")),
                         cell(by_scenario(k->defaults, "none")), cell(joined(k->families, "")));
    }
    return out;
  }
  // Key paths up to kWidest characters align their meanings; a longer one (a host op's name)
  // is followed by two spaces.
  constexpr size_t kWidest = 44;
  size_t width = 3;
  for (const SchemaKey* k : shown)
    width = std::max(width, std::min(k->path.size(), kWidest));
  for (const SchemaKey* k : shown) {
    const std::string meaning = meaning_text(*k);
    std::string line = fmt::format("{:<{}}  {}\n{:<{}}  {}", k->path, width,
                                   meaning.empty() ? "(no meaning published)" : meaning, "", width,
                                   joined(k->types, ""));
    if (!k->ranges.empty()) line += fmt::format(", in {}", by_scenario(k->ranges, ""));
    line += fmt::format("; default: {}", by_scenario(k->defaults, "none"));
    line += fmt::format("  [{}]", joined(k->families, ""));
    out += line + "\n";
  }
  return out;
}

std::vector<SchemaKey> read_schema(std::vector<std::filesystem::path> scenarios, bool with_files) {
  if (scenarios.empty()) scenarios = shipped_scenarios();
  std::vector<SchemaKey> schema;
  const WorkloadRegistry workloads = default_workload_registry();
  for (const fs::path& file : scenarios) {
    ConfigDocument doc = ConfigDocument::load_file(file);
    // Every key is read before the workload builds its graph: no graph is built.
    ScenarioLimits limits;
    limits.keys_only = true;
    build_scenario(doc, workloads, kFirstChosenIterations, limits);
    std::vector<ReadKey> keys = doc.read_keys();
    if (!with_files) {
      std::erase_if(keys, [](const ReadKey& k) { return k.in_referenced_file; });
    }
    const std::string family = doc.root().child("workload").get_string("model");
    merge_schema(schema, keys, family, workloads.key_meanings(family));
  }
  return schema;
}

int schema_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string prefix;
  std::vector<std::string> scenarios;
  bool markdown = false;
  bool with_files = false;
  po::options_description desc(
      "usage: upsim schema [KEY] [options]\n\n"
      "Prints every scenario key upsim's readers read, with one line of what it means (as its\n"
      "reader publishes it), the type each reads it as, the range it checks and the default it\n"
      "takes (none: no default; a scenario that needs it states it; \"by scenario\": derived\n"
      "from other keys), and the workload families whose scenarios read it: as the readers\n"
      "record it while they build the shipped scenarios and starters (configs/*.yaml,\n"
      "configs/starters/*.yaml, configs/schema/*.yaml), or the --scenario files. KEY keeps the\n"
      "keys at or below a path (e.g. workload.parallelism). The header comments of\n"
      "tools/scenario.h and the workload families' config headers give each key's full\n"
      "contract.\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("scenario", po::value<std::vector<std::string>>(&scenarios)->composing(),
       "read the schema of this scenario instead of the shipped ones (repeatable)")  //
      ("with-files", po::bool_switch(&with_files),
       "also the keys of the files a scenario references (hardware profile, calibration, "
       "fabric, host overheads)")  //
      ("markdown", po::bool_switch(&markdown), "a Markdown table (SCHEMA.md is this output)");
  if (!parse_with_positional(args, desc, out, "key", prefix)) return 0;
  const std::vector<SchemaKey> schema =
      read_schema(std::vector<fs::path>(scenarios.begin(), scenarios.end()), with_files);
  const std::string text = format_schema(schema, prefix, markdown);
  if (text.empty() && !prefix.empty()) {
    throw po::error(fmt::format("upsim schema: no key at or below `{}`", prefix));
  }
  if (markdown) {
    out << "# upsim scenario keys\n\n"
           "Generated by `upsim schema --markdown` from what upsim's readers record while they "
           "build the shipped scenarios and starters; a test regenerates it. The meanings, types, "
           "ranges and defaults are the readers' own; each key's full contract is in the header "
           "comments of `tools/scenario.h` and of each workload family's config header.\n\n";
  }
  out << text;
  return 0;
}

}  // namespace upsim::cli

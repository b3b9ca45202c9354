#include "sim/config/config_node.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "sim/config/quantity_parse.h"
#include "sim/formats/csv.h"
#include "sim/formats/parse_error.h"
#include "sim/formats/text.h"

namespace upsim {
namespace config_detail {

/// One YAML file of a document (the main file or a loaded reference).
struct SourceFile {
  std::filesystem::path path;          // as displayed and opened
  std::filesystem::path canonical;     // for reference-cycle detection
  const SourceFile* parent = nullptr;  // the file whose reference loaded this one
};

enum class Kind { kNull, kScalar, kSequence, kMap };

struct Node;

struct Entry {
  std::string key;
  const SourceFile* key_source = nullptr;  // nullptr: the key was added by --set
  int key_line = 0;
  std::unique_ptr<Node> value;
  bool defaulted = false;  // written by a get_*_or default: no input states it
};

/// One step of a --set path: a map key, or a sequence index (bracketed = written as `[i]`).
struct PathSegment {
  std::string text;
  bool bracketed = false;
};

/// A --set whose path runs through a scalar (a file reference not loaded yet).
struct PendingOverride {
  std::string path_text;
  std::vector<PathSegment> rest;
  std::unique_ptr<Node> value;
};

/// A key of a map looked up by a reader for a use (index into DocumentState::uses; 0 = read
/// unconditionally).
struct KeyUse {
  std::string key;
  uint32_t use = 0;
};

struct Node {
  Kind kind = Kind::kNull;
  std::string scalar;
  bool quoted = false;  // written as a quoted string (or !!str): never a number or boolean
  bool flow = false;    // written in flow style ([1, 2] / {a: 1}); kept when emitting
  std::vector<Entry> entries;
  std::vector<std::unique_ptr<Node>> items;
  const SourceFile* source = nullptr;  // nullptr: the value came from --set
  int line = 0;
  std::vector<std::string> asked;                  // keys a reader asked for, in the order asked
  std::optional<std::filesystem::path> reference;  // set once a file was inlined here
  std::optional<std::filesystem::path> path;       // set once read as a path (get_path)
  std::vector<PendingOverride> pending;
  std::vector<KeyUse> key_uses;   // (key, use) pairs readers looked up, each once
  std::unique_ptr<Node> written;  // the file's value a --set replaced (ConfigNode::as_written)
  // What readers read this scalar as (ConfigDocument::read_keys): the type they expected, the
  // range they checked and the default they would take.
  std::string read_type;
  std::string read_range;
  std::optional<std::string> read_default;
  /// The root of a file (the document or a loaded reference): a scalar here is a file that is
  /// not YAML structure, described in errors and never quoted.
  bool file_root = false;
};

struct DocumentState {
  std::vector<std::unique_ptr<SourceFile>> files;
  std::unique_ptr<Node> root;
  std::filesystem::path override_file{std::string(kOverrideSource)};
  std::vector<std::string> overrides;  // key paths of the applied --set assignments
  std::vector<std::string> uses{""};   // names passed to ConfigNode::read_for; 0 = none
};

struct NodeAccess {
  static ConfigNode make(DocumentState* doc, Node* node, std::string key_path, uint32_t use) {
    return ConfigNode(doc, node, std::move(key_path), use);
  }
  static uint32_t use(const ConfigNode& n) { return n.use_; }
  static Node& node(const ConfigNode& n) { return *n.node_; }
  static DocumentState& doc(const ConfigNode& n) { return *n.doc_; }
};

}  // namespace config_detail

namespace {

using config_detail::DocumentState;
using config_detail::Entry;
using config_detail::Kind;
using config_detail::Node;
using config_detail::NodeAccess;
using config_detail::PathSegment;
using config_detail::PendingOverride;
using config_detail::SourceFile;

std::string join_key(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

std::string index_key(std::string_view parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

std::string source_name(const SourceFile* source) {
  return source == nullptr ? std::string(kOverrideSource) : source->path.string();
}

ConfigError error_at(const SourceFile* source, int line, std::string key_path,
                     std::string message) {
  return ConfigError(source_name(source), source == nullptr ? 0 : line, std::move(key_path),
                     std::move(message));
}

ConfigError override_error(const std::string& path_text, std::string message) {
  return ConfigError(std::string(kOverrideSource), 0, path_text, std::move(message));
}

// ---- Names and suggestions -------------------------------------------------------------------

// Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidate nearest to `word` within max(2, |word| / 3) edits (first wins ties), if any.
template <typename Range>
std::optional<std::string> nearest(std::string_view word, const Range& candidates) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    const std::string_view c(candidate);
    const size_t distance = edit_distance(word, c);
    if (distance < best_distance && distance < std::max(word.size(), c.size())) {
      best = std::string(c);
      best_distance = distance;
    }
  }
  return best;
}

template <typename Range>
std::string join_names(const Range& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += ", ";
    out += std::string_view(name);
  }
  return out;
}

// ---- Scalars ---------------------------------------------------------------------------------

enum class IntParse { kOk, kNotInteger, kOutOfRange };

// YAML 1.2 core-schema integers: [-+]?[0-9]+, 0x[0-9a-fA-F]+, 0o[0-7]+.
IntParse parse_yaml_int(std::string_view s, int64_t& out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    if (negative) return IntParse::kNotInteger;
    base = s[1] == 'x' ? 16 : 8;
    s.remove_prefix(2);
  }
  if (s.empty() || s[0] == '+' || s[0] == '-') return IntParse::kNotInteger;
  uint64_t magnitude = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
  if (ptr != s.data() + s.size()) return IntParse::kNotInteger;
  if (ec == std::errc::result_out_of_range) return IntParse::kOutOfRange;
  if (ec != std::errc()) return IntParse::kNotInteger;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (magnitude > kMax + (negative ? 1 : 0)) return IntParse::kOutOfRange;
  if (negative) {
    out = magnitude == kMax + 1 ? std::numeric_limits<int64_t>::min()
                                : -static_cast<int64_t>(magnitude);
  } else {
    out = static_cast<int64_t>(magnitude);
  }
  return IntParse::kOk;
}

// YAML 1.2 core-schema floats (integers included), .inf, -.inf, .nan.
std::optional<double> parse_yaml_double(std::string_view s) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF") {
    return std::numeric_limits<double>::infinity();
  }
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  // from_chars also takes "inf" / "nan" / hex digits; YAML does not.
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  double v = 0.0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> parse_yaml_bool(std::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

bool is_yaml_null(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// Whether a plain scalar `s` would be read back as something other than a string.
bool needs_quotes(std::string_view s) {
  int64_t unused = 0;
  return is_yaml_null(s) || parse_yaml_bool(s) || parse_yaml_double(s) ||
         parse_yaml_int(s, unused) != IntParse::kNotInteger;
}

/// At most the first line and kMaxQuotedChars characters of a value, for error messages: an
/// error quotes what is wrong, never a whole file that was read as one scalar by mistake.
/// Control characters are written as \xNN, so that a value cannot drive the terminal.
constexpr size_t kMaxQuotedChars = 80;
std::string excerpt(std::string_view text) {
  const size_t line_end = text.find_first_of("\r\n");
  std::string_view head = text.substr(0, line_end);
  if (head.size() > kMaxQuotedChars) head = head.substr(0, kMaxQuotedChars);
  std::string out;
  for (const char c : head) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  if (head.size() == text.size()) return out;
  return fmt::format("{}... ({} characters in all)", out, text.size());
}

/// Whether a name of a file (a tag, a key) may be quoted: short printable ASCII. Any other is
/// described by its length (quoted_name) and left out of key paths: a file of another kind is
/// never quoted at length.
constexpr size_t kMaxQuotedNameChars = 40;
bool is_short_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxQuotedNameChars &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return c >= 0x20 && c < 0x7f && c != '`'; });
}

std::string quoted_name(std::string_view name) {
  if (is_short_name(name)) return fmt::format("`{}`", name);
  return fmt::format("(of {} characters)", name.size());
}

bool is_csv(const std::filesystem::path& path);

std::string describe(const Node& n) {
  switch (n.kind) {
    case Kind::kNull:
      return "nothing (null)";
    case Kind::kMap:
      return "a map";
    case Kind::kSequence:
      if (n.file_root && n.source != nullptr && is_csv(n.source->path)) {
        return fmt::format("a CSV table ({} row{} under a header)", n.items.size(),
                           n.items.size() == 1 ? "" : "s");
      }
      return "a sequence";
    case Kind::kScalar:
      break;
  }
  // A whole file that is one scalar is not of the kind a reader expects: never quoted.
  if (n.file_root && n.source != nullptr) return "plain text (a YAML scalar)";
  if (n.quoted) return fmt::format("the quoted string \"{}\"", excerpt(n.scalar));
  return fmt::format("\"{}\"", excerpt(n.scalar));
}

std::string format_yaml_double(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v < 0 ? "-.inf" : ".inf";
  return fmt::format("{}", v);
}

// ---- Building the tree -----------------------------------------------------------------------

int mark_line(const YAML::Mark& mark) {
  return mark.is_null() ? 0 : mark.line + 1;
}

/// Values one document may expand to. YAML aliases share nodes, so seven levels of
/// `[*a, *a, *a, *a, *a, *a, *a, *a, *a]` are a few lines that expand to millions of values (an
/// "alias bomb"); real scenarios hold a few thousand.
constexpr size_t kMaxDocumentValues = 200'000;

std::unique_ptr<Node> convert(const YAML::Node& y, const SourceFile* source, int key_line,
                              const std::string& key_path, size_t& values_left) {
  if (values_left == 0) {
    throw error_at(source, key_line, key_path,
                   fmt::format("the document expands to more than {} values (YAML aliases "
                               "repeating other aliases?); at most {} are read",
                               kMaxDocumentValues, kMaxDocumentValues));
  }
  --values_left;
  auto n = std::make_unique<Node>();
  n->source = source;
  if (source != nullptr) {
    // An empty value's mark points past it; report the line of its key.
    n->line = y.IsNull() || mark_line(y.Mark()) == 0 ? key_line : mark_line(y.Mark());
  }
  const std::string& tag = y.Tag();
  const bool standard_tag =
      tag.empty() || tag == "?" || tag == "!" || tag.starts_with("tag:yaml.org,2002:");
  if (!standard_tag) {
    throw error_at(
        source, n->line, key_path,
        fmt::format("unsupported YAML tag {} (tags are not interpreted)", quoted_name(tag)));
  }
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      n->kind = Kind::kNull;
      break;
    case YAML::NodeType::Scalar:
      n->kind = Kind::kScalar;
      n->scalar = y.Scalar();
      n->quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
      break;
    case YAML::NodeType::Sequence: {
      n->kind = Kind::kSequence;
      n->flow = y.Style() == YAML::EmitterStyle::Flow;
      size_t i = 0;
      for (const YAML::Node& item : y) {
        n->items.push_back(convert(item, source, n->line, index_key(key_path, i), values_left));
        ++i;
      }
      break;
    }
    case YAML::NodeType::Map:
      n->kind = Kind::kMap;
      n->flow = y.Style() == YAML::EmitterStyle::Flow;
      std::unordered_map<std::string, int> first_line;  // key -> line (duplicates are errors)
      for (const auto& kv : y) {
        const int line = mark_line(kv.first.Mark());
        if (!kv.first.IsScalar()) {
          throw error_at(source, line, key_path, "map keys must be plain strings");
        }
        const std::string& key = kv.first.Scalar();
        const std::string child_path = join_key(key_path, key);
        const auto [seen, inserted] = first_line.try_emplace(key, line);
        if (!inserted) {
          throw error_at(
              source, line, is_short_name(key) ? child_path : key_path,
              fmt::format("duplicate key {} (first at line {})", quoted_name(key), seen->second));
        }
        n->entries.push_back(
            Entry{key, source, line, convert(kv.second, source, line, child_path, values_left)});
      }
      break;
  }
  return n;
}

/// The line (1-based) where a second YAML document starts (a `---` line after content, or
/// content after a `...` line), or 0 when the text holds one document. Textual, because
/// YAML::LoadAll loops forever on some malformed input (yaml-cpp 0.7, jbeder/yaml-cpp#1319).
int second_document_line(std::string_view text) {
  bool content = false;
  bool ended = false;
  int line = 0;
  while (!text.empty()) {
    ++line;
    const size_t end = text.find('\n');
    std::string_view l = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const auto marker = [&](std::string_view m) {
      return l.starts_with(m) &&
             (l.size() == m.size() || l[m.size()] == ' ' || l[m.size()] == '\t');
    };
    if (marker("---")) {
      if (content || ended) return line;
      const std::string_view rest = trim_blanks(l.substr(3));
      content = !rest.empty() && rest.front() != '#';
      continue;
    }
    if (marker("...")) {
      ended = true;
      continue;
    }
    const std::string_view t = trim_blanks(l);
    if (t.empty() || t.front() == '#' || (!content && t.front() == '%')) continue;
    if (ended) return line;
    content = true;
  }
  return 0;
}

/// yaml-cpp's message without the text of the file that some of its messages append (the
/// `%YAML` directive's argument, an escape character, a code point).
std::string parser_message(const std::string& message) {
  for (const std::string_view prefix : {std::string_view(YAML::ErrorMsg::YAML_VERSION),
                                        std::string_view(YAML::ErrorMsg::INVALID_UNICODE),
                                        std::string_view(YAML::ErrorMsg::INVALID_ESCAPE)}) {
    if (message.starts_with(prefix))
      return std::string(trim_blanks(prefix.substr(0, prefix.find(':'))));
  }
  return excerpt(message);
}

std::unique_ptr<Node> parse_yaml(const std::string& text, const SourceFile* source,
                                 const std::string& key_path) {
  // A second document (after `---`) would otherwise be ignored without a word.
  if (const int second = second_document_line(text); second > 0) {
    throw ConfigError(source->path.string(), second, key_path,
                      "a second YAML document starts here (after `---` or `...`); a scenario or "
                      "profile is one document");
  }
  YAML::Node y;
  try {
    y = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source->path.string(), mark_line(e.mark), key_path,
                      fmt::format("malformed YAML: {}", parser_message(e.msg)));
  }
  size_t values_left = kMaxDocumentValues;
  std::unique_ptr<Node> root = convert(y, source, 1, key_path, values_left);
  root->file_root = true;
  return root;
}

/// A CSV reference as YAML with the same line numbers (ConfigNode::load_reference). The file is
/// read as sim/formats/csv.h reads it: RFC 4180 quoting, blanks around a field dropped, blank and
/// `#` lines skipped. Its first record is the header of column names; every later record
/// becomes `- {column: value, ...}` on the line it starts on, with its empty fields left out;
/// every other line is blank. A name or value, without its quotes, must be a plain scalar
/// (letters, digits, `_ . + -`), so that it reads as the number or name it is written as.
/// Errors name the line and the column's number (malformed quoting: the character of the line),
/// never the file's text: the file may be any CSV, given where a table of another kind was
/// expected.
std::string csv_as_yaml(std::string_view text, const SourceFile* source,
                        const std::string& key_path) {
  const auto fail = [&](int64_t line, std::string message) {
    throw ConfigError(source->path.string(), static_cast<int>(line), key_path, std::move(message));
  };
  const auto plain = [](std::string_view v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '+' ||
             c == '-';
    });
  };
  std::vector<CsvRecord> records;
  try {
    records = read_csv(text, source->path.string(),
                       {.trim_blanks = true, .skip_blank_lines = true, .comment = '#'});
  } catch (const ParseError& e) {
    fail(e.line(),
         fmt::format("malformed CSV at character {} of the line: {}", e.column(), e.message()));
  }
  std::string yaml;
  int64_t yaml_line = 1;  // the line of `yaml` that the next item goes on
  const std::vector<std::string>* header = nullptr;
  int rows = 0;
  for (const CsvRecord& record : records) {
    for (; yaml_line < record.line; ++yaml_line)
      yaml += "\n";
    ++yaml_line;
    const std::vector<std::string>& fields = record.fields;
    if (header == nullptr) {
      std::unordered_map<std::string_view, size_t> column_of_name;
      for (size_t c = 0; c < fields.size(); ++c) {
        if (!plain(fields[c])) {
          fail(record.line, fmt::format("column {} of the CSV header is not a column name "
                                        "(letters, digits and `_ . + -`)",
                                        c + 1));
        }
        const auto [first, inserted] = column_of_name.try_emplace(fields[c], c);
        if (!inserted) {
          fail(record.line, fmt::format("columns {} and {} of the CSV header have the same name",
                                        first->second + 1, c + 1));
        }
      }
      header = &fields;
      yaml += "# header\n";
      continue;
    }
    if (fields.size() != header->size()) {
      fail(record.line, fmt::format("{} fields, but the CSV header has {} columns", fields.size(),
                                    header->size()));
    }
    std::string item = "- {";
    for (size_t c = 0; c < fields.size(); ++c) {
      if (fields[c].empty()) continue;
      if (!plain(fields[c])) {
        fail(record.line, fmt::format("field {} is not a number or a name (a CSV value here is "
                                      "letters, digits and `_ . + -`)",
                                      c + 1));
      }
      if (item.size() > 3) item += ", ";
      item += fmt::format("{}: {}", (*header)[c], fields[c]);
    }
    yaml += item + "}\n";
    ++rows;
  }
  if (rows == 0) {
    const auto lines =
        std::count(text.begin(), text.end(), '\n') + (!text.empty() && text.back() != '\n' ? 1 : 0);
    fail(lines, "the CSV file has no data rows (a header, then one line per entry)");
  }
  return yaml;
}

bool is_csv(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".csv";
}

// Reads a whole file; nullopt (and `why`) when it is missing or unreadable.
std::optional<std::string> read_text(const std::filesystem::path& path, std::string& why) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    why = "file not found";
    return std::nullopt;
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    why = "not a regular file";
    return std::nullopt;
  }
  // Scenarios, profiles and calibrations are kilobytes; a larger file is not one of them.
  constexpr std::uintmax_t kMaxConfigFileBytes = std::uintmax_t{64} << 20;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxConfigFileBytes) {
    why = fmt::format("{} bytes, more than the {} MiB a configuration file may have", size,
                      kMaxConfigFileBytes >> 20);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot open file";
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    why = "read error";
    return std::nullopt;
  }
  return text.str();
}

const SourceFile* add_file(DocumentState& doc, const std::filesystem::path& path,
                           const SourceFile* parent) {
  auto file = std::make_unique<SourceFile>();
  file->path = path;
  std::error_code ec;
  file->canonical = std::filesystem::weakly_canonical(path, ec);
  if (ec) file->canonical = std::filesystem::absolute(path, ec).lexically_normal();
  file->parent = parent;
  doc.files.push_back(std::move(file));
  return doc.files.back().get();
}

std::unique_ptr<Node> make_override_node() {
  return std::make_unique<Node>();
}

// ---- Overrides -------------------------------------------------------------------------------

std::optional<size_t> as_index(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// "a.b[2].c" / "a.b.2.c" -> {a}, {b}, {[2]}, {c}.
std::vector<PathSegment> parse_override_path(const std::string& path_text) {
  std::vector<PathSegment> segments;
  size_t i = 0;
  bool expect_name = true;
  while (i < path_text.size()) {
    if (path_text[i] == '[') {
      const size_t close = path_text.find(']', i);
      if (close == std::string::npos) throw override_error(path_text, "missing `]`");
      std::string index = path_text.substr(i + 1, close - i - 1);
      if (!as_index(index)) {
        throw override_error(path_text, fmt::format("`[{}]` is not a sequence index", index));
      }
      if (segments.empty()) throw override_error(path_text, "the path must start with a key");
      segments.push_back(PathSegment{std::move(index), true});
      i = close + 1;
      expect_name = false;
      continue;
    }
    if (path_text[i] == '.') {
      if (expect_name) throw override_error(path_text, "empty key in path");
      ++i;
      expect_name = true;
      continue;
    }
    if (!expect_name) throw override_error(path_text, "expected `.` or `[` after `]`");
    const size_t end = path_text.find_first_of(".[", i);
    const size_t stop = end == std::string::npos ? path_text.size() : end;
    segments.push_back(PathSegment{path_text.substr(i, stop - i), false});
    i = stop;
    expect_name = false;
  }
  if (expect_name) throw override_error(path_text, "empty key in path");
  return segments;
}

Entry* find_entry(Node& n, std::string_view key) {
  for (Entry& e : n.entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

// Puts `value` in place of `target`, keeping the value a file stated there (Node::written): the
// file's value survives any number of --set on the same key.
void replace_value(Node& target, std::unique_ptr<Node> value) {
  std::unique_ptr<Node> written = std::move(target.written);
  if (!written && target.source != nullptr) written = std::make_unique<Node>(std::move(target));
  target = std::move(*value);
  target.written = std::move(written);
}

// Writes `value` at `rest` below `cur` (whose key path is `cur_path`).
void apply_at(Node* cur, std::string cur_path, std::span<const PathSegment> rest,
              std::unique_ptr<Node> value, const std::string& path_text) {
  while (true) {
    const PathSegment& seg = rest.front();
    const bool last = rest.size() == 1;
    const std::string where =
        cur_path.empty() ? std::string("the document root") : fmt::format("`{}`", cur_path);
    if (cur->kind == Kind::kScalar) {
      // Possibly a file reference: applied when the reader loads it.
      cur->pending.push_back(
          PendingOverride{path_text, {rest.begin(), rest.end()}, std::move(value)});
      return;
    }
    if (cur->kind == Kind::kNull) {
      if (seg.bracketed)
        throw override_error(path_text, fmt::format("{} is not a sequence", where));
      cur->kind = Kind::kMap;
    }
    Node* next = nullptr;
    std::string next_path;
    if (cur->kind == Kind::kMap) {
      if (seg.bracketed) {
        throw override_error(path_text, fmt::format("{} is a map, not a sequence", where));
      }
      Entry* e = find_entry(*cur, seg.text);
      if (last) {
        if (e != nullptr) {
          replace_value(*e->value, std::move(value));
        } else {
          cur->entries.push_back(Entry{seg.text, nullptr, 0, std::move(value)});
        }
        return;
      }
      if (e == nullptr) {
        cur->entries.push_back(Entry{seg.text, nullptr, 0, make_override_node()});
        e = &cur->entries.back();
      }
      next = e->value.get();
      next_path = join_key(cur_path, seg.text);
    } else {
      const std::optional<size_t> index = as_index(seg.text);
      if (!index) {
        throw override_error(path_text, fmt::format("{} is a sequence: use an index such as {}",
                                                    where, index_key(cur_path, 0)));
      }
      if (*index > cur->items.size()) {
        throw override_error(path_text, fmt::format("index {} is out of range: {} has {} elements",
                                                    *index, where, cur->items.size()));
      }
      if (*index == cur->items.size()) cur->items.push_back(make_override_node());
      if (last) {
        replace_value(*cur->items[*index], std::move(value));
        return;
      }
      next = cur->items[*index].get();
      next_path = index_key(cur_path, *index);
    }
    cur = next;
    cur_path = std::move(next_path);
    rest = rest.subspan(1);
  }
}

// ---- Checking and emitting -------------------------------------------------------------------

void check_node(const Node& n, const std::string& path) {
  if (n.kind == Kind::kMap) {
    for (const Entry& e : n.entries) {
      const std::string child_path = join_key(path, e.key);
      if (std::find(n.asked.begin(), n.asked.end(), e.key) == n.asked.end()) {
        std::string message = fmt::format("unknown key {}", quoted_name(e.key));
        if (n.asked.empty()) {
          message += path.empty() ? "; no key is read at the top level"
                                  : fmt::format("; no key under `{}` is read", path);
        } else if (auto suggestion = nearest(e.key, n.asked)) {
          message += fmt::format("; did you mean `{}`?", *suggestion);
        } else {
          message += fmt::format("; valid keys: {}", join_names(n.asked));
        }
        throw error_at(e.key_source, e.key_line, is_short_name(e.key) ? child_path : path,
                       std::move(message));
      }
      check_node(*e.value, child_path);
    }
  } else if (n.kind == Kind::kSequence) {
    for (size_t i = 0; i < n.items.size(); ++i)
      check_node(*n.items[i], index_key(path, i));
  } else if (!n.pending.empty()) {
    throw override_error(
        n.pending.front().path_text,
        fmt::format("`{}` holds {}, not a map or a loaded file reference", path, describe(n)));
  }
}

/// A key the input states that readers read only for inactive uses.
struct UnusedEntry {
  std::string key_path;
  std::string location;  // "file:line" or "--set"
  uint32_t use = 0;      // the first inactive use it was read for
  const Node* value = nullptr;
};

/// The first use `key` of map `n` was read for when every use it was read for is inactive
/// (`inactive[use]`); nullopt when a reader consumed it (unconditionally or for an active use)
/// or none asked for it.
std::optional<uint32_t> only_inactive_use(const Node& n, std::string_view key,
                                          const std::vector<char>& inactive) {
  std::optional<uint32_t> first;
  for (const config_detail::KeyUse& u : n.key_uses) {
    if (u.key != key) continue;
    if (u.use == 0 || inactive[u.use] == 0) return std::nullopt;
    if (!first) first = u.use;
  }
  return first;
}

/// The values --set gave in the subtree of `unused` (itself, or the highest ones below it;
/// defaults written into a --set map aside), as entries of the same use.
void given_by_set(const UnusedEntry& unused, std::vector<UnusedEntry>& out) {
  const Node& n = *unused.value;
  if (n.source == nullptr) {
    out.push_back(UnusedEntry{unused.key_path, std::string(kOverrideSource), unused.use, &n});
    return;
  }
  for (const Entry& e : n.entries) {
    if (!e.defaulted)
      given_by_set({join_key(unused.key_path, e.key), "", unused.use, e.value.get()}, out);
  }
  for (size_t i = 0; i < n.items.size(); ++i) {
    given_by_set({index_key(unused.key_path, i), "", unused.use, n.items[i].get()}, out);
  }
}

/// Appends the unused entries below `n` (at `path`) to `out`: an entry whose whole subtree is
/// read only for inactive uses once, at its highest key; defaults never. Returns whether nothing
/// in `n`'s subtree was consumed.
bool collect_unused(const Node& n, const std::string& path, const std::vector<char>& inactive,
                    std::vector<UnusedEntry>& out) {
  bool nothing_consumed = true;
  if (n.kind == Kind::kSequence) {
    for (size_t i = 0; i < n.items.size(); ++i) {
      nothing_consumed =
          collect_unused(*n.items[i], index_key(path, i), inactive, out) && nothing_consumed;
    }
    return nothing_consumed;
  }
  for (const Entry& e : n.entries) {
    const std::string child_path = join_key(path, e.key);
    std::vector<UnusedEntry> below;
    const bool subtree_unused = collect_unused(*e.value, child_path, inactive, below);
    const std::optional<uint32_t> use = only_inactive_use(n, e.key, inactive);
    if (use && subtree_unused) {
      if (!e.defaulted) {
        const std::string location =
            e.value->source == nullptr
                ? std::string(kOverrideSource)
                : fmt::format("{}:{}", source_name(e.key_source), e.key_line);
        out.push_back(UnusedEntry{child_path, location, *use, e.value.get()});
      }
      continue;
    }
    nothing_consumed = false;
    out.insert(out.end(), std::make_move_iterator(below.begin()),
               std::make_move_iterator(below.end()));
  }
  return nothing_consumed;
}

void emit(YAML::Emitter& out, const Node& n) {
  switch (n.kind) {
    case Kind::kNull:
      out << YAML::Null;
      break;
    case Kind::kScalar:
      if (n.path) {
        // Absolute: the resolved document is written elsewhere than the file that named it.
        out << YAML::DoubleQuoted << std::filesystem::absolute(*n.path).lexically_normal().string();
        break;
      }
      if (n.quoted) out << YAML::DoubleQuoted;
      out << n.scalar;
      break;
    case Kind::kSequence:
      if (n.flow) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : n.items)
        emit(out, *item);
      out << YAML::EndSeq;
      break;
    case Kind::kMap:
      if (n.flow) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const Entry& e : n.entries) {
        out << YAML::Key << e.key << YAML::Value;
        emit(out, *e.value);
      }
      out << YAML::EndMap;
      break;
  }
}

// ---- Reader helpers --------------------------------------------------------------------------

void require_map(const ConfigNode& self) {
  const Node& n = NodeAccess::node(self);
  if (n.kind != Kind::kMap && n.kind != Kind::kNull) {
    self.fail(fmt::format("expected a map, got {}", describe(n)));
  }
}

void note_asked(Node& n, std::string_view key, uint32_t use) {
  if (std::find(n.asked.begin(), n.asked.end(), key) == n.asked.end()) n.asked.emplace_back(key);
  const auto same = [&](const config_detail::KeyUse& u) { return u.key == key && u.use == use; };
  if (std::none_of(n.key_uses.begin(), n.key_uses.end(), same)) {
    n.key_uses.push_back(config_detail::KeyUse{std::string(key), use});
  }
}

// Looks `key` up, marking it asked (for the view's use); nullptr when absent.
Node* lookup(const ConfigNode& self, std::string_view key) {
  require_map(self);
  Node& n = NodeAccess::node(self);
  note_asked(n, key, NodeAccess::use(self));
  Entry* e = find_entry(n, key);
  return e == nullptr ? nullptr : e->value.get();
}

enum class DefaultKind { kValue, kString };

// The child at `key`, inserting a scalar default (written as `text`) when absent. A kString
// default is quoted when YAML would otherwise read it as a number, boolean or null.
ConfigNode child_or_default(const ConfigNode& self, std::string_view key, std::string text,
                            DefaultKind kind = DefaultKind::kValue) {
  if (Node* found = lookup(self, key)) {
    found->read_default = text;
    return NodeAccess::make(&NodeAccess::doc(self), found, join_key(self.key_path(), key),
                            NodeAccess::use(self));
  }
  Node& n = NodeAccess::node(self);
  n.kind = Kind::kMap;
  auto value = std::make_unique<Node>();
  value->kind = Kind::kScalar;
  value->quoted = kind == DefaultKind::kString && needs_quotes(text);
  value->read_default = text;
  value->scalar = std::move(text);
  value->source = n.source;
  Node* raw = value.get();
  n.entries.push_back(Entry{std::string(key), n.source, 0, std::move(value), true});
  return NodeAccess::make(&NodeAccess::doc(self), raw, join_key(self.key_path(), key),
                          NodeAccess::use(self));
}

const std::string& scalar_text(const ConfigNode& self, std::string_view expected) {
  Node& n = NodeAccess::node(self);
  if (n.kind != Kind::kScalar) self.fail(fmt::format("expected {}, got {}", expected, describe(n)));
  // The first reader's expectation names the type (a choice replaces "a string" below).
  if (n.read_type.empty()) n.read_type = std::string(expected);
  return n.scalar;
}

/// Whether an error may quote scalar `n` whole: one short line of a YAML file or of --set, not a
/// whole file (describe() says what it is instead).
bool quotable_whole(const Node& n) {
  return !(n.file_root && n.source != nullptr) && n.scalar.size() <= kMaxQuotedChars &&
         excerpt(n.scalar) == n.scalar;
}

std::string check_choice(const ConfigNode& value, std::string_view key,
                         std::span<const std::string_view> choices) {
  std::string text = value.as_string();
  // A reader that accepts only some of the choices (a model's own check of its name) keeps the
  // widest list another reader stated.
  std::string& read_type = NodeAccess::node(value).read_type;
  const size_t known =
      read_type.starts_with("one of ")
          ? static_cast<size_t>(std::count(read_type.begin(), read_type.end(), ',')) + 1
          : 0;
  if (choices.size() >= known) read_type = fmt::format("one of {}", join_names(choices));
  if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
  const Node& n = NodeAccess::node(value);
  std::string message = quotable_whole(n) ? fmt::format("unknown {} `{}`", key, text)
                                          : fmt::format("unknown {}: got {}", key, describe(n));
  if (auto suggestion = nearest(text, choices)) {
    message += fmt::format("; did you mean `{}`?", *suggestion);
  }
  message += fmt::format(" valid: {}", join_names(choices));
  value.fail(std::move(message));
}

template <typename Parse>
auto parse_quantity(const ConfigNode& self, std::string_view expected, Parse parse) {
  const std::string& text = scalar_text(self, expected);
  try {
    return parse(text);
  } catch (const UnitError& e) {
    // The parser's message quotes the text whole.
    const Node& n = NodeAccess::node(self);
    if (!quotable_whole(n)) self.fail(fmt::format("expected {}, got {}", expected, describe(n)));
    self.fail(e.what());
  }
}

}  // namespace

// ---- ConfigNode --------------------------------------------------------------------------------

int ConfigNode::line() const {
  return node_->line;
}

const std::filesystem::path& ConfigNode::file() const {
  return node_->source == nullptr ? doc_->override_file : node_->source->path;
}

void ConfigNode::fail(std::string message) const {
  throw error_at(node_->source, node_->line, key_path_, std::move(message));
}

bool ConfigNode::is_map() const {
  return node_->kind == Kind::kMap;
}
bool ConfigNode::is_sequence() const {
  return node_->kind == Kind::kSequence;
}
bool ConfigNode::is_scalar() const {
  return node_->kind == Kind::kScalar;
}
bool ConfigNode::is_null() const {
  return node_->kind == Kind::kNull;
}

size_t ConfigNode::size() const {
  switch (node_->kind) {
    case Kind::kNull:
      return 0;
    case Kind::kMap:
      return node_->entries.size();
    case Kind::kSequence:
      return node_->items.size();
    case Kind::kScalar:
      break;
  }
  fail(fmt::format("expected a sequence or a map, got {}", describe(*node_)));
}

std::vector<ConfigNode> ConfigNode::items() const {
  if (node_->kind != Kind::kSequence && node_->kind != Kind::kNull) {
    fail(fmt::format("expected a sequence, got {}", describe(*node_)));
  }
  std::vector<ConfigNode> out;
  out.reserve(node_->items.size());
  for (size_t i = 0; i < node_->items.size(); ++i) {
    out.push_back(ConfigNode(doc_, node_->items[i].get(), index_key(key_path_, i), use_));
  }
  return out;
}

std::vector<std::string> ConfigNode::map_keys() const {
  require_map(*this);
  std::vector<std::string> out;
  out.reserve(node_->entries.size());
  for (const Entry& e : node_->entries)
    out.push_back(e.key);
  return out;
}

std::vector<std::pair<std::string, ConfigNode>> ConfigNode::map_entries() const {
  require_map(*this);
  std::vector<std::pair<std::string, ConfigNode>> out;
  out.reserve(node_->entries.size());
  for (Entry& e : node_->entries) {
    note_asked(*node_, e.key, use_);
    out.emplace_back(e.key, ConfigNode(doc_, e.value.get(), join_key(key_path_, e.key), use_));
  }
  return out;
}

std::vector<std::pair<std::string, ConfigNode>> ConfigNode::peek_map_entries() const {
  require_map(*this);
  std::vector<std::pair<std::string, ConfigNode>> out;
  out.reserve(node_->entries.size());
  for (Entry& e : node_->entries)
    out.emplace_back(e.key, ConfigNode(doc_, e.value.get(), join_key(key_path_, e.key)));
  return out;
}

void ConfigNode::expect_map(std::string_view what) const {
  if (node_->kind != Kind::kMap && node_->kind != Kind::kNull) {
    fail(fmt::format("expected a YAML map ({}), got {}", what, describe(*node_)));
  }
}

bool ConfigNode::has(std::string_view key) const {
  return lookup(*this, key) != nullptr;
}

bool ConfigNode::states(std::string_view key) const {
  if (lookup(*this, key) == nullptr) return false;
  const Entry* e = find_entry(NodeAccess::node(*this), key);
  return e != nullptr && !e->defaulted;
}

ConfigNode ConfigNode::child(std::string_view key) const {
  Node* found = lookup(*this, key);
  if (found == nullptr) {
    // A present key one typo away from the required one is the likelier mistake: name it.
    if (node_->kind == Kind::kMap) {
      const std::array<std::string_view, 1> wanted{key};
      for (const Entry& e : node_->entries) {
        if (nearest(e.key, wanted)) {
          throw error_at(e.key_source, e.key_line, join_key(key_path_, e.key),
                         fmt::format("unknown key {}; did you mean `{}`? (`{}` is required)",
                                     quoted_name(e.key), key, key));
        }
      }
    }
    fail(fmt::format("missing required key `{}`", key));
  }
  return ConfigNode(doc_, found, join_key(key_path_, key), use_);
}

std::optional<ConfigNode> ConfigNode::optional_child(std::string_view key) const {
  Node* found = lookup(*this, key);
  if (found == nullptr) return std::nullopt;
  return ConfigNode(doc_, found, join_key(key_path_, key), use_);
}

ConfigNode ConfigNode::child_or_empty_map(std::string_view key) const {
  if (Node* found = lookup(*this, key)) {
    return ConfigNode(doc_, found, join_key(key_path_, key), use_);
  }
  node_->kind = Kind::kMap;
  auto value = std::make_unique<Node>();
  value->kind = Kind::kMap;
  value->flow = true;
  value->source = node_->source;
  Node* raw = value.get();
  node_->entries.push_back(Entry{std::string(key), node_->source, 0, std::move(value), true});
  return ConfigNode(doc_, raw, join_key(key_path_, key), use_);
}

ConfigNode ConfigNode::read_for(std::string_view use) const {
  if (use.empty()) throw std::invalid_argument("ConfigNode::read_for: empty use");
  std::vector<std::string>& uses = doc_->uses;
  auto it = std::find(uses.begin(), uses.end(), use);
  if (it == uses.end()) it = uses.insert(uses.end(), std::string(use));
  return ConfigNode(doc_, node_, key_path_, static_cast<uint32_t>(it - uses.begin()));
}

std::optional<ConfigNode> ConfigNode::as_written() const {
  if (node_->written) return ConfigNode(doc_, node_->written.get(), key_path_, use_);
  if (node_->source == nullptr) return std::nullopt;
  return *this;
}

int64_t ConfigNode::as_int() const {
  constexpr std::string_view kExpected = "an integer";
  const std::string& text = scalar_text(*this, kExpected);
  int64_t v = 0;
  const IntParse result = node_->quoted ? IntParse::kNotInteger : parse_yaml_int(text, v);
  if (result == IntParse::kOutOfRange) {
    fail(fmt::format("integer {} is out of range (64-bit signed)", excerpt(text)));
  }
  if (result != IntParse::kOk)
    fail(fmt::format("expected {}, got {}", kExpected, describe(*node_)));
  return v;
}

double ConfigNode::as_double() const {
  constexpr std::string_view kExpected = "a number";
  scalar_text(*this, kExpected);
  std::optional<double> v;
  if (!node_->quoted) v = parse_yaml_double(node_->scalar);
  if (!v) fail(fmt::format("expected {}, got {}", kExpected, describe(*node_)));
  return *v;
}

bool ConfigNode::as_bool() const {
  constexpr std::string_view kExpected = "a boolean (true or false)";
  scalar_text(*this, kExpected);
  std::optional<bool> v;
  if (!node_->quoted) v = parse_yaml_bool(node_->scalar);
  if (!v) fail(fmt::format("expected {}, got {}", kExpected, describe(*node_)));
  return *v;
}

std::string ConfigNode::as_string() const {
  return scalar_text(*this, "a string");
}

Duration ConfigNode::as_duration() const {
  return parse_quantity(*this, "a duration with a unit (e.g. 1.5us)",
                        [](const std::string& s) { return parse_duration(s); });
}

Bandwidth ConfigNode::as_bandwidth() const {
  return parse_quantity(*this, "a bandwidth with a unit (e.g. 25GB/s)",
                        [](const std::string& s) { return parse_bandwidth(s); });
}

FlopRate ConfigNode::as_flop_rate() const {
  return parse_quantity(*this, "a flop rate with a unit (e.g. 312TFLOP/s)",
                        [](const std::string& s) { return parse_flop_rate(s); });
}

int64_t ConfigNode::as_bytes() const {
  return parse_quantity(*this, "a size with a unit (e.g. 4096B or 4KiB)",
                        [](const std::string& s) { return parse_bytes(s); });
}

std::vector<int64_t> ConfigNode::as_int_list() const {
  if (node_->kind != Kind::kSequence) {
    fail(fmt::format("expected a sequence of integers, got {}", describe(*node_)));
  }
  std::vector<int64_t> out;
  for (const ConfigNode& item : items())
    out.push_back(item.as_int());
  return out;
}

std::vector<std::string> ConfigNode::as_string_list() const {
  if (node_->kind != Kind::kSequence) {
    fail(fmt::format("expected a sequence of strings, got {}", describe(*node_)));
  }
  std::vector<std::string> out;
  for (const ConfigNode& item : items())
    out.push_back(item.as_string());
  return out;
}

int64_t ConfigNode::get_int(std::string_view key) const {
  return child(key).as_int();
}
int64_t ConfigNode::get_int_or(std::string_view key, int64_t default_value) const {
  return child_or_default(*this, key, std::to_string(default_value)).as_int();
}
double ConfigNode::get_double(std::string_view key) const {
  return child(key).as_double();
}
double ConfigNode::get_double_or(std::string_view key, double default_value) const {
  return child_or_default(*this, key, format_yaml_double(default_value)).as_double();
}
bool ConfigNode::get_bool(std::string_view key) const {
  return child(key).as_bool();
}
bool ConfigNode::get_bool_or(std::string_view key, bool default_value) const {
  return child_or_default(*this, key, default_value ? "true" : "false").as_bool();
}
std::string ConfigNode::get_string(std::string_view key) const {
  return child(key).as_string();
}
std::string ConfigNode::get_string_or(std::string_view key, std::string_view default_value) const {
  return child_or_default(*this, key, std::string(default_value), DefaultKind::kString).as_string();
}
Duration ConfigNode::get_duration(std::string_view key) const {
  return child(key).as_duration();
}
Duration ConfigNode::get_duration_or(std::string_view key, Duration default_value) const {
  return child_or_default(*this, key, format_duration_exact(default_value)).as_duration();
}
Bandwidth ConfigNode::get_bandwidth(std::string_view key) const {
  return child(key).as_bandwidth();
}
Bandwidth ConfigNode::get_bandwidth_or(std::string_view key, Bandwidth default_value) const {
  return child_or_default(*this, key, format_bandwidth_exact(default_value)).as_bandwidth();
}
FlopRate ConfigNode::get_flop_rate(std::string_view key) const {
  return child(key).as_flop_rate();
}
FlopRate ConfigNode::get_flop_rate_or(std::string_view key, FlopRate default_value) const {
  return child_or_default(*this, key, format_flop_rate_exact(default_value)).as_flop_rate();
}
int64_t ConfigNode::get_bytes(std::string_view key) const {
  return child(key).as_bytes();
}
int64_t ConfigNode::get_bytes_or(std::string_view key, int64_t default_value) const {
  return child_or_default(*this, key, format_bytes_exact(default_value)).as_bytes();
}
std::vector<int64_t> ConfigNode::get_int_list(std::string_view key) const {
  return child(key).as_int_list();
}
std::vector<std::string> ConfigNode::get_string_list(std::string_view key) const {
  return child(key).as_string_list();
}

int64_t ConfigNode::get_positive_int(std::string_view key) const {
  const ConfigNode value = child(key);
  const int64_t v = value.as_int();
  if (v <= 0) value.fail(fmt::format("must be a positive integer, got {}", v));
  return v;
}

int64_t ConfigNode::get_positive_int_or(std::string_view key, int64_t default_value) const {
  const ConfigNode value = child_or_default(*this, key, std::to_string(default_value));
  const int64_t v = value.as_int();
  if (v <= 0) value.fail(fmt::format("must be a positive integer, got {}", v));
  return v;
}

namespace {

/// `value` when it lies in [lo, hi]; else fails at `node` naming the range in `print`'s units.
template <typename T, typename Print>
T within(const ConfigNode& node, T value, T lo, T hi, Print print) {
  NodeAccess::node(node).read_range = fmt::format("{} .. {}", print(lo), print(hi));
  if (!(lo <= value && value <= hi)) {
    node.fail(fmt::format("must be between {} and {}, got {}", print(lo), print(hi), print(value)));
  }
  return value;
}

std::string print_int(int64_t v) {
  return std::to_string(v);
}
std::string print_double(double v) {
  return fmt::format("{:g}", v);
}

}  // namespace

int64_t ConfigNode::as_int_in(int64_t lo, int64_t hi) const {
  return within(*this, as_int(), lo, hi, print_int);
}
double ConfigNode::as_double_in(double lo, double hi) const {
  return within(*this, as_double(), lo, hi, print_double);
}
Duration ConfigNode::as_duration_in(Duration lo, Duration hi) const {
  return within(*this, as_duration(), lo, hi, format_duration);
}
Bandwidth ConfigNode::as_bandwidth_in(Bandwidth lo, Bandwidth hi) const {
  const Bandwidth b = as_bandwidth();
  within(*this, b.bytes_per_second(), lo.bytes_per_second(), hi.bytes_per_second(),
         [](double v) { return format_bandwidth(Bandwidth::bytes_per_second(v)); });
  return b;
}
FlopRate ConfigNode::as_flop_rate_in(FlopRate lo, FlopRate hi) const {
  const FlopRate f = as_flop_rate();
  within(*this, f.flops_per_second(), lo.flops_per_second(), hi.flops_per_second(),
         [](double v) { return format_flop_rate(FlopRate::flops_per_second(v)); });
  return f;
}
int64_t ConfigNode::as_bytes_in(int64_t lo, int64_t hi) const {
  return within(*this, as_bytes(), lo, hi, format_bytes);
}
int64_t ConfigNode::get_int_in(std::string_view key, int64_t lo, int64_t hi) const {
  return child(key).as_int_in(lo, hi);
}
int64_t ConfigNode::get_int_in_or(std::string_view key, int64_t lo, int64_t hi,
                                  int64_t default_value) const {
  return child_or_default(*this, key, std::to_string(default_value)).as_int_in(lo, hi);
}
double ConfigNode::get_double_in(std::string_view key, double lo, double hi) const {
  return child(key).as_double_in(lo, hi);
}
double ConfigNode::get_double_in_or(std::string_view key, double lo, double hi,
                                    double default_value) const {
  return child_or_default(*this, key, format_yaml_double(default_value)).as_double_in(lo, hi);
}
Duration ConfigNode::get_duration_in(std::string_view key, Duration lo, Duration hi) const {
  return child(key).as_duration_in(lo, hi);
}
Duration ConfigNode::get_duration_in_or(std::string_view key, Duration lo, Duration hi,
                                        Duration default_value) const {
  return child_or_default(*this, key, format_duration_exact(default_value)).as_duration_in(lo, hi);
}
Bandwidth ConfigNode::get_bandwidth_in(std::string_view key, Bandwidth lo, Bandwidth hi) const {
  return child(key).as_bandwidth_in(lo, hi);
}
Bandwidth ConfigNode::get_bandwidth_in_or(std::string_view key, Bandwidth lo, Bandwidth hi,
                                          Bandwidth default_value) const {
  return child_or_default(*this, key, format_bandwidth_exact(default_value))
      .as_bandwidth_in(lo, hi);
}
int64_t ConfigNode::get_bytes_in(std::string_view key, int64_t lo, int64_t hi) const {
  return child(key).as_bytes_in(lo, hi);
}

std::string ConfigNode::get_choice(std::string_view key,
                                   std::span<const std::string_view> choices) const {
  return check_choice(child(key), key, choices);
}

std::string ConfigNode::get_choice(std::string_view key,
                                   std::initializer_list<std::string_view> choices) const {
  return get_choice(key, std::span<const std::string_view>(choices.begin(), choices.size()));
}

std::string ConfigNode::get_choice_or(std::string_view key,
                                      std::span<const std::string_view> choices,
                                      std::string_view default_value) const {
  return check_choice(
      child_or_default(*this, key, std::string(default_value), DefaultKind::kString), key, choices);
}

std::string ConfigNode::get_choice_or(std::string_view key,
                                      std::initializer_list<std::string_view> choices,
                                      std::string_view default_value) const {
  return get_choice_or(key, std::span<const std::string_view>(choices.begin(), choices.size()),
                       default_value);
}

std::filesystem::path ConfigNode::get_path(std::string_view key) const {
  const ConfigNode value = child(key);
  const Node& n = *value.node_;
  if (n.reference) return *n.reference;
  const std::filesystem::path written(scalar_text(value, "a file path"));
  if (written.empty()) value.fail("expected a file path, got an empty string");
  const std::filesystem::path resolved =
      written.is_absolute() || n.source == nullptr
          ? written.lexically_normal()
          : (n.source->path.parent_path() / written).lexically_normal();
  value.node_->path = resolved;
  return resolved;
}

ConfigNode ConfigNode::load_reference(std::string_view key) const {
  const ConfigNode value = child(key);
  Node& n = *value.node_;
  // Already loaded, or given inline (as in a resolved scenario, where references are inlined:
  // a YAML file's map, or a CSV file's rows as a sequence).
  if (n.reference || n.kind == Kind::kMap || n.kind == Kind::kSequence) return value;
  const std::filesystem::path target = get_path(key);

  const SourceFile* referencing = n.source;
  std::vector<const SourceFile*> chain;
  for (const SourceFile* f = referencing; f != nullptr; f = f->parent)
    chain.push_back(f);
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(target, ec);
  if (ec) canonical = std::filesystem::absolute(target, ec).lexically_normal();
  for (const SourceFile* f : chain) {
    if (f->canonical != canonical) continue;
    std::string cycle;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it)
      cycle += (*it)->path.string() + " -> ";
    value.fail(fmt::format("reference cycle: {}{}", cycle, target.string()));
  }

  std::string why;
  const std::optional<std::string> text = read_text(target, why);
  if (!text) value.fail(fmt::format("cannot load referenced file `{}`: {}", target.string(), why));
  const SourceFile* file = add_file(*doc_, target, referencing);
  std::unique_ptr<Node> loaded = parse_yaml(
      is_csv(target) ? csv_as_yaml(*text, file, value.key_path_) : *text, file, value.key_path_);

  std::vector<PendingOverride> pending = std::move(n.pending);
  n = std::move(*loaded);
  n.reference = target;
  for (PendingOverride& p : pending) {
    apply_at(&n, value.key_path_, p.rest, std::move(p.value), p.path_text);
  }
  return value;
}

// ---- ConfigDocument ----------------------------------------------------------------------------

ConfigDocument::ConfigDocument(std::unique_ptr<DocumentState> state) : state_(std::move(state)) {}
ConfigDocument::ConfigDocument(ConfigDocument&&) noexcept = default;
ConfigDocument& ConfigDocument::operator=(ConfigDocument&&) noexcept = default;
ConfigDocument::~ConfigDocument() = default;

ConfigDocument ConfigDocument::load_file(const std::filesystem::path& path) {
  std::string why;
  const std::optional<std::string> text = read_text(path, why);
  if (!text) {
    throw ConfigError(path.string(), 0, "", fmt::format("cannot load configuration file: {}", why));
  }
  auto state = std::make_unique<DocumentState>();
  const SourceFile* file = add_file(*state, path, nullptr);
  state->root = parse_yaml(*text, file, "");
  return ConfigDocument(std::move(state));
}

ConfigDocument ConfigDocument::parse_string(std::string_view yaml, std::string display_name) {
  auto state = std::make_unique<DocumentState>();
  const SourceFile* file =
      add_file(*state, std::filesystem::path(std::move(display_name)), nullptr);
  state->root = parse_yaml(std::string(yaml), file, "");
  return ConfigDocument(std::move(state));
}

void ConfigDocument::apply_override(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    throw ConfigError(
        std::string(kOverrideSource), 0, "",
        fmt::format("malformed override `{}`: expected path.to.key=value", assignment));
  }
  const std::string path_text(trim_blanks(assignment.substr(0, eq)));
  if (path_text.empty()) {
    throw ConfigError(std::string(kOverrideSource), 0, "",
                      fmt::format("malformed override `{}`: empty key", assignment));
  }
  const std::vector<PathSegment> segments = parse_override_path(path_text);
  const std::string value_text(assignment.substr(eq + 1));
  YAML::Node y;
  try {
    y = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw override_error(path_text, fmt::format("malformed value `{}`: {}", value_text, e.msg));
  }
  size_t values_left = kMaxDocumentValues;
  apply_at(state_->root.get(), "", segments, convert(y, nullptr, 0, path_text, values_left),
           path_text);
  state_->overrides.push_back(path_text);
}

const std::vector<std::string>& ConfigDocument::overrides() const {
  return state_->overrides;
}

ConfigNode ConfigDocument::root() {
  return ConfigNode(state_.get(), state_->root.get(), "");
}

const std::filesystem::path& ConfigDocument::file() const {
  return state_->files.front()->path;
}

void ConfigDocument::check_all_keys_used() const {
  check_node(*state_->root, "");
}

std::vector<std::string> ConfigDocument::unused_key_warnings(
    std::span<const InactiveUse> inactive) const {
  const std::vector<std::string>& uses = state_->uses;
  std::vector<char> is_inactive(uses.size(), 0);
  for (const InactiveUse& u : inactive) {
    const auto it = std::find(uses.begin(), uses.end(), u.use);
    if (!u.use.empty() && it != uses.end()) is_inactive[static_cast<size_t>(it - uses.begin())] = 1;
  }
  std::vector<UnusedEntry> unused;
  collect_unused(*state_->root, "", is_inactive, unused);
  std::vector<std::string> warnings;
  for (const InactiveUse& u : inactive) {
    std::vector<UnusedEntry> keys;
    for (const UnusedEntry& e : unused) {
      if (uses[e.use] != u.use) continue;
      if (u.only_if_set) {
        given_by_set(e, keys);  // only what a what-if changed is news: name those keys
      } else {
        keys.push_back(e);
      }
    }
    if (keys.empty()) continue;
    std::string named;
    for (size_t i = 0; i < keys.size() && i < kMaxNamedUnusedKeys; ++i) {
      named += fmt::format("{}`{}` ({})", i == 0 ? "" : ", ", keys[i].key_path, keys[i].location);
    }
    if (keys.size() > kMaxNamedUnusedKeys) {
      named += fmt::format(" and {} more", keys.size() - kMaxNamedUnusedKeys);
    }
    warnings.push_back(fmt::format("{}, so {} {}: {}", u.reason,
                                   keys.size() == 1 ? "this key" : "these keys",
                                   keys.size() == 1 ? "changes nothing" : "change nothing", named));
  }
  return warnings;
}

namespace {

void collect_read_keys(const Node& n, const std::string& path, bool in_file, bool defaulted,
                       std::vector<ReadKey>& out) {
  const bool below_file = in_file || n.reference.has_value();
  // A file reference read and inlined: the key names a file (its own keys follow, below it).
  if (n.reference && !path.empty()) {
    out.push_back(ReadKey{path, "a file (a YAML file of its own schema, inlined)", "", std::nullopt,
                          n.reference->string(), defaulted, in_file});
  }
  if (n.kind == Kind::kScalar) {
    if (!n.read_type.empty()) {
      out.push_back(
          ReadKey{path, n.read_type, n.read_range, n.read_default, n.scalar, defaulted, in_file});
    }
    return;
  }
  for (const Entry& e : n.entries) {
    collect_read_keys(*e.value, path.empty() ? e.key : path + "." + e.key, below_file, e.defaulted,
                      out);
  }
  for (size_t i = 0; i < n.items.size(); ++i)
    collect_read_keys(*n.items[i], fmt::format("{}.{}", path, i), below_file, false, out);
}

}  // namespace

std::vector<ReadKey> ConfigDocument::read_keys() const {
  std::vector<ReadKey> out;
  collect_read_keys(*state_->root, "", false, false, out);
  return out;
}

std::string ConfigDocument::resolved_yaml() const {
  YAML::Emitter out;
  emit(out, *state_->root);
  if (!out.good()) throw std::logic_error("resolved_yaml: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace upsim

#include "tools/sweep_records.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "tools/sha256.h"

namespace upsim::cli {

namespace {

constexpr std::string_view kRowMagic = "upsim-sweep-row 1";
constexpr std::string_view kManifestMagic = "upsim-study 1";

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// The text escape() wrote, or nullopt for a stray tab / line break or an unknown escape.
std::optional<std::string> unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\t' || c == '\n' || c == '\r') return std::nullopt;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == text.size()) return std::nullopt;
    switch (text[i]) {
      case '\\':
        out += '\\';
        break;
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      default:
        return std::nullopt;
    }
  }
  return out;
}

bool is_sha256(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::optional<size_t> parse_index(std::string_view s) {
  size_t v = 0;
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// Reads `text` line by line; each line must end with '\n'.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  bool done() const { return pos_ == text_.size(); }
  /// The next line without its '\n'; nullopt at the end or for a last line without one.
  std::optional<std::string_view> next() {
    if (done()) return std::nullopt;
    const size_t nl = text_.find('\n', pos_);
    if (nl == std::string_view::npos) return std::nullopt;
    const std::string_view line = text_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return line;
  }
  std::string_view rest() const { return text_.substr(pos_); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

/// `line` split at its tabs into exactly `n` fields (the last one may not hold tabs either).
std::optional<std::vector<std::string_view>> fields(std::string_view line, size_t n) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string_view::npos ? tab : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (out.size() != n) return std::nullopt;
  return out;
}

/// The value of a `key<TAB>value` line, unescaped.
std::optional<std::string> keyed(std::optional<std::string_view> line, std::string_view key) {
  if (!line) return std::nullopt;
  const auto f = fields(*line, 2);
  if (!f || (*f)[0] != key) return std::nullopt;
  return unescape((*f)[1]);
}

std::string row_body(const RowRecord& r) {
  std::string out = fmt::format("point\t{}\nversion\t{}\nscenario\t{}\n", r.point,
                                escape(r.source.version), r.source.scenario_sha256);
  for (const FileHash& f : r.source.files)
    out += fmt::format("file\t{}\t{}\n", f.sha256, escape(f.path));
  out += fmt::format("identity\t{}\nrow\t{}\n", escape(r.identity), escape(r.row));
  return out;
}

std::optional<RowRecord> parse_row_body(std::string_view body, std::string& why) {
  why = "its fields are not those of a row record";
  Lines lines(body);
  RowRecord r;
  const std::optional<std::string> point = keyed(lines.next(), "point");
  const std::optional<size_t> index = point ? parse_index(*point) : std::nullopt;
  if (!index) return std::nullopt;
  r.point = *index;
  const std::optional<std::string> version = keyed(lines.next(), "version");
  const std::optional<std::string> scenario = keyed(lines.next(), "scenario");
  if (!version || !scenario || !is_sha256(*scenario)) return std::nullopt;
  r.source.version = *version;
  r.source.scenario_sha256 = *scenario;
  for (;;) {
    const std::optional<std::string_view> line = lines.next();
    if (!line) return std::nullopt;
    const auto file = fields(*line, 3);
    if (!file || (*file)[0] != "file") {
      const std::optional<std::string> identity = keyed(line, "identity");
      if (!identity) return std::nullopt;
      r.identity = *identity;
      break;
    }
    std::optional<std::string> path = unescape((*file)[2]);
    if (!path || !is_sha256((*file)[1])) return std::nullopt;
    if (!r.source.files.empty() && *path <= r.source.files.back().path) return std::nullopt;
    r.source.files.push_back({std::move(*path), std::string((*file)[1])});
  }
  const std::optional<std::string> row = keyed(lines.next(), "row");
  if (!row || !lines.done()) return std::nullopt;
  r.row = *row;
  why.clear();
  return r;
}

}  // namespace

std::string scenario_sha256(std::string_view base, const std::vector<std::string>& overrides,
                            const std::vector<FileHash>& files) {
  std::string text = fmt::format("upsim-point-scenario 1\nbase\t{}\n", escape(base));
  for (const std::string& o : overrides)
    text += fmt::format("set\t{}\n", escape(o));
  for (const FileHash& f : files)
    text += fmt::format("file\t{}\t{}\n", f.sha256, escape(f.path));
  return sha256_hex(text);
}

std::string format_row_record(const RowRecord& record) {
  const std::string body = row_body(record);
  return fmt::format("{}\nchecksum\t{}\n{}", kRowMagic, sha256_hex(body), body);
}

std::optional<RowRecord> parse_row_record(std::string_view text, std::string& why) {
  Lines lines(text);
  if (lines.next() != kRowMagic) {
    why = text.empty() ? "it is empty" : "it is not a row record";
    return std::nullopt;
  }
  const std::optional<std::string> checksum = keyed(lines.next(), "checksum");
  if (!checksum || !is_sha256(*checksum)) {
    why = "it has no checksum";
    return std::nullopt;
  }
  if (sha256_hex(lines.rest()) != *checksum) {
    why = "its checksum does not match its content: edited, truncated or joined with another";
    return std::nullopt;
  }
  return parse_row_body(lines.rest(), why);
}

std::string format_manifest(const Manifest& m) {
  std::string out =
      fmt::format("{}\nversion\t{}\nbase\t{}\n", kManifestMagic, escape(m.version), escape(m.base));
  if (m.fits_memory) out += "fits_memory\n";
  for (size_t i = 0; i < m.points.size(); ++i) {
    out += fmt::format("point\t{}\t{}\t{}\n", i, m.points[i].scenario_sha256,
                       escape(m.points[i].identity));
  }
  return out;
}

namespace {

/// The manifest before versions and hashes: "base\t<path>", "fits_memory"?, "<n>\t<identity>"
/// (the identity holds tabs of its own: each override ends with one).
std::optional<Manifest> parse_old_manifest(std::string_view text) {
  Lines lines(text);
  const std::optional<std::string_view> base = lines.next();
  if (!base || !base->starts_with("base\t")) return std::nullopt;
  Manifest m;
  m.base = std::string(base->substr(5));
  while (!lines.done()) {
    const std::optional<std::string_view> line = lines.next();
    if (!line) return std::nullopt;
    if (*line == "fits_memory" && m.points.empty() && !m.fits_memory) {
      m.fits_memory = true;
      continue;
    }
    const size_t tab = line->find('\t');
    if (tab == std::string_view::npos || parse_index(line->substr(0, tab)) != m.points.size()) {
      return std::nullopt;
    }
    m.points.push_back({"", std::string(line->substr(tab + 1))});
  }
  return m;
}

}  // namespace

std::optional<Manifest> parse_manifest(std::string_view text, std::string& why) {
  why = "it is not a sweep manifest";
  Lines lines(text);
  const std::optional<std::string_view> magic = lines.next();
  if (magic != kManifestMagic) {
    std::optional<Manifest> old = parse_old_manifest(text);
    if (old) why.clear();
    return old;
  }
  Manifest m;
  const std::optional<std::string> version = keyed(lines.next(), "version");
  const std::optional<std::string> base = keyed(lines.next(), "base");
  if (!version || !base) return std::nullopt;
  m.version = *version;
  m.base = *base;
  while (!lines.done()) {
    const std::optional<std::string_view> line = lines.next();
    if (!line) return std::nullopt;
    if (*line == "fits_memory" && m.points.empty() && !m.fits_memory) {
      m.fits_memory = true;
      continue;
    }
    const auto f = fields(*line, 4);
    if (!f || (*f)[0] != "point" || parse_index((*f)[1]) != m.points.size() ||
        !is_sha256((*f)[2])) {
      return std::nullopt;
    }
    std::optional<std::string> identity = unescape((*f)[3]);
    if (!identity) return std::nullopt;
    m.points.push_back({std::string((*f)[2]), std::move(*identity)});
  }
  why.clear();
  return m;
}

bool same_study(const Manifest& a, const Manifest& b) {
  if (a.base != b.base || a.fits_memory != b.fits_memory || a.points.size() != b.points.size()) {
    return false;
  }
  for (size_t i = 0; i < a.points.size(); ++i) {
    if (a.points[i].identity != b.points[i].identity) return false;
  }
  return true;
}

}  // namespace upsim::cli

#include "tools/layout_records.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

constexpr size_t kDurations = 6;  // iteration, exposed tp / pp / dp / other, bubble
constexpr size_t kRates = 3;      // tokens/s, model TFLOP/s per GPU, MFU

std::string number(double v) {
  return fmt::format("{:.17g}", v);
}

std::string optional_number(const std::optional<double>& v) {
  return v ? number(*v) : std::string("-");
}

bool parse_int(std::string_view text, int64_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_double(std::string_view text, double& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

fs::path layout_record_path(const fs::path& dir, const PointSource& source) {
  return dir / (source.scenario_sha256 + ".layout");
}

std::string format_layout_result(const PlannedLayout& l) {
  if (l.outcome == PlannedLayout::Outcome::kInvalid) return "invalid\t" + l.reason + "\n";
  if (l.outcome == PlannedLayout::Outcome::kMachineLimit) {
    return "machine_limit\t" + l.reason + "\n";
  }
  std::string row;
  for (const Duration d :
       {l.iteration_time, l.exposed_tp, l.exposed_pp, l.exposed_dp, l.exposed_other, l.bubble}) {
    row += fmt::format("{}\t", d.ps());
  }
  row += number(l.tokens_per_s) + "\t" + optional_number(l.model_tflops_per_gpu) + "\t" +
         optional_number(l.mfu) + "\t" + l.resolved_yaml + "\n";
  return row;
}

std::optional<PlannedLayout> parse_layout_result(std::string_view rest, const PlannedLayout& layout,
                                                 std::string& why) {
  PlannedLayout l = layout;
  for (const auto& [prefix, outcome] :
       {std::pair{std::string_view("invalid\t"), PlannedLayout::Outcome::kInvalid},
        std::pair{std::string_view("machine_limit\t"), PlannedLayout::Outcome::kMachineLimit}}) {
    if (rest.starts_with(prefix) && rest.ends_with('\n')) {
      l.outcome = outcome;
      l.reason = std::string(rest.substr(prefix.size(), rest.size() - prefix.size() - 1));
      return l;
    }
  }
  // The fields, then the resolved scenario (which may hold tabs of its own).
  std::vector<std::string_view> fields;
  for (size_t i = 0; i < kDurations + kRates; ++i) {
    const size_t tab = rest.find('\t');
    if (tab == std::string_view::npos) {
      why = "a row with too few fields";
      return std::nullopt;
    }
    fields.push_back(rest.substr(0, tab));
    rest.remove_prefix(tab + 1);
  }
  if (rest.empty() || rest.back() != '\n') {
    why = "a row without its scenario";
    return std::nullopt;
  }
  rest.remove_suffix(1);
  Duration* durations[kDurations] = {&l.iteration_time, &l.exposed_tp,    &l.exposed_pp,
                                     &l.exposed_dp,     &l.exposed_other, &l.bubble};
  for (size_t i = 0; i < kDurations; ++i) {
    int64_t ps = 0;
    if (!parse_int(fields[i], ps)) {
      why = fmt::format("a malformed duration `{}`", fields[i]);
      return std::nullopt;
    }
    *durations[i] = Duration::from_ps(ps);
  }
  std::optional<double>* optionals[2] = {&l.model_tflops_per_gpu, &l.mfu};
  if (!parse_double(fields[kDurations], l.tokens_per_s)) {
    why = fmt::format("a malformed rate `{}`", fields[kDurations]);
    return std::nullopt;
  }
  for (size_t i = 0; i < 2; ++i) {
    const std::string_view f = fields[kDurations + 1 + i];
    if (f == "-") {
      optionals[i]->reset();
      continue;
    }
    double v = 0.0;
    if (!parse_double(f, v)) {
      why = fmt::format("a malformed rate `{}`", f);
      return std::nullopt;
    }
    *optionals[i] = v;
  }
  l.resolved_yaml = std::string(rest);
  l.outcome = PlannedLayout::Outcome::kSimulated;
  l.reason.clear();
  return l;
}

std::string format_layout_record(const PlannedLayout& l, const PointSource& source) {
  RowRecord record;
  record.identity = l.label;
  record.source = source;
  record.row = format_layout_result(l);
  return format_row_record(record);
}

std::optional<PlannedLayout> read_layout_record(const fs::path& path, const PointSource& source,
                                                const PlannedLayout& layout, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "no record";
    return std::nullopt;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::optional<RowRecord> record = parse_row_record(text, why);
  if (!record) return std::nullopt;
  if (record->source.version != source.version) {
    why = fmt::format("written by upsim {}", record->source.version);
    return std::nullopt;
  }
  if (record->source != source) {
    why = "its inputs changed";
    return std::nullopt;
  }
  std::optional<PlannedLayout> l = parse_layout_result(record->row, layout, why);
  if (l && l->outcome != PlannedLayout::Outcome::kSimulated) {
    why = "a record of a layout that was not simulated";
    return std::nullopt;
  }
  return l;
}

}  // namespace upsim::cli

#include "topology/fitting/nccl_tests_output.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim/formats/text.h"
#include "sim/input_file.h"

namespace upsim {
namespace {

struct ProgramName {
  std::string_view name;
  CollectiveKind kind;
};
constexpr ProgramName kPrograms[] = {
    {"all_reduce", CollectiveKind::kAllReduce},         {"all_gather", CollectiveKind::kAllGather},
    {"reduce_scatter", CollectiveKind::kReduceScatter}, {"alltoall", CollectiveKind::kAllToAll},
    {"all_to_all", CollectiveKind::kAllToAll},          {"broadcast", CollectiveKind::kBroadcast},
};

std::vector<std::string_view> split_fields(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
      ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t')
      ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

bool is_whole_number(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

/// Where the columns of the result table are, from the "# size count type ..." header.
struct Columns {
  size_t size = 0;
  size_t count = 0;
  size_t type = 0;
  std::optional<size_t> redop;
  size_t time = 0;  ///< out-of-place time; algbw, busbw follow
  std::optional<size_t> in_place_time;
};

class Parser {
 public:
  Parser(std::string file, const NcclTestsReadOptions& options) : options_(options) {
    log_.file = std::move(file);
  }

  void line(std::string_view text, int number) {
    number_ = number;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    // mpirun --tag-output prefixes every line with "[job,rank]<stdout>:".
    constexpr std::string_view kTag = "]<stdout>:";
    if (!text.empty() && text.front() == '[') {
      const size_t tag = text.find(kTag);
      if (tag != std::string_view::npos) text.remove_prefix(tag + kTag.size());
    }
    const std::vector<std::string_view> fields = split_fields(text);
    if (fields.empty()) return;
    if (fields.front().front() == '#') {
      comment(text.substr(text.find('#') + 1));
    } else if (columns_ && is_whole_number(fields.front())) {
      row(fields);
    }
  }

  NcclTestsLog finish() {
    if (log_.rows.empty()) {
      fail_file(columns_ ? "no result rows after the column header"
                         : "no nccl-tests result table (expected a column header `# size count "
                           "type ... time algbw busbw ...` and rows below it)");
    }
    if (!log_.program.empty()) {
      const auto kind = nccl_tests_collective(log_.program);
      if (options_.kind && *options_.kind != *kind) {
        throw std::runtime_error(fmt::format("{}:{}: the log is of {}, but {} was asked for",
                                             log_.file, program_line_, log_.program,
                                             collective_kind_name(*options_.kind)));
      }
      log_.kind = *kind;
    } else if (options_.kind) {
      log_.kind = *options_.kind;
    } else {
      fail_file(fmt::format(
          "the log does not say which collective it measured (no `# Collective test starting:` "
          "line, printed from nccl-tests 2.16.7 on); give it ({})",
          nccl_tests_collective_names()));
    }
    if (rank_lines_ > 0) {
      if (options_.ranks && *options_.ranks != rank_lines_) {
        throw std::runtime_error(fmt::format("{}:{}: the log lists {} ranks, but {} were expected",
                                             log_.file, first_rank_line_, rank_lines_,
                                             *options_.ranks));
      }
      log_.ranks = rank_lines_;
    } else if (options_.ranks) {
      log_.ranks = *options_.ranks;
    }
    return std::move(log_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(fmt::format("{}:{}: {}", log_.file, number_, what));
  }
  [[noreturn]] void fail_file(const std::string& what) const {
    throw std::runtime_error(fmt::format("{}: {}", log_.file, what));
  }

  void second_run_check(std::string_view what) const {
    if (!log_.rows.empty()) {
      fail(
          fmt::format("{} after result rows: a second nccl-tests run starts here; give one run "
                      "per file",
                      what));
    }
  }

  void comment(std::string_view body) {
    constexpr std::string_view kStarting = "Collective test starting:";
    const size_t starting = body.find(kStarting);
    if (starting != std::string_view::npos) {
      second_run_check("`# Collective test starting:`");
      const auto fields = split_fields(body.substr(starting + kStarting.size()));
      if (fields.empty()) fail("expected a program name after `Collective test starting:`");
      const std::string program(fields.front());
      if (!nccl_tests_collective(program)) {
        fail(fmt::format("unsupported nccl-tests program {}; supported: {}", quoted_field(program),
                         nccl_tests_collective_names()));
      }
      log_.program = program;
      program_line_ = number_;
      return;
    }
    const std::vector<std::string_view> fields = split_fields(body);
    if (fields.empty()) return;
    if (fields[0] == "Rank" && fields.size() >= 2 && is_whole_number(fields[1]) &&
        fields[1].size() <= 9) {
      second_run_check("a `# Rank` line");
      const auto rank = static_cast<uint32_t>(std::stoul(std::string(fields[1])));
      if (rank != rank_lines_) {
        fail(fmt::format("expected the line of rank {}, found rank {}", rank_lines_, rank));
      }
      if (rank_lines_ == 0) first_rank_line_ = number_;
      ++rank_lines_;
      return;
    }
    if ((fields[0] == "size" || fields[0] == "bytes") && fields.size() > 1) header(fields);
  }

  void header(const std::vector<std::string_view>& names) {
    second_run_check("a column header");
    Columns c;
    auto find = [&](std::initializer_list<std::string_view> wanted,
                    size_t from) -> std::optional<size_t> {
      for (size_t i = from; i < names.size(); ++i) {
        for (std::string_view w : wanted) {
          if (names[i] == w) return i;
        }
      }
      return std::nullopt;
    };
    auto need = [&](std::initializer_list<std::string_view> wanted, std::string_view what,
                    size_t from) {
      const auto i = find(wanted, from);
      if (!i) {
        fail(
            fmt::format("column header without a `{}` column; expected nccl-tests' `# size "
                        "count type redop root time algbw busbw #wrong time algbw busbw #wrong`",
                        what));
      }
      return *i;
    };
    c.size = 0;
    c.count = need({"count", "N"}, "count", 1);
    c.type = need({"type"}, "type", 1);
    c.redop = find({"redop", "op"}, 1);
    c.time = need({"time", "cputime"}, "time", 1);
    if (need({"algbw"}, "algbw", c.time) != c.time + 1 ||
        need({"busbw"}, "busbw", c.time) != c.time + 2) {
      fail("expected `algbw busbw` right after the out-of-place `time` column");
    }
    c.in_place_time = find({"time", "cputime"}, c.time + 1);
    columns_ = c;
  }

  int64_t parse_int(std::string_view field, std::string_view column) const {
    if (is_whole_number(field) && field.size() <= 18) return std::stoll(std::string(field));
    fail(fmt::format("column `{}`: expected a whole number, got {}", column, quoted_field(field)));
  }

  double parse_double(std::string_view field, std::string_view column) const {
    const std::string text(field);
    try {
      size_t used = 0;
      const double v = std::stod(text, &used);
      if (used == text.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
    fail(fmt::format("column `{}`: expected a number, got {}", column, quoted_field(field)));
  }

  void row(const std::vector<std::string_view>& fields) {
    const Columns& c = *columns_;
    const size_t needed = c.time + 3;
    if (fields.size() < needed) {
      fail(
          fmt::format("expected at least {} columns (size ... out-of-place time algbw busbw), "
                      "got {}",
                      needed, fields.size()));
    }
    NcclTestsRow r;
    r.line = number_;
    r.bytes = parse_int(fields[c.size], "size");
    r.count = parse_int(fields[c.count], "count");
    r.type = std::string(fields[c.type]);
    if (c.redop) r.redop = std::string(fields[*c.redop]);
    r.time_us = parse_double(fields[c.time], "time");
    if (!(r.time_us > 0.0)) {
      fail(fmt::format("column `time`: expected a positive time in us, got {}",
                       quoted_field(fields[c.time])));
    }
    r.algbw_gbps = parse_double(fields[c.time + 1], "algbw");
    r.busbw_gbps = parse_double(fields[c.time + 2], "busbw");
    if (c.in_place_time && *c.in_place_time < fields.size()) {
      r.in_place_time_us = parse_double(fields[*c.in_place_time], "in-place time");
    }
    log_.rows.push_back(std::move(r));
  }

  NcclTestsReadOptions options_;
  NcclTestsLog log_;
  std::optional<Columns> columns_;
  uint32_t rank_lines_ = 0;
  int first_rank_line_ = 0;
  int program_line_ = 0;
  int number_ = 0;
};

}  // namespace

std::optional<CollectiveKind> nccl_tests_collective(std::string_view program) {
  const size_t slash = program.find_last_of('/');
  if (slash != std::string_view::npos) program.remove_prefix(slash + 1);
  constexpr std::string_view kSuffix = "_perf";
  if (program.size() > kSuffix.size() && program.ends_with(kSuffix)) {
    program.remove_suffix(kSuffix.size());
  }
  for (const ProgramName& p : kPrograms) {
    if (p.name == program) return p.kind;
  }
  return std::nullopt;
}

std::string_view nccl_tests_collective_names() {
  return "all_reduce, all_gather, reduce_scatter, alltoall, broadcast (optionally with _perf)";
}

NcclTestsLog parse_nccl_tests_output(std::string_view text, std::string file,
                                     const NcclTestsReadOptions& options) {
  Parser parser(std::move(file), options);
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    parser.line(text.substr(start, end - start), ++number);
    start = end + 1;
  }
  return parser.finish();
}

NcclTestsLog read_nccl_tests_output(const std::filesystem::path& path,
                                    const NcclTestsReadOptions& options) {
  // nccl-tests logs are kilobytes; a sweep of every size and operation is under a megabyte.
  if (const auto why = input_file_problem(path, 256 * kMiB)) {
    throw std::runtime_error(fmt::format("cannot read {}: {}", path.string(), *why));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_nccl_tests_output(text.str(), path.string(), options);
}

std::vector<MeasuredCollective> measured_points(const NcclTestsLog& log) {
  std::vector<MeasuredCollective> out;
  out.reserve(log.rows.size());
  for (const NcclTestsRow& r : log.rows)
    out.push_back(MeasuredCollective{r.bytes, r.time_us});
  return out;
}

}  // namespace upsim

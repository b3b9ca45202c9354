#include "sim/formats/csv.h"

#include <utility>

#include "sim/formats/parse_error.h"
#include "sim/formats/text.h"

namespace upsim {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

class CsvParser {
 public:
  CsvParser(std::string_view text, const std::string& file, const CsvOptions& options,
            std::vector<CsvComment>* comments)
      : text_(text), file_(file), options_(options), comments_(comments) {}

  std::vector<CsvRecord> records() {
    std::vector<CsvRecord> out;
    while (pos_ < text_.size()) {
      if (skip_line()) continue;
      out.push_back(record());
    }
    return out;
  }

 private:
  /// Whether the line at pos_ (the start of a line) is blank or a comment to skip; if so, moves
  /// past it.
  bool skip_line() {
    const size_t newline = text_.find('\n', pos_);
    const size_t end = newline == std::string_view::npos ? text_.size() : newline;
    std::string_view line = text_.substr(pos_, end - pos_);
    if (line.ends_with('\r')) line.remove_suffix(1);  // the CR of CRLF, or a CR that ends the text
    const std::string_view content = options_.trim_blanks ? trim_blanks(line) : line;
    const bool blank = options_.skip_blank_lines && content.empty();
    const bool comment =
        options_.comment != '\0' && !content.empty() && content.front() == options_.comment;
    if (!blank && !comment) return false;
    if (comment && comments_ != nullptr) comments_->push_back({line_, std::string(line)});
    next_line(newline == std::string_view::npos ? text_.size() : newline + 1);
    return true;
  }

  /// The record that starts at pos_; leaves pos_ at the start of the next line.
  CsvRecord record() {
    CsvRecord r;
    r.line = line_;
    for (;;) {
      if (options_.max_fields != 0 && r.fields.size() == options_.max_fields) {
        fail(line_, column(pos_), "more than " + std::to_string(options_.max_fields) + " fields");
      }
      r.fields.push_back(field());
      if (pos_ == text_.size()) return r;
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      next_line(pos_ + 1);  // text_[pos_] is the record's LF
      return r;
    }
  }

  /// The field that starts at pos_; leaves pos_ at the comma or LF after it, or at the end.
  std::string field() {
    if (options_.trim_blanks) {
      while (pos_ < text_.size() && is_blank(text_[pos_]))
        ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '"') return quoted_field();
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') {
      if (text_[pos_] == '"') {
        fail(line_, column(pos_),
             "a quote inside an unquoted field (quote the whole field and write each quote in it "
             "as \"\")");
      }
      ++pos_;
    }
    std::string_view value = text_.substr(start, pos_ - start);
    if (options_.trim_blanks) {
      value = trim_blanks(value);
    } else if (value.ends_with('\r') && (pos_ == text_.size() || text_[pos_] == '\n')) {
      value.remove_suffix(1);
    }
    return std::string(value);
  }

  /// The quoted field whose opening quote is at pos_.
  std::string quoted_field() {
    const int64_t open_line = line_;
    const int64_t open_column = column(pos_);
    std::string value;
    ++pos_;
    for (;;) {
      const size_t quote = text_.find('"', pos_);
      if (quote == std::string_view::npos) {
        fail(open_line, open_column,
             "unterminated quoted field (the quote that opens it here is never closed)");
      }
      for (size_t i = pos_; i < quote; ++i) {
        if (text_[i] == '\n') start_line(i + 1);
      }
      value.append(text_.substr(pos_, quote - pos_));
      pos_ = quote + 1;
      if (pos_ < text_.size() && text_[pos_] == '"') {
        value.push_back('"');
        ++pos_;
        continue;
      }
      break;
    }
    if (options_.trim_blanks) {
      while (pos_ < text_.size() && is_blank(text_[pos_]))
        ++pos_;
    } else if (pos_ < text_.size() && text_[pos_] == '\r' &&
               (pos_ + 1 == text_.size() || text_[pos_ + 1] == '\n')) {
      ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') {
      fail(line_, column(pos_),
           "text after the closing quote of a quoted field (a quote inside one is written \"\")");
    }
    return value;
  }

  /// Counts the line that starts at `start` (after an LF) as the current one.
  void start_line(size_t start) {
    line_start_ = start;
    ++line_;
  }

  /// Moves to `start`, the first byte of the next line.
  void next_line(size_t start) {
    start_line(start);
    pos_ = start;
  }

  /// The 1-based column of `at`, a byte of the current line.
  int64_t column(size_t at) const { return static_cast<int64_t>(at - line_start_) + 1; }

  [[noreturn]] void fail(int64_t line, int64_t column, std::string message) const {
    throw ParseError(file_, std::move(message), line, column);
  }

  std::string_view text_;
  const std::string& file_;
  const CsvOptions& options_;
  std::vector<CsvComment>* comments_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int64_t line_ = 1;
};

}  // namespace

std::vector<CsvRecord> read_csv(std::string_view text, const std::string& file,
                                const CsvOptions& options) {
  return CsvParser(text, file, options, nullptr).records();
}

std::vector<CsvRecord> read_csv(std::string_view text, const std::string& file,
                                const CsvOptions& options, std::vector<CsvComment>& comments) {
  return CsvParser(text, file, options, &comments).records();
}

}  // namespace upsim

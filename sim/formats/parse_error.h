// ParseError: the one error type of the readers of files (JSON, CSV, protobuf traces) and of what
// is built from them (the trace graph).
//
// Contract: carries the file the problem was found in (as the caller named it), the 1-based line
// and column of the offending input (0 = not a position in the file: e.g. a gzip stream that ends
// early, or a mismatch between two files), and a message. what() is one line:
//   worker3.json.gz:1:88213: traceEvents[412]: expected ',' or '}' after an object member
//   dlrm_eg_0.json: execution trace does not belong to worker0.json (pid 59811 vs 59812, ...)
// The readers never crash or assert on bad input; everything they reject is a ParseError.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace upsim {

class ParseError : public std::runtime_error {
 public:
  ParseError(std::string file, std::string message, int64_t line = 0, int64_t column = 0)
      : std::runtime_error(format(file, line, column, message)),
        file_(std::move(file)),
        line_(line),
        column_(column),
        message_(std::move(message)) {}

  const std::string& file() const { return file_; }
  int64_t line() const { return line_; }
  int64_t column() const { return column_; }
  /// The message without the location prefix.
  const std::string& message() const { return message_; }

 private:
  static std::string format(const std::string& file, int64_t line, int64_t column,
                            const std::string& message) {
    std::string out = file;
    if (line > 0) {
      out.append(":").append(std::to_string(line));
      out.append(":").append(std::to_string(column));
    }
    out.append(": ").append(message);
    return out;
  }

  std::string file_;
  int64_t line_;
  int64_t column_;
  std::string message_;
};

}  // namespace upsim

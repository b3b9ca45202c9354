// The members of a JSON object and microsecond times, as the trace exporters write them (the
// Chrome trace, sim/export/chrome_trace_writer.h; the Kineto traces,
// sim/export/kineto_trace_writer.h).
//
// Contract:
//  - JsonMembers appends `"key":value` pairs to a caller's string, separated by commas and
//    without spaces; the caller writes the braces. Strings are escaped by append_json_escaped
//    (sim/export/json_text.h).
//  - Times are microseconds printed with exactly six decimals from an integer picosecond count
//    (1'500'000 ps -> 1.500000; negative counts get a leading "-"): no floating point, no locale.
//  - Integers are printed in full; reals as the shortest decimal that reads back to the same
//    double (fmt), and null when not finite, which JSON cannot hold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace upsim {

/// Appends `ps` picoseconds as microseconds with exactly six decimals ("-" for negative).
void append_us(std::string& out, int64_t ps);

/// Appends `text` as a JSON string literal, quotes included.
void append_json_string(std::string& out, std::string_view text);

class JsonMembers {
 public:
  explicit JsonMembers(std::string& out) : out_(out) {}

  JsonMembers& str(std::string_view key, std::string_view value);
  /// A string value that is `prefix` followed by `value`.
  JsonMembers& str(std::string_view key, std::string_view prefix, std::string_view value);
  JsonMembers& integer(std::string_view key, int64_t value);
  JsonMembers& uinteger(std::string_view key, uint64_t value);
  /// Shortest round-trip decimal (locale-free); null when not finite.
  JsonMembers& real(std::string_view key, double value);
  JsonMembers& boolean(std::string_view key, bool value);
  /// `ps` picoseconds as microseconds (append_us).
  JsonMembers& us(std::string_view key, int64_t ps);
  /// Starts a nested object value; close it with `out += '}'`.
  std::string& object(std::string_view key);

 private:
  void key(std::string_view k);

  std::string& out_;
  bool first_ = true;
};

}  // namespace upsim

// A fast, validating pull reader for JSON text, and a small owned document model on top of it.
//
// Contract:
//  - JsonCursor reads a text it does not own (the caller keeps it alive) front to back; the caller
//    drives it with the structure it expects (begin_object / next_member / ..., or skip()).
//    Nothing is allocated per value except when a string holds escapes (decoded into a scratch
//    buffer) — this is what makes 200 MB Kineto traces cheap to read.
//  - Every syntax error, premature end of input and type mismatch throws ParseError naming the
//    file, the 1-based line and column, and what was expected. Nesting deeper than kMaxDepth is
//    an error, not a stack overflow.
//  - Numbers are handed out as their raw text (number()) or converted (integer(), real());
//    decimal_us_to_ps() converts a microsecond decimal such as Kineto's "ts": 1694128201428473.125
//    to picoseconds without going through floating point, so sub-microsecond digits survive.
//  - JsonValue is an owned tree for small documents (execution-trace nodes, args objects).
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace upsim {

enum class JsonType : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
std::string_view json_type_name(JsonType type);

class JsonCursor {
 public:
  static constexpr int kMaxDepth = 256;

  /// `file` names the input in error messages.
  JsonCursor(std::string_view text, std::string file);

  /// Type of the next value (skips whitespace). Throws at the end of the input.
  JsonType peek();
  /// True when only whitespace remains.
  bool at_end();

  void begin_object();
  /// Moves to the next member of the current object: true and its key, or false after the
  /// closing brace. The key view is valid until the next string read.
  bool next_member(std::string_view& key);
  void begin_array();
  /// True if another element follows (positioned on it), false after the closing bracket.
  bool next_element();

  /// A string value, unescaped. Valid until the next string read.
  std::string_view string();
  /// The raw text of a number value.
  std::string_view number();
  int64_t integer();
  double real();
  bool boolean();
  void null();
  /// Skips one value of any type, validating it.
  void skip();
  /// Skips one value and returns its raw text (re-readable with another JsonCursor).
  std::string_view raw_value();

  /// Byte offset of the next unread character.
  size_t offset() const { return pos_; }
  const std::string& file() const { return file_; }
  /// Throws ParseError at the current position.
  [[noreturn]] void fail(std::string_view message) const;
  /// Throws ParseError at byte `offset` of the input.
  [[noreturn]] void fail_at(size_t offset, std::string_view message) const;

 private:
  void skip_ws();
  char next_char();  // skips whitespace; throws at end of input
  void expect(char c, std::string_view what);
  std::string_view read_string_body();  // after the opening quote
  void skip_value(int depth);

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  // One entry per open container: true until its first element/member was read.
  std::vector<bool> first_;
  std::string scratch_;
};

struct JsonMember;

/// An owned JSON value.
struct JsonValue {
  JsonType type = JsonType::kNull;
  bool boolean = false;
  bool is_integer = false;  ///< kNumber: the text was an integer that fits int64_t
  int64_t integer = 0;
  double number = 0.0;
  std::string string;
  std::vector<JsonValue> items;     ///< kArray
  std::vector<JsonMember> members;  ///< kObject, in file order

  bool is_string() const { return type == JsonType::kString; }
  bool is_array() const { return type == JsonType::kArray; }
  bool is_object() const { return type == JsonType::kObject; }
  bool is_number() const { return type == JsonType::kNumber; }
  /// kObject: the member named `key`, or nullptr.
  const JsonValue* find(std::string_view key) const;
};

/// One member of a JSON object. (A named struct, not std::pair<std::string, JsonValue>: a pair
/// of a type still being defined is ill-formed, which clang rejects.)
struct JsonMember {
  std::string key;
  JsonValue value;
};

/// Reads one value at the cursor into an owned tree.
JsonValue read_json_value(JsonCursor& cursor);

/// Microseconds written as a JSON number, split so that epoch timestamps (~1.7e15 us, beyond
/// int64_t picoseconds) stay exact: value in ps = whole_us * 1'000'000 + sub_us_ps, both parts
/// carrying the sign of the value, |sub_us_ps| < 1'000'000. Digits below 1 ps are rounded half
/// away from zero. Exponent forms are accepted through double. Returns false if `text` is not a
/// number.
struct DecimalMicros {
  int64_t whole_us = 0;
  int64_t sub_us_ps = 0;
};
bool decimal_us_to_ps(std::string_view text, DecimalMicros& out);

/// value = value x 10 + (digit - '0') for a digit '0'..'9' and value >= 0; false, with value
/// unchanged, when the result would pass int64 (digit strings in traces are unbounded text).
inline bool append_decimal_digit(int64_t& value, char digit) {
  const int64_t d = digit - '0';
  if (value > (INT64_MAX - d) / 10) return false;
  value = value * 10 + d;
  return true;
}

}  // namespace upsim

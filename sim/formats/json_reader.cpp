#include "sim/formats/json_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "sim/formats/parse_error.h"
#include "sim/formats/text.h"

namespace upsim {

std::string_view json_type_name(JsonType type) {
  switch (type) {
    case JsonType::kNull:
      return "null";
    case JsonType::kBool:
      return "a boolean";
    case JsonType::kNumber:
      return "a number";
    case JsonType::kString:
      return "a string";
    case JsonType::kArray:
      return "an array";
    case JsonType::kObject:
      return "an object";
  }
  return "?";
}

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/// True when `t` is a number as RFC 8259 writes one: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool is_json_number(std::string_view t) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9')
      ++i;
    return i > from;
  };
  if (i < t.size() && t[i] == '-') ++i;
  if (i < t.size() && t[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

JsonCursor::JsonCursor(std::string_view text, std::string file)
    : text_(text), file_(std::move(file)) {}

void JsonCursor::fail_at(size_t offset, std::string_view message) const {
  int64_t line = 1;
  int64_t column = 1;
  const size_t end = std::min(offset, text_.size());
  for (size_t i = 0; i < end; ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  std::string msg(message);
  if (offset >= text_.size()) msg += " (the input ends here: truncated file?)";
  throw ParseError(file_, msg, line, column);
}

void JsonCursor::fail(std::string_view message) const {
  fail_at(pos_, message);
}

void JsonCursor::skip_ws() {
  const char* p = text_.data() + pos_;
  const char* end = text_.data() + text_.size();
  while (p < end && is_ws(*p))
    ++p;
  pos_ = static_cast<size_t>(p - text_.data());
}

bool JsonCursor::at_end() {
  skip_ws();
  return pos_ >= text_.size();
}

char JsonCursor::next_char() {
  skip_ws();
  if (pos_ >= text_.size()) fail("unexpected end of input");
  return text_[pos_];
}

void JsonCursor::expect(char c, std::string_view what) {
  if (next_char() != c) fail(std::string("expected ") + std::string(what));
  ++pos_;
}

JsonType JsonCursor::peek() {
  const char c = next_char();
  switch (c) {
    case '{':
      return JsonType::kObject;
    case '[':
      return JsonType::kArray;
    case '"':
      return JsonType::kString;
    case 't':
    case 'f':
      return JsonType::kBool;
    case 'n':
      return JsonType::kNull;
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return JsonType::kNumber;
      // The character is not quoted: the file may be of any kind (and any byte).
      fail(
          "not JSON here: expected a value (an object, array, string, number, true, false or "
          "null)");
  }
}

void JsonCursor::begin_object() {
  expect('{', "an object ('{')");
  if (first_.size() >= kMaxDepth) fail("nesting deeper than 256 levels");
  first_.push_back(true);
}

bool JsonCursor::next_member(std::string_view& key) {
  char c = next_char();
  if (c == '}') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) {
    if (c != ',') fail("expected ',' or '}' after an object member");
    ++pos_;
    c = next_char();
  }
  first_.back() = false;
  if (c != '"') fail("expected a member name (a string)");
  ++pos_;
  key = read_string_body();
  expect(':', "':' after a member name");
  return true;
}

void JsonCursor::begin_array() {
  expect('[', "an array ('[')");
  if (first_.size() >= kMaxDepth) fail("nesting deeper than 256 levels");
  first_.push_back(true);
}

bool JsonCursor::next_element() {
  const char c = next_char();
  if (c == ']') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) {
    if (c != ',') fail("expected ',' or ']' after an array element");
    ++pos_;
    if (next_char() == ']') fail("trailing ',' before ']'");
  }
  first_.back() = false;
  return true;
}

std::string_view JsonCursor::read_string_body() {
  const char* begin = text_.data() + pos_;
  const char* end = text_.data() + text_.size();
  const char* p = begin;
  // Fast path: no escapes.
  while (p < end && *p != '"' && *p != '\\') {
    if (static_cast<unsigned char>(*p) < 0x20) {
      fail_at(static_cast<size_t>(p - text_.data()), "control character inside a string");
    }
    ++p;
  }
  if (p >= end) fail_at(text_.size(), "unterminated string");
  if (*p == '"') {
    pos_ = static_cast<size_t>(p + 1 - text_.data());
    return std::string_view(begin, static_cast<size_t>(p - begin));
  }
  scratch_.assign(begin, p);
  while (true) {
    if (p >= end) fail_at(text_.size(), "unterminated string");
    const char c = *p;
    if (c == '"') break;
    if (c != '\\') {
      if (static_cast<unsigned char>(c) < 0x20) {
        fail_at(static_cast<size_t>(p - text_.data()), "control character inside a string");
      }
      scratch_ += c;
      ++p;
      continue;
    }
    if (p + 1 >= end) fail_at(text_.size(), "unterminated string");
    const char e = p[1];
    p += 2;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        scratch_ += e;
        break;
      case 'b':
        scratch_ += '\b';
        break;
      case 'f':
        scratch_ += '\f';
        break;
      case 'n':
        scratch_ += '\n';
        break;
      case 'r':
        scratch_ += '\r';
        break;
      case 't':
        scratch_ += '\t';
        break;
      case 'u': {
        auto read_hex4 = [&](const char* q) -> int32_t {
          if (end - q < 4) return -1;
          int32_t v = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = hex_value(q[i]);
            if (h < 0) return -1;
            v = v * 16 + h;
          }
          return v;
        };
        int32_t cp = read_hex4(p);
        if (cp < 0) fail_at(static_cast<size_t>(p - text_.data()), "bad \\u escape");
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
          const int32_t lo = read_hex4(p + 2);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          }
        }
        append_utf8(scratch_, static_cast<uint32_t>(cp));
        break;
      }
      default:
        fail_at(static_cast<size_t>(p - 1 - text_.data()), "bad escape in a string");
    }
  }
  pos_ = static_cast<size_t>(p + 1 - text_.data());
  return scratch_;
}

std::string_view JsonCursor::string() {
  if (next_char() != '"')
    fail(std::string("expected a string, got ") + std::string(json_type_name(peek())));
  ++pos_;
  return read_string_body();
}

std::string_view JsonCursor::number() {
  const char c = next_char();
  if (c != '-' && (c < '0' || c > '9')) {
    fail(std::string("expected a number, got ") + std::string(json_type_name(peek())));
  }
  const size_t begin = pos_;
  const char* p = text_.data() + pos_;
  const char* end = text_.data() + text_.size();
  while (p < end && is_number_char(*p))
    ++p;
  const std::string_view text = text_.substr(begin, static_cast<size_t>(p - text_.data()) - begin);
  if (!is_json_number(text)) fail("malformed number " + quoted_field(text));
  pos_ = static_cast<size_t>(p - text_.data());
  return text;
}

int64_t JsonCursor::integer() {
  const size_t at = (skip_ws(), pos_);
  const std::string_view text = number();
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && ptr == text.data() + text.size()) return v;
  // Integral values written with a fraction or exponent ("3.0", "1e3") are accepted.
  double d = 0.0;
  const auto [dptr, dec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (dec == std::errc() && dptr == text.data() + text.size() && std::isfinite(d) &&
      d == std::floor(d) && std::fabs(d) < 9.2e18) {
    return static_cast<int64_t>(d);
  }
  fail_at(at, "expected an integer, got " + quoted_field(text));
}

double JsonCursor::real() {
  const size_t at = (skip_ws(), pos_);
  const std::string_view text = number();
  double d = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    fail_at(at, "malformed number " + quoted_field(text));
  }
  return d;
}

bool JsonCursor::boolean() {
  const char c = next_char();
  if (c == 't' && text_.substr(pos_, 4) == "true") {
    pos_ += 4;
    return true;
  }
  if (c == 'f' && text_.substr(pos_, 5) == "false") {
    pos_ += 5;
    return false;
  }
  fail("expected true or false");
}

void JsonCursor::null() {
  if (next_char() != 'n' || text_.substr(pos_, 4) != "null") fail("expected null");
  pos_ += 4;
}

void JsonCursor::skip_value(int depth) {
  if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
  switch (peek()) {
    case JsonType::kObject: {
      ++pos_;
      bool first = true;
      while (true) {
        char c = next_char();
        if (c == '}') {
          ++pos_;
          return;
        }
        if (!first) {
          if (c != ',') fail("expected ',' or '}' after an object member");
          ++pos_;
          c = next_char();
        }
        first = false;
        if (c != '"') fail("expected a member name (a string)");
        ++pos_;
        read_string_body();
        expect(':', "':' after a member name");
        skip_value(depth + 1);
      }
    }
    case JsonType::kArray: {
      ++pos_;
      bool first = true;
      while (true) {
        const char c = next_char();
        if (c == ']') {
          ++pos_;
          return;
        }
        if (!first) {
          if (c != ',') fail("expected ',' or ']' after an array element");
          ++pos_;
          if (next_char() == ']') fail("trailing ',' before ']'");
        }
        first = false;
        skip_value(depth + 1);
      }
    }
    case JsonType::kString:
      ++pos_;
      read_string_body();
      return;
    case JsonType::kNumber:
      number();
      return;
    case JsonType::kBool:
      boolean();
      return;
    case JsonType::kNull:
      null();
      return;
  }
}

void JsonCursor::skip() {
  skip_value(static_cast<int>(first_.size()));
}

std::string_view JsonCursor::raw_value() {
  skip_ws();
  const size_t begin = pos_;
  skip();
  return text_.substr(begin, pos_ - begin);
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

JsonValue read_value(JsonCursor& cursor, int depth) {
  if (depth > JsonCursor::kMaxDepth) cursor.fail("nesting deeper than 256 levels");
  JsonValue v;
  v.type = cursor.peek();
  switch (v.type) {
    case JsonType::kNull:
      cursor.null();
      break;
    case JsonType::kBool:
      v.boolean = cursor.boolean();
      break;
    case JsonType::kString:
      v.string = std::string(cursor.string());
      break;
    case JsonType::kNumber: {
      const std::string_view text = cursor.number();
      const char* end = text.data() + text.size();
      int64_t i = 0;
      const auto [iptr, iec] = std::from_chars(text.data(), end, i);
      if (iec == std::errc() && iptr == end) {
        v.is_integer = true;
        v.integer = i;
        v.number = static_cast<double>(i);
      } else {
        double d = 0.0;
        const auto [dptr, dec] = std::from_chars(text.data(), end, d);
        if (dptr != end || (dec != std::errc() && dec != std::errc::result_out_of_range)) {
          cursor.fail_at(cursor.offset() - text.size(), "malformed number " + quoted_field(text));
        }
        v.number = d;
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
          v.integer = static_cast<int64_t>(d);
        }
      }
      break;
    }
    case JsonType::kArray:
      cursor.begin_array();
      while (cursor.next_element())
        v.items.push_back(read_value(cursor, depth + 1));
      break;
    case JsonType::kObject: {
      cursor.begin_object();
      std::string_view key;
      while (cursor.next_member(key)) {
        std::string k(key);
        v.members.push_back(JsonMember{std::move(k), read_value(cursor, depth + 1)});
      }
      break;
    }
  }
  return v;
}

}  // namespace

JsonValue read_json_value(JsonCursor& cursor) {
  return read_value(cursor, 0);
}

bool decimal_us_to_ps(std::string_view text, DecimalMicros& out) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') {
    negative = true;
    ++i;
  }
  const size_t digits_begin = i;
  int64_t whole = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (whole > (INT64_MAX - 9) / 10) return false;
    whole = whole * 10 + (text[i] - '0');
    ++i;
  }
  if (i == digits_begin) return false;
  int64_t frac = 0;  // picoseconds below the whole microsecond
  if (i < text.size() && text[i] == '.') {
    ++i;
    int kept = 0;  // fractional digits kept: six of them are picoseconds
    bool round_up = false;
    const size_t frac_begin = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      const int d = text[i] - '0';
      if (kept < 6) {
        frac = frac * 10 + d;
        ++kept;
      } else if (kept == 6) {
        round_up = d >= 5;  // the first digit below 1 ps decides the rounding
        ++kept;
      }
      ++i;
    }
    if (i == frac_begin) return false;
    for (int k = std::min(kept, 6); k < 6; ++k)
      frac *= 10;
    if (round_up) ++frac;
    if (frac >= 1'000'000) {
      frac -= 1'000'000;
      ++whole;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    double d = 0.0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(d)) return false;
    const double whole_d = std::trunc(d);
    if (std::fabs(whole_d) > 9.2e18) return false;
    out.whole_us = static_cast<int64_t>(whole_d);
    out.sub_us_ps = std::llround((d - whole_d) * 1e6);
    return true;
  }
  if (i != text.size()) return false;
  out.whole_us = negative ? -whole : whole;
  out.sub_us_ps = negative ? -frac : frac;
  return true;
}

}  // namespace upsim

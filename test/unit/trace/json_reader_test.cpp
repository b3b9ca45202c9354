#include "sim/formats/json_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/formats/parse_error.h"

namespace upsim {
namespace {

DecimalMicros us(std::string_view text) {
  DecimalMicros d;
  EXPECT_TRUE(decimal_us_to_ps(text, d)) << text;
  return d;
}

int64_t ps(std::string_view text) {
  const DecimalMicros d = us(text);
  return d.whole_us * 1'000'000 + d.sub_us_ps;
}

TEST(DecimalMicros, keeps_sub_microsecond_digits_exactly) {
  EXPECT_EQ(ps("12"), 12'000'000);
  EXPECT_EQ(ps("12.5"), 12'500'000);
  EXPECT_EQ(ps("0.000001"), 1);
  EXPECT_EQ(ps("3.1234565"), 3'123'457);  // the 7th fractional digit rounds
  EXPECT_EQ(ps("3.1234564"), 3'123'456);
  EXPECT_EQ(ps("-1.25"), -1'250'000);
  EXPECT_EQ(ps("1.5e1"), 15'000'000);
}

TEST(DecimalMicros, epoch_timestamps_do_not_overflow) {
  const DecimalMicros d = us("1694128201428473.125");
  EXPECT_EQ(d.whole_us, 1694128201428473);
  EXPECT_EQ(d.sub_us_ps, 125'000);
  DecimalMicros bad;
  EXPECT_FALSE(decimal_us_to_ps("abc", bad));
  EXPECT_FALSE(decimal_us_to_ps("1.", bad));
  EXPECT_FALSE(decimal_us_to_ps("", bad));
}

TEST(JsonCursor, reads_nested_values_and_escapes) {
  const std::string text =
      R"({"a": [1, -2.5, true, null, "x\"y\u00e9\n"], "b": {"c": {}}, "d": []})";
  JsonCursor cur(text, "t.json");
  cur.begin_object();
  std::string_view key;
  ASSERT_TRUE(cur.next_member(key));
  EXPECT_EQ(key, "a");
  cur.begin_array();
  ASSERT_TRUE(cur.next_element());
  EXPECT_EQ(cur.integer(), 1);
  ASSERT_TRUE(cur.next_element());
  EXPECT_DOUBLE_EQ(cur.real(), -2.5);
  ASSERT_TRUE(cur.next_element());
  EXPECT_TRUE(cur.boolean());
  ASSERT_TRUE(cur.next_element());
  cur.null();
  ASSERT_TRUE(cur.next_element());
  EXPECT_EQ(cur.string(), "x\"y\xc3\xa9\n");
  EXPECT_FALSE(cur.next_element());
  ASSERT_TRUE(cur.next_member(key));
  EXPECT_EQ(key, "b");
  EXPECT_EQ(cur.raw_value(), R"({"c": {}})");
  ASSERT_TRUE(cur.next_member(key));
  const JsonValue d = read_json_value(cur);
  EXPECT_TRUE(d.is_array());
  EXPECT_FALSE(cur.next_member(key));
  EXPECT_TRUE(cur.at_end());
}

TEST(JsonCursor, value_tree_keeps_integers_and_members_in_order) {
  const std::string text = R"({"z": 94594108284448, "a": [1.5, "s"], "n": null})";
  JsonCursor cur(text, "t.json");
  const JsonValue v = read_json_value(cur);
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].key, "z");
  EXPECT_TRUE(v.find("z")->is_integer);
  EXPECT_EQ(v.find("z")->integer, 94594108284448);
  EXPECT_DOUBLE_EQ(v.find("a")->items[0].number, 1.5);
  EXPECT_EQ(v.find("a")->items[1].string, "s");
  EXPECT_EQ(v.find("n")->type, JsonType::kNull);
  EXPECT_EQ(v.find("missing"), nullptr);
}

/// The ParseError what() of parsing `text` by skipping one value.
std::string skip_error(const std::string& text) {
  JsonCursor cur(text, "bad.json");
  try {
    cur.skip();
    if (!cur.at_end()) cur.fail("trailing text");
  } catch (const ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonCursor, syntax_errors_name_file_line_and_column) {
  EXPECT_EQ(skip_error("{\n  \"a\": 1\n  \"b\": 2\n}"),
            "bad.json:3:3: expected ',' or '}' after an object member");
  EXPECT_EQ(skip_error("[1, 2,]"), "bad.json:1:7: trailing ',' before ']'");
  EXPECT_EQ(skip_error("[1.2.3]"), "bad.json:1:2: malformed number `1.2.3`");
  EXPECT_EQ(skip_error("\"abc"),
            "bad.json:1:5: unterminated string (the input ends here: "
            "truncated file?)");
  EXPECT_EQ(skip_error("{\"a\": [1, 2"),
            "bad.json:1:12: unexpected end of input (the input ends here: truncated file?)");
  EXPECT_EQ(skip_error("{\"a\": tru}"), "bad.json:1:7: expected true or false");
  EXPECT_EQ(skip_error(""),
            "bad.json:1:1: unexpected end of input (the input ends here: "
            "truncated file?)");
}

TEST(JsonCursor, deep_nesting_is_an_error_not_a_crash) {
  const std::string deep(100'000, '[');
  EXPECT_NE(skip_error(deep).find("nesting deeper than 256 levels"), std::string::npos);
  JsonCursor cur(deep, "deep.json");
  EXPECT_THROW(read_json_value(cur), ParseError);
}

TEST(JsonCursor, skipped_values_are_checked_like_read_ones) {
  EXPECT_EQ(skip_error(R"({"a": {"b": [1, 2 3]}})"),
            "bad.json:1:19: expected ',' or ']' after an array element");
  EXPECT_EQ(skip_error(R"({"a": nul})"), "bad.json:1:7: expected null");
  EXPECT_NE(skip_error(R"({"a": "\q"})").find("bad.json:1:"), std::string::npos);
  EXPECT_NE(skip_error("{\"a\": \"x\ty\"}").find("bad.json:1:"), std::string::npos);
  // RFC 8259 numbers only: no leading zero, a digit after the point and in the exponent.
  EXPECT_EQ(skip_error(R"({"a": 01})"), "bad.json:1:7: malformed number `01`");
  EXPECT_EQ(skip_error(R"([1., 2])"), "bad.json:1:2: malformed number `1.`");
  EXPECT_EQ(skip_error(R"([1e+])"), "bad.json:1:2: malformed number `1e+`");
}

TEST(JsonCursor, type_mismatches_are_errors) {
  JsonCursor cur(R"({"a": "x"})", "t.json");
  cur.begin_object();
  std::string_view key;
  ASSERT_TRUE(cur.next_member(key));
  try {
    cur.integer();
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()), "t.json:1:7: expected a number, got a string");
    EXPECT_EQ(e.file(), "t.json");
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 7);
  }
}

}  // namespace
}  // namespace upsim

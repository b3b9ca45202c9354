#include "sim/export/json_text.h"

#include <gtest/gtest.h>

#include <string>

namespace upsim {
namespace {

TEST(JsonText, QuotesAndEscapesPerRfc8259) {
  EXPECT_EQ(json_quoted("plain"), "\"plain\"");
  EXPECT_EQ(json_quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quoted("l\nr\rt\t"), "\"l\\nr\\rt\\t\"");
  EXPECT_EQ(json_quoted(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
}

TEST(JsonText, Utf8PassesThroughAndAppendAddsNoQuotes) {
  std::string out = "x";
  append_json_escaped(out, "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(out, "x\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(json_quoted(""), "\"\"");
}

}  // namespace
}  // namespace upsim

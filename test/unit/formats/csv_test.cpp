// sim/formats/csv.h: RFC 4180 records, the options the readers use, and the positions of errors.
#include "sim/formats/csv.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/formats/parse_error.h"

namespace upsim {
namespace {

using Fields = std::vector<std::string>;

/// The fields of each record of `text`.
std::vector<Fields> fields_of(std::string_view text, const CsvOptions& options = {}) {
  std::vector<Fields> out;
  for (CsvRecord& r : read_csv(text, "t.csv", options))
    out.push_back(std::move(r.fields));
  return out;
}

std::vector<int64_t> lines_of(std::string_view text, const CsvOptions& options = {}) {
  std::vector<int64_t> out;
  for (const CsvRecord& r : read_csv(text, "t.csv", options))
    out.push_back(r.line);
  return out;
}

ParseError error_of(std::string_view text, const CsvOptions& options = {}) {
  try {
    (void)read_csv(text, "t.csv", options);
  } catch (const ParseError& e) {
    return e;
  }
  ADD_FAILURE() << "no ParseError for: " << text;
  return ParseError("", "");
}

TEST(Csv, FieldsAreSplitAtCommas) {
  EXPECT_EQ(fields_of("a,b,c\n1,2,3\n"), (std::vector<Fields>{{"a", "b", "c"}, {"1", "2", "3"}}));
  EXPECT_EQ(fields_of("a"), (std::vector<Fields>{{"a"}}));
  EXPECT_TRUE(fields_of("").empty());
}

TEST(Csv, EmptyFieldsAreKept) {
  EXPECT_EQ(fields_of(",a,,\n"), (std::vector<Fields>{{"", "a", "", ""}}));
  EXPECT_EQ(fields_of(","), (std::vector<Fields>{{"", ""}}));
  EXPECT_EQ(fields_of("\"\",x"), (std::vector<Fields>{{"", "x"}}));
}

TEST(Csv, TheLastLineBreakIsOptional) {
  EXPECT_EQ(fields_of("a,b\n1,2"), fields_of("a,b\n1,2\n"));
  EXPECT_EQ(fields_of("a,b\r\n1,2"), fields_of("a,b\r\n1,2\r\n"));
  EXPECT_EQ(fields_of("a,b\n1,2\n").size(), 2u);  // no empty record after the last line break
}

TEST(Csv, RecordsEndAtLfOrCrlf) {
  const std::vector<Fields> expected{{"a", "b"}, {"1", "2"}, {"3", ""}};
  EXPECT_EQ(fields_of("a,b\r\n1,2\r\n3,\r\n"), expected);
  EXPECT_EQ(fields_of("a,b\n1,2\r\n3,"), expected);
  EXPECT_EQ(fields_of("\"a\",b\r\n1,\"2\"\r\n3,\"\"\r"), expected);  // a CR that ends the text
}

TEST(Csv, ACrThatIsNotALineBreakIsText) {
  EXPECT_EQ(fields_of("a\rb,c\r\r\n"), (std::vector<Fields>{{"a\rb", "c\r"}}));
}

TEST(Csv, QuotedFieldsHoldCommasQuotesAndLineBreaks) {
  EXPECT_EQ(fields_of("\"a,b\",c\n"), (std::vector<Fields>{{"a,b", "c"}}));
  EXPECT_EQ(fields_of("\"say \"\"hi\"\"\",\"\"\"\"\n"),
            (std::vector<Fields>{{"say \"hi\"", "\""}}));
  EXPECT_EQ(fields_of("\"two\nlines\",x\n\"crlf\r\nkept\"\n"),
            (std::vector<Fields>{{"two\nlines", "x"}, {"crlf\r\nkept"}}));
  EXPECT_EQ(fields_of("\" padded \""), (std::vector<Fields>{{" padded "}}));
}

TEST(Csv, RecordsKnowTheLineTheyStartOn) {
  EXPECT_EQ(lines_of("h\n\"a\nb\nc\",1\nnext\n"), (std::vector<int64_t>{1, 2, 5}));
  EXPECT_EQ(lines_of("h\r\n\r\nx\r\n"), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Csv, ABlankLineIsOneEmptyFieldUnlessSkipped) {
  EXPECT_EQ(fields_of("a\n\nb\n"), (std::vector<Fields>{{"a"}, {""}, {"b"}}));
  CsvOptions skip;
  skip.skip_blank_lines = true;
  EXPECT_EQ(fields_of("a\n\n\r\nb\n", skip), (std::vector<Fields>{{"a"}, {"b"}}));
  EXPECT_EQ(lines_of("a\n\n\r\nb\n", skip), (std::vector<int64_t>{1, 4}));
  // Without trimming, a line of blanks is a record.
  EXPECT_EQ(fields_of("a\n \nb\n", skip), (std::vector<Fields>{{"a"}, {" "}, {"b"}}));
}

TEST(Csv, BlanksAreTextUnlessTrimmed) {
  EXPECT_EQ(fields_of(" a , b\t\n"), (std::vector<Fields>{{" a ", " b\t"}}));
  CsvOptions trim;
  trim.trim_blanks = true;
  trim.skip_blank_lines = true;
  EXPECT_EQ(fields_of(" a , b\t\r\n \t \n 1,2 ,\t\n", trim),
            (std::vector<Fields>{{"a", "b"}, {"1", "2", ""}}));
  // Blanks around the quotes go, blanks inside them stay.
  EXPECT_EQ(fields_of("  \" x \" \t, y\n", trim), (std::vector<Fields>{{" x ", "y"}}));
  // Inside an unquoted field blanks are kept.
  EXPECT_EQ(fields_of(" 0.19 ms ,1\n", trim), (std::vector<Fields>{{"0.19 ms", "1"}}));
}

TEST(Csv, CommentLinesAreSkippedAndReported) {
  CsvOptions options;
  options.comment = '#';
  options.skip_blank_lines = true;
  std::vector<CsvComment> comments;
  const std::vector<CsvRecord> records = read_csv(
      "# gpu: \"H100\n"
      "a,b\n"
      "\"#x\",y\n"
      "# second\r\n"
      "1,\"2\n#3\"\n",
      "t.csv", options, comments);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].fields, (Fields{"a", "b"}));
  EXPECT_EQ(records[1].fields, (Fields{"#x", "y"}));     // a quoted # is a field
  EXPECT_EQ(records[2].fields, (Fields{"1", "2\n#3"}));  // inside quotes, # starts no comment
  EXPECT_EQ(records[2].line, 5);
  ASSERT_EQ(comments.size(), 2u);
  EXPECT_EQ(comments[0].line, 1);
  EXPECT_EQ(comments[0].text, "# gpu: \"H100");  // its quote is not read as CSV
  EXPECT_EQ(comments[1].line, 4);
  EXPECT_EQ(comments[1].text, "# second");
  // Without trimming, only a # in the first column starts a comment.
  EXPECT_EQ(fields_of(" # x\n", options), (std::vector<Fields>{{" # x"}}));
  options.trim_blanks = true;
  EXPECT_TRUE(fields_of(" \t# x\n", options).empty());
  // Without the option, # is text.
  EXPECT_EQ(fields_of("# x\n"), (std::vector<Fields>{{"# x"}}));
}

TEST(Csv, AByteOrderMarkIsPartOfTheFirstField) {
  const std::string bom = "\xEF\xBB\xBF";
  EXPECT_EQ(fields_of(bom + "a,b\n"), (std::vector<Fields>{{bom + "a", "b"}}));
}

TEST(Csv, AnUnterminatedQuoteIsReportedWhereItOpens) {
  const ParseError e = error_of("a,b\n1,\"two\nlines\n");
  EXPECT_EQ(e.file(), "t.csv");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 3);
  EXPECT_EQ(std::string(e.what()),
            "t.csv:2:3: unterminated quoted field (the quote that opens it here is never closed)");
  EXPECT_EQ(error_of("\"").column(), 1);
  EXPECT_EQ(error_of("x,\"a\"\"").line(), 1);
}

TEST(Csv, TextAfterAClosingQuoteIsAnError) {
  const ParseError e = error_of("a\n\"x\"y,z\n");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 4);
  EXPECT_NE(e.message().find("text after the closing quote"), std::string::npos) << e.what();
  EXPECT_EQ(error_of("\"a\" ,b").column(), 4);  // blanks too, unless trimmed
  CsvOptions trim;
  trim.trim_blanks = true;
  EXPECT_EQ(fields_of("\"a\" ,b", trim), (std::vector<Fields>{{"a", "b"}}));
  EXPECT_EQ(error_of("\"a\" x,b", trim).column(), 5);
  // After a quoted line break, columns count from the new line.
  const ParseError later = error_of("\"a\nbc\"d");
  EXPECT_EQ(later.line(), 2);
  EXPECT_EQ(later.column(), 4);
}

TEST(Csv, AQuoteInsideAnUnquotedFieldIsAnError) {
  const ParseError e = error_of("ab,c\"d\n");
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 5);
  EXPECT_NE(e.message().find("a quote inside an unquoted field"), std::string::npos) << e.what();
}

TEST(Csv, RecordsHoldAtMostMaxFields) {
  CsvOptions bounded;
  bounded.max_fields = 3;
  EXPECT_EQ(fields_of("a,b,c\n1,2,3", bounded).size(), 2u);
  const ParseError e = error_of("a,b,c\n1,2,3,4\n", bounded);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 7);
  EXPECT_EQ(e.message(), "more than 3 fields");
}

TEST(Csv, MessagesNeverQuoteTheText) {
  for (const char* text : {"canary\"x", "\"canary\"x", "\"canary"}) {
    const ParseError e = error_of(text);
    EXPECT_EQ(std::string(e.what()).find("canary"), std::string::npos) << e.what();
  }
}

TEST(Csv, AnyBytesReadOrFailCleanly) {
  // Every string over a small alphabet up to 6 bytes, with and without every option: records
  // or a ParseError at a position in the text, never a crash or another exception.
  const std::string alphabet = ",\"\r\n a#";
  std::string text;
  CsvOptions all;
  all.trim_blanks = true;
  all.skip_blank_lines = true;
  all.comment = '#';
  all.max_fields = 4;
  size_t accepted = 0;
  const auto visit = [&](const auto& self, size_t depth) -> void {
    for (const CsvOptions& options : {CsvOptions{}, all}) {
      try {
        (void)read_csv(text, "t.csv", options);
        ++accepted;
      } catch (const ParseError& e) {
        EXPECT_GE(e.line(), 1);
        EXPECT_GE(e.column(), 1);
      }
    }
    if (depth == 6) return;
    for (const char c : alphabet) {
      text.push_back(c);
      self(self, depth + 1);
      text.pop_back();
    }
  };
  visit(visit, 0);
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace upsim

// The one CSV reader of every layer: RFC 4180 quoting.
//
// Contract:
//  - Fields are separated by commas; a record ends at LF, at CRLF, or at a CR that is the last
//    byte of the text. The last record needs no line break; a text that ends with one has no
//    empty record after it.
//  - A field may be double-quoted: inside the quotes, commas, CR and LF are text and `""` is one
//    `"`. An unquoted field holds no quote. Anything else is malformed, and every malformed input
//    is a ParseError (sim/formats/parse_error.h) naming the file, the 1-based line and the 1-based
//    column (in bytes) of the problem: an unterminated quoted field (at its opening quote), text
//    after a closing quote, a quote inside an unquoted field, more than CsvOptions::max_fields
//    fields in one record (at the first field too many). Messages never quote the file's text.
//  - Unquoted fields are taken byte for byte (no encoding is assumed; a UTF-8 byte order mark is
//    part of the first field); a CR that is not part of a line break is text.
//  - Memory: the records and a copy of each field, bounded by the text (callers cap the size of
//    the files they read) and, per record, by max_fields. No input crashes or asserts.
//
// Written here rather than over Debian's libcsv (libcsv-dev 3.0.3): its callbacks get no offsets
// and a strict-mode error is CSV_EPARSE with the count of bytes consumed, so neither a record's
// line nor an error's column comes without scanning the text again; it ends a record at a lone
// CR, reports no blank lines unless told to report every line break, and has no comment lines,
// which the measurement tables have and whose text (a quote in a source note) must never reach
// the field parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace upsim {

struct CsvOptions {
  /// Drop blanks (spaces, tabs, CR) around every field: around an unquoted field's text, and
  /// before an opening and after a closing quote (blanks inside quotes are kept).
  bool trim_blanks = false;
  /// Skip lines that are empty (with trim_blanks: that hold only blanks) instead of reading each
  /// as a record of one empty field.
  bool skip_blank_lines = false;
  /// A line that starts with this character (with trim_blanks: whose first character that is
  /// not a blank is this one) is a comment, not a record; '\0' for none. Only a line that starts
  /// a record can be a comment (not one inside a quoted field).
  char comment = '\0';
  /// At most this many fields in a record; 0 for no bound.
  size_t max_fields = 0;
};

/// One record: its fields, unquoted, and the line it starts on.
struct CsvRecord {
  int64_t line = 0;  ///< 1-based
  std::vector<std::string> fields;
};

/// A comment line (CsvOptions::comment): its 1-based line and its text without the line break.
struct CsvComment {
  int64_t line = 0;
  std::string text;
};

/// The records of `text`, the contents of `file` (named in errors as given), in order. Throws
/// ParseError for malformed text (see above).
std::vector<CsvRecord> read_csv(std::string_view text, const std::string& file,
                                const CsvOptions& options = {});

/// As above, and appends every comment line to `comments`, in order.
std::vector<CsvRecord> read_csv(std::string_view text, const std::string& file,
                                const CsvOptions& options, std::vector<CsvComment>& comments);

}  // namespace upsim

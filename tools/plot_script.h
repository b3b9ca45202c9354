// The gnuplot scripts of `upsim plot`, as pure functions of the tables they draw (no files, no
// gnuplot): tools/plot_command.cpp writes and runs them, test/fuzz/fuzz_outputs.cpp feeds them
// arbitrary bytes.
//
// Contract:
//  - Nothing taken from a table, a column name or a file name is ever code to gnuplot: each such
//    text is a single-quoted gnuplot string (gnuplot expands neither `backquotes` nor @macros
//    there), a quote in it a "'" joined with `.` ('it'."'".'s'), control characters and bytes
//    that are not UTF-8 shown as visible escapes (\n, \t, \x1B). The header comment names the files
//    as a shell command with the same escapes (a comment runs nothing, and cannot continue onto a
//    line).
//  - Inline data blocks hold numbers only, each checked to be a finite decimal (no hex, inf or
//    nan) and written as the shortest decimal that reads back to the same double, so no data
//    line can end its block (EOD) or carry text; labels go into `set xtics (...)` lists, series
//    names into titles, both as literals.
//  - Scripts write the SVG to standard output (no `set output`): `gnuplot X.gp > X.svg` redraws.
//  - Tables are RFC 4180 CSV as tools/run_tables.h writes them, read by sim/formats/csv.h
//    (quoted fields may hold line breaks; empty lines skipped): malformed quoting and a record of
//    more than kMaxCsvColumns fields are a ParseError naming the file, line and column. The
//    other errors are std::runtime_error naming the file, the line and the column: a row with
//    another number of fields than the header, a value that
//    must be a finite number and is not, a table without the columns a plot needs (then the file
//    is not quoted: it need not be a table at all).
//  - The same tables give the same scripts, byte for byte.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace upsim::cli {

/// A CSV table: its header and its rows, each with its 1-based line in the file.
struct CsvTable {
  struct Row {
    size_t line = 0;
    std::vector<std::string> fields;  ///< as many as the header has
  };
  std::string file;  ///< for messages
  std::vector<std::string> header;
  std::vector<Row> rows;

  /// The index of the first column named `name`, if any.
  std::optional<size_t> find(std::string_view name) const;
};

/// At most this many columns (a sweep's table has one per axis key and 14 more).
inline constexpr size_t kMaxCsvColumns = 4096;

/// Parses `text` (the contents of `file`). Throws ParseError (a std::runtime_error) for malformed
/// quoting or a record of more than kMaxCsvColumns fields, std::runtime_error for an empty text
/// or a row whose field count differs from the header's.
CsvTable parse_csv_table(std::string_view text, const std::string& file);

/// `text` as a gnuplot string expression of single-quoted literals ('it'."'".'s'), control
/// characters and invalid UTF-8 shown as escapes.
std::string gnuplot_literal(std::string_view text);

/// `text` with control characters and invalid UTF-8 shown as escapes (\n, \t, \xNN), for
/// messages and comments.
std::string printable_text(std::string_view text);

/// The value of a field that must be a finite number: a decimal as std::from_chars reads it
/// (no leading space or '+', no hex, inf or nan), within the range of a double.
std::optional<double> finite_number(std::string_view field);

/// One plot: `<name>.gp` holds `script`, which draws `<name>.svg`.
struct PlotScript {
  std::string name;
  std::string script;
};

struct ResultsPlots {
  std::vector<PlotScript> plots;  ///< <stem>_iteration, <stem>_breakdown
  size_t rows_left_out = 0;       ///< rows whose status is not `ok`
};

/// The plots of a sweep's results table (tools/sweep_command.h's columns) against the column
/// `x`: the iteration time per point (one line per combination of the other axis columns that x
/// does not determine, so a zip group is one line; a numeric axis when every x value is a number
/// or a quantity of one kind, log-scaled over two decades or more, else categories; axis values
/// that name YAML files shown by their stem; the y axis from zero unless the times differ by
/// less than a tenth, which the title then says), and the slowest rank's breakdown per point as
/// stacked bars (tools/plot_axes.h). `stem` names the plots and their titles. Throws
/// std::runtime_error when a column is missing, no row has status `ok`, or a number of an `ok`
/// row is not a finite number.
ResultsPlots results_plots(const CsvTable& results, const std::string& x, const std::string& stem);

/// The plots of a run folder: ranks_breakdown (ranks.csv as stacked bars) and, when `links` has
/// rows, links (the utilisation of the busiest links of each kind: bytes moved per iteration over
/// capacity x the slowest rank's iteration time, in %; at most 24 links, at most 4 of a kind
/// before the rest of the busiest).
std::vector<PlotScript> run_plots(const CsvTable& ranks, const CsvTable* links);

}  // namespace upsim::cli

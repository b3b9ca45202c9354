// tools/plot_script.h in-process: literals, numbers and data blocks of the gnuplot scripts, and
// the table reader's errors; the literals checked against the installed gnuplot.
#include "tools/plot_script.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tools/child_process.h"
#include "tools/plot_axes.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const std::string kResultsHeader =
    "point,x,o,status,iteration_ms,compute_ms,communication_ms,exposed_comm_ms,bubble_ms,"
    "rendezvous_wait_ms,cpu_bound_idle_ms,other_idle_ms,memory_bytes_per_gpu,busiest_link,"
    "busiest_link_busy_ms,message\n";

std::vector<std::string> hostile_texts() {
  return {"plain",
          "it's",
          "''",
          "'lead",
          "a''''b'",
          "`touch pwned`",
          "$(touch pwned)",
          "@GPVAL_TERM",
          "\"; system(\"touch pwned\"); \"",
          "a\nEOD\nsystem('touch pwned')",
          "tab\there\r\x01\x7f",
          "ends in \\",
          "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
          "bad \xff \xc3 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf"};
}

/// Every message of `f` (a std::runtime_error), or "" when it did not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(PlotScript, LiteralsAreSingleQuotedWithVisibleEscapes) {
  EXPECT_EQ(gnuplot_literal("plain"), "'plain'");
  EXPECT_EQ(gnuplot_literal("it's"), "'it'.\"'\".'s'");
  EXPECT_EQ(gnuplot_literal("''"), "\"'\".\"'\"");
  EXPECT_EQ(gnuplot_literal("'a'"), "\"'\".'a'.\"'\"");
  EXPECT_EQ(gnuplot_literal(""), "''");
  EXPECT_EQ(gnuplot_literal("a\nb\tc\r\x01\x7f"), "'a\\nb\\tc\\r\\x01\\x7F'");
  EXPECT_EQ(gnuplot_literal("caf\xc3\xa9"), "'caf\xc3\xa9'");
  EXPECT_EQ(gnuplot_literal("\xff\xc3"), "'\\xFF\\xC3'");
  EXPECT_EQ(gnuplot_literal("\xed\xa0\x80"), "'\\xED\\xA0\\x80'");  // a UTF-16 surrogate
  EXPECT_EQ(printable_text("it's\n"), "it's\\n");
  for (const std::string& s : hostile_texts()) {
    const std::string lit = gnuplot_literal(s);
    EXPECT_EQ(lit.find_first_of("\n\r"), std::string::npos) << lit;
    // Quote-free single-quoted pieces and "'" joined by dots, nothing else.
    EXPECT_TRUE(std::regex_match(lit, std::regex("('[^']*'|\"'\")([.]('[^']*'|\"'\"))*"))) << lit;
  }
}

TEST(PlotScript, FiniteNumbersOnly) {
  EXPECT_EQ(finite_number("1.5"), 1.5);
  EXPECT_EQ(finite_number("-2e-3"), -2e-3);
  EXPECT_EQ(finite_number("0"), 0.0);
  for (const char* bad : {"", " 1", "1 ", "+1", "0x10", "inf", "-inf", "nan", "1e999", "1,5",
                          "1.5ms", "`1`", "EOD"}) {
    EXPECT_EQ(finite_number(bad), std::nullopt) << bad;
  }
}

TEST(PlotScript, TablesAreCheckedRowByRow) {
  const CsvTable t = parse_csv_table("a,b\n\n1,\"x,y\"\r\n2,3", "t.csv");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].line, 3u);
  EXPECT_EQ(t.rows[0].fields[1], "x,y");
  EXPECT_EQ(t.rows[1].line, 4u);
  EXPECT_EQ(t.find("b"), 1u);
  EXPECT_EQ(t.find("c"), std::nullopt);
  EXPECT_EQ(error_of([] { parse_csv_table("a,b\n1,2,3\n", "t.csv"); }),
            "t.csv:2: expected 2 fields (as the header), got 3");
  EXPECT_EQ(error_of([] { parse_csv_table("\n\r\n", "t.csv"); }), "t.csv: empty, not a CSV table");
  EXPECT_EQ(error_of([] { parse_csv_table(std::string(kMaxCsvColumns, ','), "t.csv"); }),
            "t.csv:1:4097: more than 4096 fields");
  // Not a results table: named by the missing column, never quoted.
  const CsvTable other = parse_csv_table("secret,stuff\n1,2\n", "o.csv");
  const std::string e = error_of([&] { results_plots(other, "secret", "o"); });
  EXPECT_EQ(e, "o.csv: not a results table written by `upsim sweep` (no column `status`)");
  const CsvTable ranks = parse_csv_table("secret\n1\n", "ranks.csv");
  EXPECT_EQ(error_of([&] { run_plots(ranks, nullptr); }),
            "ranks.csv: not a ranks table written by `upsim run` (no column `compute_ms`)");
}

TEST(PlotScript, DataBlocksHoldNumbersAndUserTextOnlyLiterals) {
  std::string text = kResultsHeader;
  int point = 0;
  for (const std::string& s : hostile_texts()) {
    std::string field = "\"";
    for (const char c : s) {
      if (c == '\n') continue;  // a CSV line holds no line break
      field += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    field += "\"";
    text += std::to_string(point++) + "," + field + "," + field +
            ",ok,1.5,0.25,0.01,0.01,0,0,1.2,0.04,1000,,,\n";
  }
  const CsvTable t = parse_csv_table(text, "r.csv");
  for (const std::string& x : {std::string("x"), std::string("o")}) {
    const ResultsPlots plots = results_plots(t, x, "r`touch pwned`'\n");
    ASSERT_EQ(plots.plots.size(), 2u);
    for (const PlotScript& p : plots.plots) {
      std::istringstream lines(p.script);
      bool in_block = false;
      for (std::string line; std::getline(lines, line);) {
        if (line == "EOD") {
          in_block = false;
          continue;
        }
        if (in_block) {
          EXPECT_TRUE(std::regex_match(line, std::regex("[-0-9.e+]+( [-0-9.e+]+)*"))) << line;
          continue;
        }
        in_block = line.size() > 6 && line.substr(line.size() - 6) == "<< EOD";
        if (line.front() == '#') continue;
        // Outside data blocks and comments: no quote, backquote, macro or variable other than
        // the data blocks' outside a single-quoted literal.
        const std::string code =
            std::regex_replace(std::regex_replace(line, std::regex("'[^']*'|\"'\""), "''"),
                               std::regex("\\$(S[0-9]+|DATA)\\b"), "");
        EXPECT_EQ(code.find_first_of("\"`@$"), std::string::npos) << line;
      }
    }
  }
  // The same table, the same scripts.
  EXPECT_EQ(results_plots(t, "x", "r").plots[1].script, results_plots(t, "x", "r").plots[1].script);
}

/// The first executable `name` on PATH, or "".
bool gnuplot_installed() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (::access((fs::path(d.empty() ? "." : d) / "gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

// gnuplot itself reads each literal back as the text it shows, expanding nothing.
TEST(PlotScript, GnuplotPrintsLiteralsBackAsWritten) {
  if (!gnuplot_installed()) GTEST_SKIP() << "gnuplot is not installed";
  const fs::path dir =
      fs::temp_directory_path() / ("upsim-plot-literal-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string script = "set print '-'\n";
  std::string expected;
  for (const std::string& s : hostile_texts()) {
    script += "print " + gnuplot_literal(s) + "\n";
    expected += printable_text(s) + "\n";
  }
  std::ofstream(dir / "print.gp") << script;
  const ChildProcessResult r = run_program({"gnuplot", (dir / "print.gp").string()});
  fs::remove_all(dir);
  EXPECT_TRUE(r.succeeded()) << r.stderr_text;
  EXPECT_EQ(r.stdout_bytes, expected);
  EXPECT_EQ(r.stderr_text, "");
}

}  // namespace
}  // namespace upsim::cli

namespace upsim::cli {
namespace {

/// A results table of axes gpu and topology zipped (a100 with dgx_a100, h100 with dgx_h100) and
/// a bandwidth axis.
CsvTable zipped_results() {
  std::string text =
      "point,platform.gpu,platform.topology,bw,status,iteration_ms,compute_ms,communication_ms,"
      "exposed_comm_ms,bubble_ms,rendezvous_wait_ms,cpu_bound_idle_ms,other_idle_ms\n";
  int point = 0;
  for (const char* pair : {"../hardware/a100.yaml,../topologies/dgx_a100.yaml",
                           "../hardware/h100.yaml,../topologies/dgx_h100.yaml"}) {
    for (const char* bw : {"100Gbit/s", "400Gbit/s"}) {
      text += std::to_string(point) + "," + pair + "," + bw + ",ok," +
              std::to_string(4.0 - 0.01 * point) + ",3,1,0.5,0,0,0,0\n";
      ++point;
    }
  }
  return parse_csv_table(text, "results.csv");
}

TEST(PlotAxes, ZipPartnersOfXDrawNoSeriesAndFilesShowByStem) {
  const std::string s = results_plots(zipped_results(), "platform.gpu", "r").plots[0].script;
  // One series per bandwidth, none per topology (x determines it).
  EXPECT_NE(s.find("title 'bw=100Gbit/s'"), std::string::npos) << s;
  EXPECT_NE(s.find("title 'bw=400Gbit/s'"), std::string::npos) << s;
  EXPECT_EQ(s.find("topology="), std::string::npos) << s;
  EXPECT_NE(s.find("'a100' 0, 'h100' 1"), std::string::npos) << s;
  EXPECT_EQ(s.find("../hardware"), std::string::npos) << s;
}

TEST(PlotAxes, QuantitiesAreANumericAxisInOneUnitAndSmallChangesAreVisible) {
  const std::string s = results_plots(zipped_results(), "bw", "r").plots[0].script;
  EXPECT_NE(s.find("set xlabel 'bw (GB/s)'"), std::string::npos) << s;
  EXPECT_NE(s.find("\n12.5 4\n50 3.99\n"), std::string::npos) << s;  // 100 / 400 Gbit/s
  EXPECT_EQ(s.find("set xtics"), std::string::npos) << s;            // numeric, not categories
  // 4.0 .. 3.97 ms differ by under a tenth: the y axis is not from zero, and the title says so.
  EXPECT_NE(s.find("(y axis not from zero)"), std::string::npos) << s;
  EXPECT_NE(s.find("set yrange [*:*]"), std::string::npos) << s;
  const std::optional<NumericAxis> bytes = numeric_axis({"512MiB", "4GiB", "64GiB"});
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->unit, "GiB");
  EXPECT_EQ(bytes->values, (std::vector<double>{0.5, 4, 64}));
  EXPECT_TRUE(bytes->logarithmic);
  EXPECT_FALSE(numeric_axis({"1us", "2GB/s"}));  // mixed kinds: categories
  EXPECT_EQ(part_title("exposed_comm_ms"), "exposed comm");
  EXPECT_EQ(short_column_name("platform.topology.node.link_kinds.nvlink4.bandwidth"),
            "nvlink4.bandwidth");
}

TEST(PlotAxes, LinkUtilisationShowsEveryKindOfLink) {
  const CsvTable ranks = parse_csv_table(
      "rank,name,iteration_time_ms,compute_ms,communication_ms,exposed_communication_ms,"
      "bubble_ms,rendezvous_wait_ms,cpu_bound_idle_ms,other_idle_ms\n"
      "0,rank 0,10,8,1,1,0,0,1,0\n",
      "ranks.csv");
  std::string links = "name,capacity_gbytes_per_s,bytes_per_iteration,busy_ms_per_iteration\n";
  for (int i = 0; i < 30; ++i)
    links += "gpu" + std::to_string(i) + " -> nvswitch (nvlink4),450,900000000,2\n";
  links += "nic0 -> leaf0 (ib_ndr),50,250000000,5\n";  // 250 MB in 10 ms of 50 GB/s: 50%
  const CsvTable link_table = parse_csv_table(links, "links.csv");
  const std::vector<PlotScript> plots = run_plots(ranks, &link_table);
  ASSERT_EQ(plots.size(), 2u);
  const std::string& s = plots[1].script;
  EXPECT_NE(s.find("nic0 -> leaf0 (ib_ndr)"), std::string::npos) << s;
  EXPECT_NE(s.find("\n50\n"), std::string::npos) << s;  // the NIC's utilisation, %
  EXPECT_NE(s.find("\n20\n"), std::string::npos) << s;  // 900 MB in 10 ms of 450 GB/s
  EXPECT_NE(s.find("utilisation (%"), std::string::npos) << s;
}

}  // namespace
}  // namespace upsim::cli

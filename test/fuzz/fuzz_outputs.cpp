// Fuzzes what upsim reads back of its own outputs: the results tables of `upsim plot` (a sweep's
// results.csv, a run's ranks.csv / links.csv) and the gnuplot scripts made from them (without
// running gnuplot), and the summary.json / ops.csv readers of `upsim diff`. Besides never
// crashing, every script must keep tools/plot_script.h's promise: data blocks hold numbers
// only, and outside comments every text is a single-quoted literal (no double quote, backquote
// or macro gnuplot could expand); a script that breaks it aborts (a finding).
// Seeds: results tables, ranks / links / ops tables and summary.json files written by upsim.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "test/fuzz/fuzz_common.h"
#include "tools/plot_script.h"
#include "tools/run_folder_reader.h"

namespace {

bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '-' || c == '+' || c == ' ';
}

/// Aborts when a line of `script` could make gnuplot run or expand something.
void check_script(std::string_view script) {
  bool in_block = false;
  while (!script.empty()) {
    const size_t end = script.find('\n');
    if (end == std::string_view::npos) std::abort();  // every line ends
    const std::string_view line = script.substr(0, end);
    script.remove_prefix(end + 1);
    if (in_block) {
      if (line == "EOD") {
        in_block = false;
        continue;
      }
      for (const char c : line) {
        if (!is_number_char(c)) std::abort();
      }
      continue;
    }
    if (line.empty() || line.front() == '#') continue;
    if (line.back() == '\\') std::abort();  // a line continued onto the next
    if (line.size() >= 6 && line.substr(line.size() - 6) == "<< EOD") in_block = true;
    // Outside literals ('...' without quotes inside, or "'"): no ", `, @ and no control byte.
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '\'') {
        const size_t close = line.find('\'', i + 1);
        if (close == std::string_view::npos) std::abort();
        for (size_t k = i + 1; k < close; ++k) {
          if (static_cast<unsigned char>(line[k]) < 0x20) std::abort();
        }
        i = close;
      } else if (line.substr(i, 3) == "\"'\"") {
        i += 2;
      } else if (c == '"' || c == '`' || c == '@' || static_cast<unsigned char>(c) < 0x20) {
        std::abort();
      }
    }
  }
  if (in_block) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  using namespace upsim::cli;
  const std::string_view bytes = fuzz::as_text(data, size);
  fuzz::expect_clean([&] {
    const CsvTable table = parse_csv_table(bytes, "results.csv");
    // The x axis: each axis column in turn (the columns between `point` and `status`).
    const size_t status = table.find("status").value_or(table.header.size());
    for (size_t c = 1; c < status && c < 4; ++c) {
      fuzz::expect_clean([&] {
        for (const PlotScript& p : results_plots(table, table.header[c], "results").plots)
          check_script(p.script);
      });
    }
    fuzz::expect_clean([&] {
      for (const PlotScript& p : run_plots(table, &table))
        check_script(p.script);
    });
  });
  fuzz::expect_clean([&] { (void)parse_run_summary(bytes, "summary.json"); });
  fuzz::expect_clean([&] { (void)parse_ops_table(bytes, "ops.csv"); });
  return 0;
}

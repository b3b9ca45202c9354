// Fuzzes the sweep's inputs: every input is read as a study file (the study reader,
// cli::study_point_count, with the input placed in configs/studies/ so that the shipped studies'
// bases and value files resolve) and, as raw bytes, by the parsers of the sweep's records
// (study.points and points/<n>.row, tools/sweep_records.h), which must take any bytes without
// throwing, and whose accepted records format back to the same bytes. Seeds: configs/studies/,
// and a manifest and row records written by a sweep (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "sim/config/config_node.h"
#include "test/fuzz/fuzz_common.h"
#include "tools/sweep_command.h"
#include "tools/sweep_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  const std::string_view bytes = fuzz::as_text(data, size);
  std::string why;
  // The record parsers: never an exception (none is caught here), and a record they accept is
  // exactly what the formatter writes for it (a manifest before versions has another format).
  if (const std::optional<cli::RowRecord> row = cli::parse_row_record(bytes, why)) {
    if (cli::format_row_record(*row) != bytes) std::abort();
  }
  if (const std::optional<cli::Manifest> m = cli::parse_manifest(bytes, why)) {
    if (bytes.starts_with("upsim-study 1\n") && cli::format_manifest(*m) != bytes) std::abort();
  }
  fuzz::expect_clean([&] {
    ConfigDocument doc =
        ConfigDocument::parse_string(bytes, std::string(UPSIM_CONFIGS_DIR) + "/studies/fuzz.yaml");
    (void)cli::study_point_count(doc, doc.file());
  });
  return 0;
}

// Fuzzes whole scenarios: parse, apply nothing, build the scenario (platform, models, workload
// graph) as `upsim run` does before simulating. Seeds: configs/*.yaml and configs/validation/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/config/config_node.h"
#include "test/fuzz/fuzz_common.h"
#include "tools/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  const std::string text(fuzz::as_text(data, size));
  const std::string name = std::string(UPSIM_CONFIGS_DIR) + "/fuzz.yaml";
  fuzz::expect_clean([&] {
    ConfigDocument doc = ConfigDocument::parse_string(text, name);
    (void)cli::build_scenario(doc);
  });
  return 0;
}

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
  fuzz::expect_clean([&] {
    ConfigDocument doc = fuzz::parse_in_configs(fuzz::as_text(data, size));
    (void)cli::build_scenario(doc);
  });
  return 0;
}

// Fuzzes whole scenarios: parse, apply nothing, build the scenario (platform, models, workload
// graph) as `upsim run` does before simulating. Seeds: configs/*.yaml and configs/validation/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/config/config_node.h"
#include "test/fuzz/fuzz_common.h"
#include "tools/scenario.h"
#include "workloads/workload_registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  fuzz::expect_clean([&] {
    ConfigDocument doc = fuzz::parse_in_configs(fuzz::as_text(data, size));
    // A mutated size may ask for a valid but huge run (10^5 GPUs): stop it at 1 M tasks (about
    // 128 MB; several times that under ASan) as upsim stops one above the machine's memory.
    (void)cli::build_scenario(doc, default_workload_registry(), cli::kFirstChosenIterations,
                              {.max_tasks = 1'000'000});
  });
  return 0;
}

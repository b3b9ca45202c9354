// Fuzzes the YAML configuration readers: the document parser, then the fabric, hardware, kernel
// calibration, collective tuning and sweep-study loaders on whatever parses. Seeds:
// configs/**/*.yaml (studies: configs/studies/).
#include <cstddef>
#include <cstdint>
#include <string>

#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"
#include "test/fuzz/fuzz_common.h"
#include "tools/sweep_command.h"
#include "topology/fabric_loader.h"
#include "topology/nccl_tuning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  fuzz::expect_clean([&] {
    ConfigDocument doc = fuzz::parse_in_configs(fuzz::as_text(data, size));
    fuzz::expect_clean([&] { (void)load_fabric(doc.root()); });
    fuzz::expect_clean([&] { (void)load_hardware_profile(doc.root()); });
    fuzz::expect_clean([&] { (void)load_kernel_calibration(doc.root()); });
    fuzz::expect_clean([&] { (void)load_collective_tuning(doc.root()); });
    fuzz::expect_clean([&] { (void)cli::study_point_count(doc, doc.file()); });
  });
  return 0;
}

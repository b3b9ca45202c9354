// Fuzzes the YAML configuration readers: the document parser, then the fabric, hardware, kernel
// calibration and collective tuning loaders on whatever parses. Seeds: configs/**/*.yaml.
#include <cstddef>
#include <cstdint>
#include <string>

#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"
#include "test/fuzz/fuzz_common.h"
#include "topology/fabric_loader.h"
#include "topology/nccl_tuning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  const std::string text(fuzz::as_text(data, size));
  // Relative references resolve against the shipped configs, as a scenario's would.
  const std::string name = std::string(UPSIM_CONFIGS_DIR) + "/fuzz.yaml";
  fuzz::expect_clean([&] {
    ConfigDocument doc = ConfigDocument::parse_string(text, name);
    fuzz::expect_clean([&] { (void)load_fabric(doc.root()); });
    fuzz::expect_clean([&] { (void)load_hardware_profile(doc.root()); });
    fuzz::expect_clean([&] { (void)load_kernel_calibration(doc.root()); });
    fuzz::expect_clean([&] { (void)load_collective_tuning(doc.root()); });
  });
  return 0;
}

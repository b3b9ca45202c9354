// key_paths: every scalar of a YAML document as the dotted path --set takes.
#include "sim/config/key_paths.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace upsim {
namespace {

TEST(KeyPaths, NamesEveryScalarWithSequenceItemsByIndex) {
  const std::vector<std::string> keys = key_paths(
      "name: x\n"
      "platform: {gpus: 4, gpu: {peak_flops: {fp32: 19.5TFLOP/s}}}\n"
      "workload:\n"
      "  top_mlp: [1024, 1]\n"
      "  tables:\n"
      "    - {count: 6, rows: 40}\n"
      "  empty: {}\n",
      "s.yaml");
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "platform.gpus", "platform.gpu.peak_flops.fp32",
                                            "workload.top_mlp.0", "workload.top_mlp.1",
                                            "workload.tables.0.count", "workload.tables.0.rows",
                                            "workload.empty"}));
}

TEST(KeyPaths, RefusesTextThatIsNotYamlNamingTheLine) {
  try {
    key_paths("a: 1\nb: [unclosed\n", "bad.yaml");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace upsim

// Fuzzes the text measurement readers: nccl-tests logs and kernel measurement CSVs (upsim's own,
// embedding ops, LLMCompass's). Seeds: test/data (nccl-tests logs, CSVs).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "calibration/fitting/kernel_measurements.h"
#include "test/fuzz/fuzz_common.h"
#include "topology/fitting/nccl_tests_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  const std::string_view bytes = fuzz::as_text(data, size);
  fuzz::expect_clean([&] { (void)parse_nccl_tests_output(bytes, "fuzz.log", {}); });
  const std::filesystem::path csv = fuzz::scratch_file(bytes, ".csv");
  fuzz::expect_clean([&] { (void)read_measurement_csv(csv); });
  fuzz::expect_clean([&] { (void)read_embedding_op_csv(csv); });
  fuzz::expect_clean([&] { (void)read_llmcompass_matmul(csv); });
  return 0;
}

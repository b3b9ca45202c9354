// Fuzzes the trace readers on the same bytes: Kineto JSON, PyTorch execution trace (ET) JSON and
// Chakra protobuf. Seeds: test/data traces (Kineto, ET, Chakra examples).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "test/fuzz/fuzz_common.h"
#include "workloads/trace/chakra_trace.h"
#include "workloads/trace/execution_trace.h"
#include "workloads/trace/kineto_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  const std::string_view bytes = fuzz::as_text(data, size);
  fuzz::expect_clean([&] { (void)parse_kineto_trace(bytes, "fuzz.json"); });
  fuzz::expect_clean([&] { (void)parse_execution_trace(bytes, "fuzz_et.json"); });
  fuzz::expect_clean([&] { (void)parse_chakra_trace(bytes, "fuzz.et"); });
  return 0;
}

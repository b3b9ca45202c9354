// Fuzzes the HDF5 measurement reader (libhdf5 reads a file, so each input is written to a
// scratch file first). Seeds: .h5 files written by `upsim convert kernels` (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "calibration/fitting/hdf5_measurements.h"
#include "test/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace upsim;
  const std::filesystem::path h5 = fuzz::scratch_file(fuzz::as_text(data, size), ".h5");
  fuzz::expect_clean([&] { (void)read_measurement_hdf5(h5); });
  return 0;
}

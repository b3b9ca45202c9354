// Temporary measurement tables for the calibration unit tests: one folder per test binary under
// googletest's TempDir(), so that concurrent test runs do not share file names.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace upsim::test {

/// Writes `text` to `name` in the calibration tests' temporary folder and returns its path.
inline std::filesystem::path write_temp_table(const std::string& name, const std::string& text) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "upsim_kernels";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace upsim::test

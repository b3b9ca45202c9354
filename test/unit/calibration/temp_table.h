// Temporary measurement tables for the calibration unit tests: one folder per test under
// googletest's TempDir() (ctest runs each test as a process of its own, several at once), so
// that concurrent tests do not share file names.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace upsim::test {

/// Writes `text` to `name` in the calibration tests' temporary folder and returns its path.
inline std::filesystem::path write_temp_table(const std::string& name, const std::string& text) {
  const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info();
  const std::string folder =
      test == nullptr ? "no_test" : std::string(test->test_suite_name()) + "." + test->name();
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / "upsim_kernels" / folder;
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace upsim::test

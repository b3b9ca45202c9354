// input_file_problem: what every reader checks before reading an input.
#include "sim/input_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace upsim {
namespace {

namespace fs = std::filesystem;

TEST(InputFile, RegularFilesWithinTheirBoundOnly) {
  const fs::path dir = fs::temp_directory_path() / ("upsim-input-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "small.csv") << "a,b\n1,2\n";
  EXPECT_EQ(input_file_problem(dir / "small.csv", kMiB), std::nullopt);
  const auto too_big = input_file_problem(dir / "small.csv", 4);
  ASSERT_TRUE(too_big.has_value());
  EXPECT_EQ(*too_big, "8 bytes, more than the 4 bytes such an input may have");
  EXPECT_EQ(input_file_problem(dir / "missing.csv", kMiB), "file not found");
  EXPECT_EQ(input_file_problem(dir, kMiB), "a folder, not a file");
  // Devices never end (/dev/zero) or never hold data (/dev/null): refused, not read.
  EXPECT_EQ(input_file_problem("/dev/zero", kGiB), "a device, not a regular file");
  EXPECT_EQ(input_file_problem("/dev/urandom", kGiB), "a device, not a regular file");
  // A symbolic link to a regular file reads what it names.
  fs::create_symlink(dir / "small.csv", dir / "link.csv");
  EXPECT_EQ(input_file_problem(dir / "link.csv", kMiB), std::nullopt);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace upsim

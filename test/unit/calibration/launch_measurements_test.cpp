// The launch-floor table of bench/gpu/gpu_microbench (calibration/fitting/launch_measurements.h):
// read back with its metadata, the kernel floor taken from it, and bad tables named by file and
// line. The table here is synthetic (test/unit/calibration/data/launch_synthetic.csv says so).
#include "calibration/fitting/launch_measurements.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "calibration/fitting/kernel_measurements.h"
#include "test/unit/calibration/temp_table.h"

namespace upsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(UPSIM_CALIBRATION_TEST_DATA);

using test::write_temp_table;

std::string error_of(const std::filesystem::path& path) {
  try {
    read_launch_csv(path);
  } catch (const CalibrationDataError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchMeasurements, ReadsTheTableAndItsMetadata) {
  const LaunchTable t = read_launch_csv(kData / "launch_synthetic.csv");
  ASSERT_EQ(t.rows.size(), 7u);
  EXPECT_EQ(t.metadata.at("gpu"), "Synthetic GPU");
  EXPECT_EQ(t.metadata.at("measured_utc"), "2026-12-01T00:00:00Z");
  ASSERT_NE(t.find("memcpy_h2d_pinned", 1024), nullptr);
  EXPECT_DOUBLE_EQ(t.find("memcpy_h2d_pinned", 1024)->time_us, 8.2);
  EXPECT_EQ(t.find("memcpy_h2d_pinned", 2048), nullptr);
  EXPECT_EQ(kernel_overhead_from(t), Duration::from_us_f(2.25));
}

TEST(LaunchMeasurements, BadTablesNameFileAndLine) {
  const std::string header = "quantity,bytes,time_us\n";
  EXPECT_NE(error_of(write_temp_table("launch_no_header.csv", "empty_kernel_back_to_back,0,2\n"))
                .find("launch_no_header.csv:1: expected the header"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp_table("launch_bad_time.csv", header + "x,0,-1\n"))
                .find("launch_bad_time.csv:2: time_us: expected a positive number"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp_table("launch_bad_bytes.csv", header + "x,1.5,1\n"))
                .find("launch_bad_bytes.csv:2: bytes: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp_table("launch_twice.csv", header + "x,0,1\nx,0,2\n"))
                .find("launch_twice.csv:3: `x` at 0 bytes appears twice"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp_table("launch_fields.csv", header + "x,0\n"))
                .find("launch_fields.csv:2: expected 3 fields"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp_table("launch_empty.csv", "# gpu: none\n")).find("no header"),
            std::string::npos);
  EXPECT_NE(error_of(kData / "no_such_launch.csv").find("no_such_launch.csv"), std::string::npos);
  const LaunchTable without =
      read_launch_csv(write_temp_table("launch_without.csv", header + "x,0,1\n"));
  try {
    kernel_overhead_from(without);
    FAIL() << "expected CalibrationDataError";
  } catch (const CalibrationDataError& e) {
    EXPECT_NE(std::string(e.what()).find("empty_kernel_back_to_back"), std::string::npos);
  }
}

}  // namespace
}  // namespace upsim

// results.h5 (tools/results_hdf5.h): built in memory, the same table gives the same bytes (in one
// process, with whatever the heap held before, and at any -j: cli_test), and it is written like
// every other output, through its .tmp twin, never through a symbolic link there.
#include "tools/results_hdf5.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kHeader = {"point", "status", "iteration_ms", "message"};
const std::vector<std::vector<std::string>> kRows = {
    {"0", "ok", "1.322127", ""}, {"1", "failed", "", "bad \"value\""}, {"2", "ok", "4.07", ""}};

TEST(ResultsHdf5, TheSameTableGivesTheSameBytes) {
  const std::string first = results_hdf5_image(kHeader, kRows);
  ASSERT_GT(first.size(), 8u);
  EXPECT_EQ(first.substr(0, 8), "\x89HDF\r\n\x1a\n");
  // Whatever freed memory held, unwritten parts of the image are not taken from it.
  for (int i = 0; i < 64; ++i) {
    const auto junk = std::make_unique<char[]>(256 * 1024);
    std::memset(junk.get(), 0x5a + i, 256 * 1024);
  }
  EXPECT_TRUE(results_hdf5_image(kHeader, kRows) == first);
  std::vector<std::vector<std::string>> other = kRows;
  other[2][2] = "4.08";
  EXPECT_FALSE(results_hdf5_image(kHeader, other) == first);
}

TEST(ResultsHdf5, IsWrittenThroughItsTemporaryTwinNeverThroughALink) {
  const fs::path dir =
      fs::temp_directory_path() / ("upsim-results-hdf5-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_results_hdf5(dir / "results.h5", kHeader, kRows);
  std::ifstream in(dir / "results.h5", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_TRUE(bytes.str() == results_hdf5_image(kHeader, kRows));
  // The file reads back: the status column as written.
  const hid_t file = H5Fopen((dir / "results.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t set = H5Dopen2(file, "results/iteration_ms", H5P_DEFAULT);
  ASSERT_GE(set, 0);
  std::vector<double> times(3);
  ASSERT_GE(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, times.data()), 0);
  EXPECT_EQ(times[0], 1.322127);
  EXPECT_NE(times[1], times[1]);  // empty: NaN
  H5Dclose(set);
  H5Fclose(file);

  std::ofstream(dir / "victim") << "keep\n";
  fs::create_symlink(dir / "victim", dir / "planted.h5.tmp");
  try {
    write_results_hdf5(dir / "planted.h5", kHeader, kRows);
    ADD_FAILURE() << "wrote through a symbolic link";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("planted.h5.tmp is a symbolic link"), std::string::npos)
        << e.what();
  }
  std::ifstream victim(dir / "victim");
  std::string line;
  std::getline(victim, line);
  EXPECT_EQ(line, "keep");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace upsim::cli

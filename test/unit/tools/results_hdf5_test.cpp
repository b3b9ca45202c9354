// results.h5 (tools/results_hdf5.h): a PyTables table of one member per column, typed by its
// cells, that pandas reads as results.csv (test/python/test_sweep.py reads a sweep's with
// pandas); built in memory, the same table gives the same bytes (in one process, with whatever
// the heap held before, and at any -j: cli_test), and it is written like every other output,
// through its .tmp twin, never through a symbolic link there.
#include "tools/results_hdf5.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "results_table_reader.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kHeader = {"point", "status", "iteration_ms", "message",
                                          "workload.compile"};
const std::vector<std::vector<std::string>> kRows = {{"0", "ok", "1.322127", "", "true"},
                                                     {"1", "failed", "", "bad \"value\"", "False"},
                                                     {"2", "ok", "4.07", "", "false"}};

/// A folder of its own under the temporary folder, removed with it.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchFolder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

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
  const ScratchFolder scratch("upsim-results-hdf5");
  const fs::path& dir = scratch.path();
  write_results_hdf5(dir / "results.h5", kHeader, kRows);
  std::ifstream in(dir / "results.h5", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_TRUE(bytes.str() == results_hdf5_image(kHeader, kRows));

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
}

// The layout pandas.read_hdf reads as a "generic_table": PyTables' group and table attributes,
// no pandas_type, one member per column in table order, typed as read_csv types the column.
TEST(ResultsHdf5, IsAPyTablesTableOfOneMemberPerColumn) {
  const ScratchFolder scratch("upsim-results-hdf5-layout");
  write_results_hdf5(scratch.path() / "results.h5", kHeader, kRows);
  const test::ResultsTable t(scratch.path() / "results.h5");
  EXPECT_EQ(test::text_attribute(t.file(), "/", "CLASS"), "GROUP");
  EXPECT_EQ(test::text_attribute(t.file(), "/", "PYTABLES_FORMAT_VERSION"), "2.1");
  EXPECT_EQ(test::text_attribute(t.file(), "/", "TITLE"), "");
  EXPECT_EQ(test::text_attribute(t.file(), "/results", "CLASS"), "GROUP");
  EXPECT_EQ(test::text_attribute(t.file(), "/results", "VERSION"), "1.0");
  EXPECT_EQ(H5Aexists_by_name(t.file(), "/results", "pandas_type", H5P_DEFAULT), 0);
  EXPECT_EQ(test::text_attribute(t.file(), "/results/table", "CLASS"), "TABLE");
  EXPECT_EQ(test::text_attribute(t.file(), "/results/table", "VERSION"), "2.7");
  EXPECT_EQ(test::text_attribute(t.file(), "/results/table", "FIELD_4_NAME"), "workload.compile");
  int64_t nrows = 0;
  const hid_t attr = H5Aopen_by_name(t.file(), "/results/table", "NROWS", H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(attr, 0);
  EXPECT_GE(H5Aread(attr, H5T_NATIVE_INT64, &nrows), 0);
  H5Aclose(attr);
  EXPECT_EQ(nrows, 3);

  ASSERT_EQ(t.rows(), 3u);
  EXPECT_EQ(t.members(), kHeader);
  EXPECT_EQ(t.member_class("point"), H5T_INTEGER);
  EXPECT_EQ(t.integers("point"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(t.member_class("iteration_ms"), H5T_FLOAT);
  const std::vector<double> times = t.numbers("iteration_ms");
  EXPECT_EQ(times[0], 1.322127);
  EXPECT_NE(times[1], times[1]);  // empty: NaN
  EXPECT_EQ(times[2], 4.07);
  // Text as wide as its longest cell; an empty cell is pandas' nan_rep.
  EXPECT_EQ(t.member_class("status"), H5T_STRING);
  EXPECT_EQ(t.member_size("status"), 6u);
  EXPECT_EQ(t.texts("status"), (std::vector<std::string>{"ok", "failed", "ok"}));
  EXPECT_EQ(t.member_size("message"), 11u);
  EXPECT_EQ(t.texts("message"), (std::vector<std::string>{"nan", "bad \"value\"", "nan"}));
  // true / false in read_csv's spellings: PyTables' bool, one byte.
  EXPECT_EQ(t.member_class("workload.compile"), H5T_BITFIELD);
  EXPECT_EQ(t.member_size("workload.compile"), 1u);
  EXPECT_EQ(t.booleans("workload.compile"), (std::vector<uint8_t>{1, 0, 0}));
}

// Each column's type follows read_csv's: integers only if every cell is one (none empty), a
// number column takes empty cells as NaN, anything else (hexadecimal, a true/false column with an
// empty cell) is text; a `/` in a name is written as `.`; a table without rows is text only.
TEST(ResultsHdf5, ColumnTypesFollowTheCellsAsReadCsvDoes) {
  const ScratchFolder scratch("upsim-results-hdf5-types");
  const std::vector<std::string> header = {"signed", "empty", "number", "hex",
                                           "flag",   "a/b",   "words"};
  const std::vector<std::vector<std::string>> rows = {
      {"+5", "", "1e3", "0x10", "true", "1", "é"},
      {"-9223372036854775808", "", "-inf", "1", "", "2", "x"},
      {"007", "", ".5", "2", "false", "3", "nan"}};
  write_results_hdf5(scratch.path() / "results.h5", header, rows);
  {
    const test::ResultsTable t(scratch.path() / "results.h5");
    EXPECT_EQ(t.members(), (std::vector<std::string>{"signed", "empty", "number", "hex", "flag",
                                                     "a.b", "words"}));
    EXPECT_EQ(t.integers("signed"),
              (std::vector<int64_t>{5, std::numeric_limits<int64_t>::min(), 7}));
    EXPECT_EQ(t.member_class("empty"), H5T_FLOAT);
    EXPECT_EQ(t.numbers("number"), (std::vector<double>{1000.0, -HUGE_VAL, 0.5}));
    EXPECT_EQ(t.member_class("hex"), H5T_STRING);
    EXPECT_EQ(t.texts("flag"), (std::vector<std::string>{"true", "nan", "false"}));
    EXPECT_EQ(t.member_class("a.b"), H5T_INTEGER);
    EXPECT_EQ(t.member_size("words"), 3u);  // UTF-8 bytes: "nan", and é is 2
    EXPECT_EQ(t.texts("words"), (std::vector<std::string>{"é", "x", "nan"}));
  }
  write_results_hdf5(scratch.path() / "empty.h5", header, {});
  const test::ResultsTable empty(scratch.path() / "empty.h5");
  EXPECT_EQ(empty.rows(), 0u);
  EXPECT_EQ(empty.member_class("signed"), H5T_STRING);
  EXPECT_EQ(empty.member_size("signed"), 1u);
}

}  // namespace
}  // namespace upsim::cli

// HDF5 measurement tables (calibration/fitting/hdf5_measurements.h): round trip and errors.
#include "calibration/fitting/hdf5_measurements.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "calibration/fitting/fit_kernel_calibration.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;
const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

std::filesystem::path temp_path(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "upsim_hdf5";
  std::filesystem::create_directories(dir);
  return dir / name;
}

HardwareProfile a100() {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_80gb.yaml");
  return load_hardware_profile(doc.root());
}

std::string calibration_text(const std::vector<KernelMeasurement>& rows) {
  const CalibrationResult result = fit_kernel_calibration(rows, a100(), "test");
  return kernel_calibration_yaml(result.calibration, calibration_header(result));
}

/// Builds broken files with the HDF5 C API: one group per op, datasets added one by one.
class Fixture {
 public:
  explicit Fixture(const std::filesystem::path& path)
      : path_(path),
        file_(H5Fcreate(path.string().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) {}
  ~Fixture() {
    for (hid_t g : groups_)
      H5Gclose(g);
    H5Fclose(file_);
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  hid_t group(const std::string& name) {
    groups_.push_back(H5Gcreate2(file_, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    return groups_.back();
  }
  void ints(hid_t g, const char* name, const std::vector<int64_t>& v) {
    write(g, name, H5T_STD_I64LE, H5T_NATIVE_INT64, v.size(), v.data());
  }
  void doubles(hid_t g, const char* name, const std::vector<double>& v) {
    write(g, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, v.size(), v.data());
  }
  /// Fixed-length strings (what numpy `S` arrays give).
  void strings(hid_t g, const char* name, const std::vector<std::string>& v) {
    const size_t size = 8;
    std::vector<char> buffer(v.size() * size, '\0');
    for (size_t i = 0; i < v.size(); ++i)
      v[i].copy(buffer.data() + i * size, size);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, size);
    H5Tset_strpad(type, H5T_STR_NULLPAD);
    write(g, name, type, type, v.size(), buffer.data());
    H5Tclose(type);
  }
  /// A valid relu group of `length` rows.
  hid_t relu(size_t length) {
    const hid_t g = group("relu");
    strings(g, "dtype", std::vector<std::string>(length, "fp16"));
    ints(g, "m", std::vector<int64_t>(length, 4));
    ints(g, "n", std::vector<int64_t>(length, 1024));
    doubles(g, "time_us", std::vector<double>(length, 3.0));
    return g;
  }
  /// A dataset that claims `length` rows without storing them (chunked, never written): the
  /// header of a corrupt or hostile file.
  void claimed(hid_t g, const char* name, hsize_t length) {
    const hid_t space = H5Screate_simple(1, &length, nullptr);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk = 1024;
    H5Pset_chunk(plist, 1, &chunk);
    const hid_t d = H5Dcreate2(g, name, H5T_STD_I64LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    H5Dclose(d);
    H5Pclose(plist);
    H5Sclose(space);
  }
  std::string error() {
    H5Fflush(file_, H5F_SCOPE_GLOBAL);
    try {
      read_measurement_hdf5(path_);
    } catch (const CalibrationDataError& e) {
      return e.what();
    }
    return "no error";
  }

 private:
  static void write(hid_t g, const char* name, hid_t file_type, hid_t memory_type, size_t length,
                    const void* data) {
    const hsize_t dims = length;
    const hid_t space = H5Screate_simple(1, &dims, nullptr);
    const hid_t d = H5Dcreate2(g, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(d);
    H5Sclose(space);
  }

  std::filesystem::path path_;
  hid_t file_;
  std::vector<hid_t> groups_;
};

TEST(Hdf5Measurements, WritesRegularFilesOnlyAndTheSameBytesForTheSameRows) {
  const auto csv = read_llmcompass_dir(kData / "llmcompass", "A100");
  // Built in memory: the same rows give the same bytes, and libhdf5 opens no path.
  const std::string image = measurement_hdf5_image("a.h5", csv, "A100", "LLMCompass");
  const auto first_difference = [&image](const std::string& other) {
    const auto [at, unused] = std::mismatch(image.begin(), image.end(), other.begin(), other.end());
    return fmt::format("{} and {} bytes, first difference at byte {}", image.size(), other.size(),
                       at - image.begin());
  };
  const std::string again = measurement_hdf5_image("a.h5", csv, "A100", "LLMCompass");
  EXPECT_TRUE(image == again) << first_difference(again);
  // libhdf5 stamps each object with the second it was made unless told not to: an image made in
  // a later second holds the same bytes too.
  std::this_thread::sleep_until(
      std::chrono::ceil<std::chrono::seconds>(std::chrono::system_clock::now()) +
      std::chrono::milliseconds(20));
  const std::string later = measurement_hdf5_image("a.h5", csv, "A100", "LLMCompass");
  EXPECT_TRUE(image == later) << first_difference(later);
  EXPECT_EQ(image.compare(0, 8, "\x89HDF\r\n\x1a\n"), 0);
  // A symbolic link at the name is refused, its target untouched (libhdf5's own file creation
  // followed it).
  const std::filesystem::path victim = temp_path("victim.txt");
  std::ofstream(victim) << "keep\n";
  const std::filesystem::path link = temp_path("linked.h5");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(victim, link);
  EXPECT_THROW(write_measurement_hdf5(link, csv, "A100", "LLMCompass"), CalibrationDataError);
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep");
  std::filesystem::remove(link);
  std::filesystem::remove(victim);
  // A pipe at the name is refused at once (opening it for writing waited for a reader).
  const std::filesystem::path pipe = temp_path("pipe.h5");
  std::filesystem::remove(pipe);
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  EXPECT_THROW(write_measurement_hdf5(pipe, csv, "A100", "LLMCompass"), CalibrationDataError);
  std::filesystem::remove(pipe);
  // Written, the file is the image.
  const std::filesystem::path path = temp_path("image.h5");
  write_measurement_hdf5(path, csv, "A100", "LLMCompass");
  std::ifstream f(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, image);
}

TEST(Hdf5Measurements, RoundTripsTheLlmcompassSweeps) {
  const auto csv = read_llmcompass_dir(kData / "llmcompass", "A100");
  const std::filesystem::path path = temp_path("a100.h5");
  write_measurement_hdf5(path, csv, "A100", "LLMCompass");
  const auto h5 = read_measurement_hdf5(path);
  ASSERT_EQ(h5.size(), csv.size());
  for (size_t i = 0; i < csv.size(); ++i) {
    SCOPED_TRACE(csv[i].origin);
    EXPECT_EQ(h5[i].op, csv[i].op);
    const KernelDesc& a = h5[i].kernel;
    const KernelDesc& b = csv[i].kernel;
    EXPECT_EQ(a.cls, b.cls);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.memory_op, b.memory_op);
    EXPECT_EQ(std::tie(a.batch, a.m, a.n, a.k, a.row_elements),
              std::tie(b.batch, b.m, b.n, b.k, b.row_elements));
    EXPECT_EQ(a.bytes_read, b.bytes_read);
    EXPECT_EQ(a.bytes_written, b.bytes_written);
    EXPECT_EQ(a.flops, b.flops);
    EXPECT_EQ(h5[i].seconds, csv[i].seconds);
    EXPECT_EQ(h5[i].held_out, csv[i].held_out);
  }
  EXPECT_NE(h5[0].origin.find("a100.h5:/gemm[0]"), std::string::npos) << h5[0].origin;
  EXPECT_EQ(calibration_text(h5), calibration_text(csv));
}

// A `# harness: fitted` table round-trips its declaration (file attribute `harness`).
TEST(Hdf5Measurements, RoundTripsAFittedHarness) {
  const auto csv = read_measurement_csv(kData / "liger-kernel" / "h100_relu_squared.csv");
  ASSERT_FALSE(csv.empty());
  ASSERT_TRUE(csv[0].harness_declared);
  ASSERT_FALSE(csv[0].harness_none);
  const std::filesystem::path path = temp_path("relu_squared.h5");
  write_measurement_hdf5(path, csv, "H100", "Liger-Kernel");
  const auto h5 = read_measurement_hdf5(path);
  ASSERT_EQ(h5.size(), csv.size());
  for (const KernelMeasurement& r : h5) {
    EXPECT_TRUE(r.harness_declared);
    EXPECT_FALSE(r.harness_none);
  }
}

// A table with its own traffic (reads 2, writes 1) and curve declaration round-trips: the
// datasets `reads` / `writes` and the file attribute `curve`; rows on two curves cannot share a
// file.
TEST(Hdf5Measurements, RoundTripsTrafficAndCurve) {
  const auto csv =
      read_measurement_csv(kData / "liger-kernel" / "h100_megatron_swiglu_forward.csv");
  ASSERT_EQ(csv.size(), 6u);
  ASSERT_EQ(csv[0].curve, "swiglu");
  const std::filesystem::path path = temp_path("swiglu.h5");
  write_measurement_hdf5(path, csv, "H100", "Liger-Kernel");
  const auto h5 = read_measurement_hdf5(path);
  ASSERT_EQ(h5.size(), csv.size());
  for (size_t i = 0; i < csv.size(); ++i) {
    SCOPED_TRACE(csv[i].origin);
    EXPECT_EQ(h5[i].kernel.bytes_read, csv[i].kernel.bytes_read);
    EXPECT_EQ(h5[i].kernel.bytes_written, csv[i].kernel.bytes_written);
    EXPECT_EQ(h5[i].traffic.reads, 2.0);
    EXPECT_EQ(h5[i].traffic.writes, 1.0);
    EXPECT_EQ(h5[i].curve, "swiglu");
    EXPECT_TRUE(h5[i].harness_none);
  }
  const auto ce =
      read_measurement_csv(kData / "liger-kernel" / "h100_megatron_cross_entropy_forward.csv");
  std::vector<KernelMeasurement> both = csv;
  both.insert(both.end(), ce.begin(), ce.end());
  try {
    write_measurement_hdf5(temp_path("two_curves.h5"), both, "H100", "Liger-Kernel");
    ADD_FAILURE() << "stored rows of two curves in one file";
  } catch (const CalibrationDataError& e) {
    EXPECT_NE(std::string(e.what()).find("one file states one `curve`"), std::string::npos)
        << e.what();
  }
}

/// The string attribute `name` of the file's root group (empty when absent).
std::string root_attribute(const std::filesystem::path& path, const char* name) {
  const hid_t file = H5Fopen(path.string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  std::string value;
  if (file >= 0 && H5Aexists(file, name) > 0) {
    // upsim writes variable-length UTF-8 strings.
    const hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
    const hid_t type = H5Aget_type(attr);
    char* text = nullptr;
    if (H5Tis_variable_str(type) > 0 && H5Aread(attr, type, &text) >= 0 && text != nullptr) {
      value = text;
      H5free_memory(text);
    }
    H5Tclose(type);
    H5Aclose(attr);
  }
  if (file >= 0) H5Fclose(file);
  return value;
}

// The metadata of converted tables (bench/gpu's `# key: value` lines) become file attributes;
// bad names are refused before anything is written.
TEST(Hdf5Measurements, WritesTableMetadataAsFileAttributes) {
  const std::filesystem::path dir = UPSIM_CALIBRATION_TEST_DATA;
  const auto rows = read_measurement_csv(dir / "microbench_synthetic_gemm.csv");
  const auto metadata = read_csv_metadata(dir / "microbench_synthetic_gemm.csv");
  ASSERT_EQ(metadata.size(), 3u);
  EXPECT_EQ(metadata[0].first, "SYNTHETIC");  // the file's own label, a `# key: value` line too
  EXPECT_EQ(metadata[1], (std::pair<std::string, std::string>{"gpu", "Synthetic GPU"}));
  EXPECT_EQ(metadata[2].first, "measured_utc");
  const std::filesystem::path path = temp_path("meta.h5");
  write_measurement_hdf5(path, rows, "H200", "bench", {{"measured_utc", metadata[2].second}});
  EXPECT_EQ(root_attribute(path, "gpu"), "H200");
  EXPECT_EQ(root_attribute(path, "measured_utc"), "2026-12-01T00:00:00Z");
  EXPECT_EQ(read_measurement_hdf5(path).size(), rows.size());
  for (const auto& bad : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"gpu", "x"}}, {{"", "x"}}, {{"a", "1"}, {"a", "2"}}}) {
    EXPECT_THROW(write_measurement_hdf5(temp_path("bad_meta.h5"), rows, "H200", "bench", bad),
                 CalibrationDataError);
  }
}

TEST(Hdf5Measurements, ReadsFilesOfOtherWriters) {
  // No creation order (groups by name), fixed-length strings, time_us, no split, no batch.
  const std::filesystem::path path = temp_path("other.h5");
  {
    Fixture f(path);
    const hid_t gemm = f.group("gemm");
    f.strings(gemm, "dtype", {"bf16", "fp16", "fp16"});
    f.ints(gemm, "m", {64, 128, 256});
    f.ints(gemm, "n", {64, 64, 64});
    f.ints(gemm, "k", {32, 32, 32});
    f.doubles(gemm, "time_us", {1.5, 2.0, 4.0});
    f.relu(1);
  }
  const auto rows = read_measurement_hdf5(path);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].op, "gemm");
  EXPECT_EQ(rows[0].kernel.dtype, DType::kBf16);
  EXPECT_EQ(rows[1].kernel.m, 128);
  EXPECT_EQ(rows[1].kernel.batch, 1);
  EXPECT_DOUBLE_EQ(rows[2].seconds, 4e-6);
  // The CSV rule: alternate per op in dataset order.
  EXPECT_FALSE(rows[0].held_out);
  EXPECT_TRUE(rows[1].held_out);
  EXPECT_FALSE(rows[2].held_out);
  EXPECT_EQ(rows[3].op, "relu");
  EXPECT_FALSE(rows[3].held_out);
  EXPECT_DOUBLE_EQ(rows[3].kernel.bytes_read, 4 * 1024 * 2);
}

TEST(Hdf5Measurements, BadFilesGiveClearErrors) {
  const auto contains = [](const std::string& error, const std::string& part) {
    EXPECT_NE(error.find(part), std::string::npos) << error;
  };
  {
    // Found by fuzzing: a header claiming 2.2 billion rows made the reader allocate 17 GB.
    Fixture f(temp_path("claims.h5"));
    const hid_t g = f.group("relu");
    f.strings(g, "dtype", {"fp16"});
    f.claimed(g, "m", 2'231'369'748);
    f.ints(g, "n", {1024});
    f.doubles(g, "time_us", {3.0});
    contains(f.error(), "claims.h5:/relu/m: claims 2231369748 rows; at most 10000000 are read");
  }
  {
    Fixture f(temp_path("missing.h5"));
    const hid_t g = f.group("gemm");
    f.strings(g, "dtype", {"fp16"});
    f.ints(g, "m", {1});
    f.ints(g, "n", {1});
    f.doubles(g, "time_us", {1.0});
    contains(f.error(), "missing.h5:/gemm/k: missing dataset");
  }
  {
    Fixture f(temp_path("length.h5"));
    const hid_t g = f.relu(2);
    f.ints(g, "split", {0, 1, 0});
    contains(f.error(), "length.h5:/relu/split: has 3 elements but `dtype` has 2");
  }
  {
    Fixture f(temp_path("time.h5"));
    const hid_t g = f.group("gelu");
    f.strings(g, "dtype", {"fp16", "fp16"});
    f.ints(g, "m", {1, 1});
    f.ints(g, "n", {8, 16});
    f.doubles(g, "time_us", {1.0, 0.0});
    contains(f.error(), "time.h5:/gelu/time_us[1]: time_us must be positive, got 0");
  }
  {
    Fixture f(temp_path("negative.h5"));
    const hid_t g = f.group("gelu");
    f.strings(g, "dtype", {"fp16"});
    f.ints(g, "m", {1});
    f.ints(g, "n", {8});
    f.doubles(g, "time_s", {-1.0});
    contains(f.error(), "negative.h5:/gelu/time_s[0]: time_s must be positive");
  }
  {
    Fixture f(temp_path("op.h5"));
    f.group("swish");
    contains(f.error(), "op.h5:/swish: unknown op group `swish`; valid: gemm, relu");
  }
  {
    Fixture f(temp_path("dtype.h5"));
    const hid_t g = f.group("relu");
    f.strings(g, "dtype", {"fp16", "fp64"});
    f.ints(g, "m", {1, 1});
    f.ints(g, "n", {1, 1});
    f.doubles(g, "time_us", {1.0, 1.0});
    contains(f.error(), "dtype.h5:/relu/dtype[1]: unknown dtype `fp64`");
  }
  {
    Fixture f(temp_path("unknown.h5"));
    const hid_t g = f.relu(1);
    f.ints(g, "k", {1});
    contains(f.error(), "unknown.h5:/relu/k: unknown dataset in a `relu` group");
  }
  {
    Fixture f(temp_path("class.h5"));
    const hid_t g = f.group("relu");
    f.strings(g, "dtype", {"fp16"});
    f.doubles(g, "m", {1.0});
    f.ints(g, "n", {1});
    f.doubles(g, "time_us", {1.0});
    contains(f.error(), "class.h5:/relu/m: must hold integers");
  }
  {
    Fixture f(temp_path("dims.h5"));
    const hid_t g = f.relu(1);
    f.ints(g, "split", {2});
    contains(f.error(), "dims.h5:/relu/split[0]: split must be 0 (train) or 1 (held out), got 2");
  }
  {
    Fixture f(temp_path("both.h5"));
    const hid_t g = f.relu(1);
    f.doubles(g, "time_s", {1.0});
    contains(f.error(), "give one of the datasets time_s and time_us");
  }
  {
    Fixture f(temp_path("root.h5"));
    f.ints(f.group("relu"), "m", {1});
    contains(f.error(), "root.h5:/relu/dtype: missing dataset");
  }
  std::ofstream(temp_path("text.h5")) << "op,dtype\n";
  contains(
      [] {
        try {
          read_measurement_hdf5(temp_path("text.h5"));
        } catch (const CalibrationDataError& e) {
          return std::string(e.what());
        }
        return std::string("no error");
      }(),
      "text.h5: not an HDF5 file");
  EXPECT_THROW(read_measurement_hdf5(kData / "does_not_exist.h5"), CalibrationDataError);
}

TEST(Hdf5Measurements, AFileThatCrashesLibhdf5IsAnError) {
  // Found by fuzzing (data/libhdf5_crash.h5, a mutation of a file upsim wrote): libhdf5 1.10
  // frees an invalid pointer while listing the file's links (AddressSanitizer stops there; a
  // plain build may get through to an error). The reader runs in a child process, so either way
  // the result is an error naming the file, never a crash of upsim.
  const std::string path = std::string(UPSIM_CALIBRATION_TEST_DATA) + "/libhdf5_crash.h5";
  try {
    read_measurement_hdf5(path);
    FAIL() << "no error";
  } catch (const CalibrationDataError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0U) << e.what();
  }
}

TEST(Hdf5Measurements, AFileOnWhichLibhdf5LoopsIsAnErrorAfterTheTimeLimit) {
  // Found by fuzzing (data/libhdf5_hang.h5, a mutation of a file upsim wrote): libhdf5 1.10
  // never returns from reading its `provenance` attribute (a variable-length string in a global
  // heap the mutation broke). The child reading it is killed at the time limit, here 1 s.
  const std::string path = std::string(UPSIM_CALIBRATION_TEST_DATA) + "/libhdf5_hang.h5";
  const auto start = std::chrono::steady_clock::now();
  try {
    read_measurement_hdf5(path, std::chrono::seconds(1));
    FAIL() << "no error";
  } catch (const CalibrationDataError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0U) << e.what();
    EXPECT_NE(std::string(e.what()).find("did not finish reading it within 1.0 s"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Hdf5Measurements, ANumberOfGigabytesPerElementIsRefusedBeforeItIsRead) {
  // Found by fuzzing (data/huge_element_size.h5, a mutation of a file upsim wrote): its `split`
  // dataset states 4294967295-byte integers, for which libhdf5 callocs a 4 GiB conversion
  // buffer per read (2.5 s of page faults in a Release build, a timeout under ASan).
  const std::string path = std::string(UPSIM_CALIBRATION_TEST_DATA) + "/huge_element_size.h5";
  try {
    read_measurement_hdf5(path);
    FAIL() << "no error";
  } catch (const CalibrationDataError& e) {
    EXPECT_NE(std::string(e.what()).find("/gemm/split: numbers of 4294967295 bytes; at most 8"),
              std::string::npos)
        << e.what();
  }
}

TEST(Hdf5Measurements, WriterRejectsRowsWithoutALayout) {
  KernelMeasurement row;
  row.op = "embedding_forward";
  row.kernel.cls = KernelClass::kEmbeddingForward;
  row.seconds = 1e-6;
  row.origin = "x.csv:2";
  EXPECT_THROW(write_measurement_hdf5(temp_path("embedding.h5"), {row}, "A100", "test"),
               CalibrationDataError);
}

}  // namespace
}  // namespace upsim

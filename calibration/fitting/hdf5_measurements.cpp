#include "calibration/fitting/hdf5_measurements.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "calibration/kernel_calibration.h"
#include "sim/input_file.h"

// Provided by the sanitizer runtimes when present (weak: null in plain builds).
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace upsim {
namespace {

/// Bounds checked before reading (dtype names are a few characters; sweeps thousands of rows).
constexpr hsize_t kMaxRowsPerDataset = 10'000'000;
constexpr size_t kMaxStringBytes = 256;

/// Silences HDF5's automatic error printing for the guard's lifetime (failures become
/// CalibrationDataError instead), then restores whatever handler was installed.
class ErrorPrintingOff {
 public:
  ErrorPrintingOff() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~ErrorPrintingOff() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  ErrorPrintingOff(const ErrorPrintingOff&) = delete;
  ErrorPrintingOff& operator=(const ErrorPrintingOff&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

/// An HDF5 identifier closed by `Close` on destruction (negative = none).
template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  explicit Handle(hid_t id = -1) : id_(id) {}
  ~Handle() {
    if (id_ >= 0) Close(id_);
  }
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      if (id_ >= 0) Close(id_);
      id_ = std::exchange(other.id_, -1);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Closes now; false when closing failed (e.g. a file's final flush).
  bool close() {
    const herr_t status = id_ >= 0 ? Close(id_) : 0;
    id_ = -1;
    return status >= 0;
  }

 private:
  hid_t id_;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Object = Handle<H5Oclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;
using PropertyList = Handle<H5Pclose>;

std::string valid_ops() {
  std::string out = "gemm";
  for (std::string_view name : kMemoryOpNames) {
    if (name != "unspecified") out += fmt::format(", {}", name);
  }
  return out;
}

/// Reads the datasets of one op group of one file; every error names file, group and dataset.
class GroupReader {
 public:
  GroupReader(const std::filesystem::path& file, hid_t group, std::string name)
      : file_(file.string()), group_(group), name_(std::move(name)) {}

  [[noreturn]] void fail(std::string_view dataset, std::string_view message) const {
    throw CalibrationDataError(fmt::format("{}:/{}/{}: {}", file_, name_, dataset, message));
  }
  [[noreturn]] void fail_group(std::string_view message) const {
    throw CalibrationDataError(fmt::format("{}:/{}: {}", file_, name_, message));
  }

  /// The names of the group's members, sorted.
  std::set<std::string> members() const {
    H5G_info_t info;
    if (H5Gget_info(group_, &info) < 0) fail_group("cannot list the group's members");
    std::set<std::string> out;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t size =
          H5Lget_name_by_idx(group_, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (size < 0) fail_group("cannot list the group's members");
      std::string member(static_cast<size_t>(size) + 1, '\0');
      H5Lget_name_by_idx(group_, ".", H5_INDEX_NAME, H5_ITER_INC, i, member.data(), member.size(),
                         H5P_DEFAULT);
      member.resize(static_cast<size_t>(size));
      out.insert(std::move(member));
    }
    return out;
  }

  /// Opens the 1-D dataset `name`; its length in `length`.
  Dataset open(std::string_view dataset, hsize_t& length) const {
    const std::string name(dataset);
    Object object(H5Oopen(group_, name.c_str(), H5P_DEFAULT));
    if (!object.valid()) fail(dataset, "cannot open the dataset");
    if (H5Iget_type(object.get()) != H5I_DATASET) fail(dataset, "not a dataset");
    Dataset d(H5Dopen2(group_, name.c_str(), H5P_DEFAULT));
    if (!d.valid()) fail(dataset, "cannot open the dataset");
    const Dataspace space(H5Dget_space(d.get()));
    if (!space.valid() || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE ||
        H5Sget_simple_extent_ndims(space.get()) != 1) {
      fail(dataset, "must be a 1-D dataset");
    }
    H5Sget_simple_extent_dims(space.get(), &length, nullptr);
    // Shapes are checked before anything is read: a corrupt or hostile header may claim billions
    // of rows (kernel sweeps hold thousands).
    if (length > kMaxRowsPerDataset) {
      fail(dataset, fmt::format("claims {} rows; at most {} are read", length, kMaxRowsPerDataset));
    }
    return d;
  }

  /// The class of a dataset's elements. A number of more than 8 bytes is refused here: libhdf5
  /// allocates its conversion buffer from the stated element size (a corrupt 4 GiB integer made
  /// it calloc 4 GiB per read; found by fuzzing).
  H5T_class_t type_class(std::string_view dataset, const Dataset& d) const {
    const Datatype type(H5Dget_type(d.get()));
    if (!type.valid()) fail(dataset, "cannot read the element type");
    const H5T_class_t cls = H5Tget_class(type.get());
    if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
      const size_t bytes = H5Tget_size(type.get());
      if (bytes == 0 || bytes > 8) {
        fail(dataset, fmt::format("numbers of {} bytes; at most 8 (int64, double)", bytes));
      }
    }
    return cls;
  }

  std::vector<int64_t> integers(std::string_view dataset, hsize_t& length) const {
    const Dataset d = open(dataset, length);
    if (type_class(dataset, d) != H5T_INTEGER) fail(dataset, "must hold integers");
    std::vector<int64_t> out(length);
    if (length > 0 &&
        H5Dread(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
      fail(dataset, "cannot read the dataset");
    }
    return out;
  }

  std::vector<double> numbers(std::string_view dataset, hsize_t& length) const {
    const Dataset d = open(dataset, length);
    const H5T_class_t cls = type_class(dataset, d);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) fail(dataset, "must hold numbers");
    std::vector<double> out(length);
    if (length > 0 &&
        H5Dread(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
      fail(dataset, "cannot read the dataset");
    }
    return out;
  }

  std::vector<std::string> strings(std::string_view dataset, hsize_t& length) const {
    const Dataset d = open(dataset, length);
    const Datatype file_type(H5Dget_type(d.get()));
    if (!file_type.valid() || H5Tget_class(file_type.get()) != H5T_STRING) {
      fail(dataset, "must hold strings");
    }
    std::vector<std::string> out;
    if (length == 0) return out;
    const Datatype memory_type(H5Tcopy(H5T_C_S1));
    H5Tset_cset(memory_type.get(), H5Tget_cset(file_type.get()));
    if (H5Tis_variable_str(file_type.get()) > 0) {
      H5Tset_size(memory_type.get(), H5T_VARIABLE);
      std::vector<char*> buffer(length, nullptr);
      if (H5Dread(d.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) < 0) {
        fail(dataset, "cannot read the dataset");
      }
      for (const char* s : buffer)
        out.emplace_back(s != nullptr ? s : "");
      const Dataspace space(H5Dget_space(d.get()));
#if H5_VERSION_GE(1, 12, 0)
      H5Treclaim(memory_type.get(), space.get(), H5P_DEFAULT, buffer.data());
#else
      H5Dvlen_reclaim(memory_type.get(), space.get(), H5P_DEFAULT, buffer.data());
#endif
    } else {
      // One byte more than the file's size so that NULLTERM keeps every stored character.
      const size_t stored = H5Tget_size(file_type.get());
      if (stored == 0 || stored > kMaxStringBytes) {
        fail(dataset, fmt::format("fixed-length strings of {} bytes; expected 1 to {}", stored,
                                  kMaxStringBytes));
      }
      const size_t size = stored + 1;
      H5Tset_size(memory_type.get(), size);
      H5Tset_strpad(memory_type.get(), H5T_STR_NULLTERM);
      std::vector<char> buffer(length * size, '\0');
      if (H5Dread(d.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) < 0) {
        fail(dataset, "cannot read the dataset");
      }
      for (hsize_t i = 0; i < length; ++i) {
        const char* s = buffer.data() + i * size;
        out.emplace_back(s, strnlen(s, size));
      }
    }
    return out;
  }

 private:
  std::string file_;
  hid_t group_;
  std::string name_;
};

/// The rows of op group `name` (already opened as `group`).
std::vector<KernelMeasurement> read_group(const std::filesystem::path& path, hid_t group,
                                          const std::string& name) {
  const GroupReader reader(path, group, name);
  const bool gemm = name == "gemm";
  std::optional<MemoryOp> op;
  if (!gemm) {
    op = parse_memory_op(name);
    if (!op || *op == MemoryOp::kUnspecified) {
      reader.fail_group(fmt::format("unknown op group `{}`; valid: {}", name, valid_ops()));
    }
  }
  const std::string usage = gemm ? "dtype, m, n, k, time_s or time_us; optional: batch, split"
                                 : "dtype, m, n, time_s or time_us; optional: reads, writes, split";
  const std::set<std::string> members = reader.members();
  for (const std::string& member : members) {
    const bool known = member == "dtype" || member == "m" || member == "n" || member == "time_s" ||
                       member == "time_us" || member == "split" ||
                       (gemm && (member == "k" || member == "batch")) ||
                       (!gemm && (member == "reads" || member == "writes"));
    if (!known) {
      reader.fail(member,
                  fmt::format("unknown dataset in a `{}` group (required: {})", name, usage));
    }
  }
  const auto require = [&](std::string_view dataset) {
    if (!members.contains(std::string(dataset))) {
      reader.fail(dataset, fmt::format("missing dataset (required: {})", usage));
    }
  };
  require("dtype");
  require("m");
  require("n");
  if (gemm) require("k");
  const bool in_seconds = members.contains("time_s");
  if (in_seconds && members.contains("time_us")) {
    reader.fail("time_us", "give one of the datasets time_s and time_us, not both");
  }
  if (!in_seconds) require("time_us");

  hsize_t length = 0;
  const std::vector<std::string> dtypes = reader.strings("dtype", length);
  const auto check_length = [&](std::string_view dataset, hsize_t other) {
    if (other != length) {
      reader.fail(dataset,
                  fmt::format("has {} elements but `dtype` has {}; all datasets of a group "
                              "must have the same length",
                              other, length));
    }
  };
  const auto dims = [&](std::string_view dataset) {
    hsize_t n = 0;
    std::vector<int64_t> values = reader.integers(dataset, n);
    check_length(dataset, n);
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] <= 0) {
        reader.fail(fmt::format("{}[{}]", dataset, i),
                    fmt::format("{} must be positive, got {}", dataset, values[i]));
      }
    }
    return values;
  };
  const std::vector<int64_t> m = dims("m");
  const std::vector<int64_t> n = dims("n");
  const std::vector<int64_t> k = gemm ? dims("k") : std::vector<int64_t>();
  const std::vector<int64_t> batch =
      gemm && members.contains("batch") ? dims("batch") : std::vector<int64_t>(length, 1);
  const std::string time_name = in_seconds ? "time_s" : "time_us";
  hsize_t time_length = 0;
  const std::vector<double> times = reader.numbers(time_name, time_length);
  check_length(time_name, time_length);
  // Tensors of m x n read and written per memory-op row (default 1 and 1).
  const auto traffic_column = [&](const std::string& dataset, bool zero_allowed) {
    std::vector<double> values(length, 1.0);
    if (!members.contains(dataset)) return values;
    hsize_t count = 0;
    values = reader.numbers(dataset, count);
    check_length(dataset, count);
    for (size_t i = 0; i < values.size(); ++i) {
      const bool ok = zero_allowed ? values[i] >= 0.0 : values[i] > 0.0;
      if (!ok || !std::isfinite(values[i])) {
        reader.fail(fmt::format("{}[{}]", dataset, i),
                    fmt::format("{} must be {}, got {}", dataset,
                                zero_allowed ? ">= 0" : "positive", values[i]));
      }
    }
    return values;
  };
  const std::vector<double> reads = traffic_column("reads", false);
  const std::vector<double> writes = traffic_column("writes", true);
  std::vector<int64_t> split;
  if (members.contains("split")) {
    hsize_t split_length = 0;
    split = reader.integers("split", split_length);
    check_length("split", split_length);
  }

  std::vector<KernelMeasurement> rows;
  rows.reserve(length);
  for (size_t i = 0; i < length; ++i) {
    const std::optional<DType> dtype = parse_dtype(dtypes[i]);
    if (!dtype) {
      reader.fail(
          fmt::format("dtype[{}]", i),
          fmt::format("unknown dtype `{}`; valid: fp32, tf32, fp16, bf16, fp8, int8", dtypes[i]));
    }
    KernelMeasurement row;
    row.op = name;
    if (!gemm) row.traffic = MemoryTraffic{reads[i], writes[i]};
    row.kernel = gemm ? gemm_kernel(*dtype, batch[i], m[i], n[i], k[i])
                      : memory_op_kernel(*op, *dtype, m[i], n[i], row.traffic);
    if (!(times[i] > 0.0) || !std::isfinite(times[i])) {
      reader.fail(fmt::format("{}[{}]", time_name, i),
                  fmt::format("{} must be positive, got {}", time_name, times[i]));
    }
    row.seconds = in_seconds ? times[i] : times[i] * 1e-6;
    if (!split.empty()) {
      if (split[i] != 0 && split[i] != 1) {
        reader.fail(fmt::format("split[{}]", i),
                    fmt::format("split must be 0 (train) or 1 (held out), got {}", split[i]));
      }
      row.held_out = split[i] == 1;
    } else {
      row.held_out = i % 2 == 1;  // assign_alternating_split within one file and op
    }
    row.origin = fmt::format("{}:/{}[{}]", path.string(), name, i);
    rows.push_back(std::move(row));
  }
  return rows;
}

/// One row in the layout's columns.
struct Columns {
  std::string dtype;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  MemoryTraffic traffic;
};

Columns columns_of(const KernelMeasurement& row, const std::filesystem::path& path) {
  const auto fail = [&](std::string_view why) {
    throw CalibrationDataError(fmt::format("{}: cannot store the measurement from {} (op `{}`): {}",
                                           path.string(), row.origin, row.op, why));
  };
  const KernelDesc& d = row.kernel;
  Columns c;
  c.dtype = std::string(dtype_name(d.dtype));
  if (row.op == "gemm") {
    if (d.cls != KernelClass::kGemm) fail("not a gemm kernel");
    c.m = d.m;
    c.n = d.n;
    c.k = d.k;
    c.batch = d.batch;
    return c;
  }
  const std::optional<MemoryOp> op = parse_memory_op(row.op);
  if (!op || *op == MemoryOp::kUnspecified || d.cls != KernelClass::kMemoryBound) {
    fail("only gemm and memory-bound ops have an HDF5 layout");
  }
  const std::optional<MemoryOpShape> shape = memory_op_shape(d, row.traffic);
  if (!shape) fail("the kernel is not the memory_op_kernel() of m rows of n elements");
  c.m = shape->m;
  c.n = shape->n;
  c.traffic = shape->traffic;
  return c;
}

class Writer {
 public:
  explicit Writer(std::filesystem::path path) : path_(std::move(path)) {
    // Objects carry no modification times, so that the same rows give the same bytes whenever
    // they are written (libhdf5 stamps each group and dataset with the second it was made).
    if (!dataset_create_.valid() || H5Pset_obj_track_times(dataset_create_.get(), false) < 0 ||
        !group_create_.valid() || H5Pset_obj_track_times(group_create_.get(), false) < 0) {
      fail("cannot set up object properties");
    }
  }

  hid_t group_create() const { return group_create_.get(); }

  [[noreturn]] void fail(std::string_view what) const {
    throw CalibrationDataError(
        fmt::format("{}: cannot write the HDF5 measurement file: {}", path_.string(), what));
  }

  void string_attribute(hid_t file, const char* name, std::string_view value) const {
    const Datatype type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), H5T_VARIABLE);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    const Dataspace space(H5Screate(H5S_SCALAR));
    const Attribute attr(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const std::string text(value);
    const char* data = text.c_str();
    if (!attr.valid() || H5Awrite(attr.get(), type.get(), &data) < 0) {
      fail(fmt::format("attribute `{}`", name));
    }
  }

  void dataset(hid_t group, std::string_view group_name, const char* name, hid_t file_type,
               hid_t memory_type, size_t length, const void* data) const {
    const hsize_t dims = length;
    const Dataspace space(H5Screate_simple(1, &dims, nullptr));
    const Dataset d(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT,
                               dataset_create_.get(), H5P_DEFAULT));
    if (!d.valid() || H5Dwrite(d.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
      fail(fmt::format("dataset /{}/{}", group_name, name));
    }
  }

 private:
  std::filesystem::path path_;
  PropertyList dataset_create_{H5Pcreate(H5P_DATASET_CREATE)};
  PropertyList group_create_{H5Pcreate(H5P_GROUP_CREATE)};
};

}  // namespace

namespace {

/// Longest string attribute read (the tables' declarations are words).
constexpr size_t kMaxAttributeChars = 4096;

/// The root's string attribute `name`, or nullopt when there is none.
std::optional<std::string> string_attribute(hid_t root, const char* name,
                                            const std::string& file_name) {
  if (H5Aexists(root, name) <= 0) return std::nullopt;
  const auto bad = [&](std::string_view why) {
    return CalibrationDataError(fmt::format("{}: file attribute `{}`: {}", file_name, name, why));
  };
  const Attribute attr(H5Aopen(root, name, H5P_DEFAULT));
  const Datatype type(attr.valid() ? H5Aget_type(attr.get()) : H5I_INVALID_HID);
  const Dataspace space(attr.valid() ? H5Aget_space(attr.get()) : H5I_INVALID_HID);
  if (!attr.valid() || !type.valid() || !space.valid()) throw bad("cannot be read");
  if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw bad("must be one string");
  }
  const Datatype memory(H5Tcopy(H5T_C_S1));
  // The file's character set: libhdf5 converts no string between ASCII and UTF-8.
  H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Tset_size(memory.get(), H5T_VARIABLE);
    char* data = nullptr;
    if (H5Aread(attr.get(), memory.get(), &data) < 0 || data == nullptr) {
      throw bad("cannot be read");
    }
    std::string text(data, strnlen(data, kMaxAttributeChars + 1));
    H5free_memory(data);
    if (text.size() > kMaxAttributeChars) throw bad("longer than 4096 bytes");
    return text;
  }
  const size_t bytes = H5Tget_size(type.get());
  if (bytes == 0 || bytes > kMaxAttributeChars) throw bad("longer than 4096 bytes");
  H5Tset_size(memory.get(), bytes);
  std::string text(bytes, '\0');
  if (H5Aread(attr.get(), memory.get(), text.data()) < 0) throw bad("cannot be read");
  text.resize(strnlen(text.data(), bytes));
  return text;
}

/// read_measurement_hdf5 in this process: libhdf5 may crash on a corrupt file.
std::vector<KernelMeasurement> read_in_process(const std::filesystem::path& path) {
  const ErrorPrintingOff quiet;
  const std::string file_name = path.string();
  if (H5Fis_hdf5(file_name.c_str()) <= 0) {
    throw CalibrationDataError(fmt::format("{}: not an HDF5 file", file_name));
  }
  const File file(H5Fopen(file_name.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw CalibrationDataError(fmt::format("{}: cannot open file", file_name));
  const Group root(H5Gopen2(file.get(), "/", H5P_DEFAULT));
  H5G_info_t info;
  if (!root.valid() || H5Gget_info(root.get(), &info) < 0) {
    throw CalibrationDataError(fmt::format("{}: cannot list the root group", file_name));
  }
  // Creation order where the file tracks it (upsim's writer), else name order.
  H5_index_t order = H5_INDEX_NAME;
  {
    const PropertyList create(H5Gget_create_plist(root.get()));
    unsigned flags = 0;
    if (create.valid() && H5Pget_link_creation_order(create.get(), &flags) >= 0 &&
        (flags & H5P_CRT_ORDER_TRACKED) != 0) {
      order = H5_INDEX_CRT_ORDER;
    }
  }
  std::vector<KernelMeasurement> rows;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size =
        H5Lget_name_by_idx(root.get(), ".", order, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) throw CalibrationDataError(fmt::format("{}: cannot list the root", file_name));
    std::string name(static_cast<size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(root.get(), ".", order, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(static_cast<size_t>(size));
    const Object object(H5Oopen(root.get(), name.c_str(), H5P_DEFAULT));
    if (!object.valid() || H5Iget_type(object.get()) != H5I_GROUP) {
      throw CalibrationDataError(
          fmt::format("{}:/{}: not a group; the root holds one group per op ({})", file_name, name,
                      valid_ops()));
    }
    std::vector<KernelMeasurement> part = read_group(path, object.get(), name);
    rows.insert(rows.end(), std::make_move_iterator(part.begin()),
                std::make_move_iterator(part.end()));
  }
  // The tables' declarations (kernel_measurements.h), as the CSV's `# key: value` lines.
  const std::optional<std::string> provenance =
      string_attribute(root.get(), "provenance", file_name);
  if (provenance && !is_provenance(*provenance)) {
    throw CalibrationDataError(
        fmt::format("{}: file attribute `provenance`: `{}` is not known; valid: measured, "
                    "published, physics",
                    file_name, *provenance));
  }
  const std::optional<std::string> harness = string_attribute(root.get(), "harness", file_name);
  if (harness && *harness != "none" && *harness != "fitted") {
    throw CalibrationDataError(
        fmt::format("{}: file attribute `harness`: `{}` is not known; valid: none, fitted",
                    file_name, *harness));
  }
  const std::optional<std::string> curve = string_attribute(root.get(), "curve", file_name);
  if (curve && !is_curve_name(*curve)) {
    throw CalibrationDataError(
        fmt::format("{}: file attribute `curve`: `{}` is not a curve name (lower-case letters, "
                    "digits and `_`)",
                    file_name, *curve));
  }
  for (KernelMeasurement& row : rows) {
    row.provenance = provenance.value_or("");
    row.harness_none = harness == "none";
    row.harness_declared = harness.has_value();
    if (!curve) continue;
    if (row.kernel.cls != KernelClass::kMemoryBound) {
      throw CalibrationDataError(
          fmt::format("{}: file attribute `curve` is for memory ops, and the file has a `{}` group",
                      file_name, row.op));
    }
    row.curve = *curve;
  }
  return rows;
}

// The child's report on the pipe: "E<message>" for an error, or one line per row,
// "R" then tab-separated: op, origin, seconds, held_out, and the kernel description's scalar
// fields (class, dtype, batch, m, n, k, bytes read and written, flops, memory op, row elements),
// then the harness (0 undeclared, 1 none, 2 fitted), provenance, the traffic's reads and
// writes and the curve, then "D" when
// complete. Doubles travel as hexadecimal floats
// (%a): the rows equal the child's exactly. HDF5 rows are gemm_kernel() or memory_op_kernel()
// descriptions, which have no other fields.
std::string encode_rows(const std::vector<KernelMeasurement>& rows) {
  std::string out;
  for (const KernelMeasurement& r : rows) {
    const KernelDesc& k = r.kernel;
    out += fmt::format(
        "R{}\t{}\t{:a}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t"  // op .. k
        "{:a}\t{:a}\t{:a}\t{}\t{}\t{}\t{}\t{:a}\t{:a}\t{}\n",
        r.op, r.origin, r.seconds, r.held_out ? 1 : 0, static_cast<int>(k.cls),
        static_cast<int>(k.dtype), k.batch, k.m, k.n, k.k, k.bytes_read, k.bytes_written, k.flops,
        static_cast<int>(k.memory_op), k.row_elements,
        r.harness_none ? 1 : (r.harness_declared ? 2 : 0), r.provenance, r.traffic.reads,
        r.traffic.writes, r.curve);
  }
  return out + "D\n";
}

std::vector<KernelMeasurement> decode_rows(std::string_view text, const std::string& file) {
  const auto broken = [&] {
    return CalibrationDataError(fmt::format("{}: corrupt report from the HDF5 reader", file));
  };
  constexpr size_t kFields = 20;
  std::vector<KernelMeasurement> rows;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end == std::string_view::npos) throw broken();
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    if (line == "D") return rows;
    if (line.empty() || line.front() != 'R') throw broken();
    std::vector<std::string> f;
    size_t start = 1;
    while (f.size() + 1 < kFields) {
      const size_t tab = line.find('\t', start);
      if (tab == std::string_view::npos) throw broken();
      f.emplace_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    f.emplace_back(line.substr(start));
    const auto number = [&](size_t i) { return std::strtod(f[i].c_str(), nullptr); };
    const auto integer = [&](size_t i) { return std::strtoll(f[i].c_str(), nullptr, 10); };
    KernelMeasurement row;
    row.op = f[0];
    row.origin = f[1];
    row.seconds = number(2);
    row.held_out = f[3] == "1";
    KernelDesc& k = row.kernel;
    k.cls = static_cast<KernelClass>(integer(4));
    k.dtype = static_cast<DType>(integer(5));
    k.batch = integer(6);
    k.m = integer(7);
    k.n = integer(8);
    k.k = integer(9);
    k.bytes_read = number(10);
    k.bytes_written = number(11);
    k.flops = number(12);
    k.memory_op = static_cast<MemoryOp>(integer(13));
    k.row_elements = integer(14);
    row.harness_none = f[15] == "1";
    row.harness_declared = f[15] != "0";
    row.provenance = f[16];
    row.traffic = MemoryTraffic{number(17), number(18)};
    row.curve = f[19];
    rows.push_back(std::move(row));
  }
  throw broken();
}

}  // namespace

std::vector<KernelMeasurement> read_measurement_hdf5(
    const std::filesystem::path& path, std::optional<std::chrono::milliseconds> time_limit) {
  const std::string file_name = path.string();
  if (const auto why = input_file_problem(path, 16 * kGiB)) {
    throw CalibrationDataError(fmt::format("{}: {}", file_name, *why));
  }
  // libhdf5 (1.10, Debian 12) crashes on some corrupt files inside its own code (found by
  // fuzzing: invalid frees while listing a group's links). The file is therefore read in a child
  // process; a crash there is an error naming the file here, never a crash of upsim. The child
  // runs libhdf5 and the allocator after fork(), so callers read HDF5 tables from one thread
  // (the commands that read them do; glibc's fork keeps malloc usable in the child).
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    throw CalibrationDataError(
        fmt::format("{}: cannot start the HDF5 reader: {}", file_name, std::strerror(errno)));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw CalibrationDataError(
        fmt::format("{}: cannot start the HDF5 reader: {}", file_name, std::strerror(errno)));
  }
  if (child == 0) {
    // In sanitizer and fuzzing builds a crash of libhdf5 here belongs to this child, which the
    // parent turns into an error: no death callback (libFuzzer's would file it as a finding).
    if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(nullptr);
    ::close(pipe_fds[0]);
    std::string report;
    try {
      report = encode_rows(read_in_process(path));
    } catch (const std::exception& e) {
      report = std::string("E") + e.what();
    }
    size_t done = 0;
    while (done < report.size()) {
      const ssize_t n = ::write(pipe_fds[1], report.data() + done, report.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(3);
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  // Reaped on every path (an exception too), its pipe closed; a child still running then is
  // killed first.
  struct Child {
    pid_t pid;
    int fd;
    int status = 0;
    bool reaped = false;
    void reap(bool kill_first) {
      if (reaped) return;
      if (kill_first) ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      reaped = true;
    }
    ~Child() {
      if (fd >= 0) ::close(fd);
      reap(true);
    }
  } reader{child, pipe_fds[0]};
  // The report of a file of kMaxRowsPerDataset-row datasets is a few hundred bytes a row; more
  // than this bound is a broken reader, not data.
  constexpr size_t kMaxReportBytes = size_t{4} << 30;
  // libhdf5 can also loop forever on a corrupt file (found by fuzzing: a global-heap string
  // attribute): by default the child has 10 s plus 1 s per 4 MiB of file to report, far more
  // than a measurement table takes (milliseconds), and is killed after that.
  std::error_code size_error;
  const uintmax_t file_bytes = std::filesystem::file_size(path, size_error);
  const std::chrono::milliseconds budget =
      time_limit.value_or(std::chrono::seconds(10) +
                          std::chrono::seconds(size_error ? 0 : file_bytes / (uintmax_t{4} << 20)));
  const auto deadline = std::chrono::steady_clock::now() + budget;
  std::string report;
  std::array<char, 1 << 16> buffer{};
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{reader.fd, POLLIN, 0};
    const int polled =
        left.count() > 0
            ? ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), INT32_MAX)))
            : 0;
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 0) {
      throw CalibrationDataError(fmt::format(
          "{}: corrupt HDF5 file: the HDF5 library did not finish reading it within {:.1f} s",
          file_name, static_cast<double>(budget.count()) / 1e3));
    }
    const ssize_t n = ::read(reader.fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (report.size() + static_cast<size_t>(n) > kMaxReportBytes) {
      throw CalibrationDataError(fmt::format(
          "{}: the HDF5 reader reported more than {} bytes; the file is not a measurement table",
          file_name, kMaxReportBytes));
    }
    report.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(reader.fd);
  reader.fd = -1;
  reader.reap(false);
  const int status = reader.status;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw CalibrationDataError(fmt::format(
        "{}: corrupt HDF5 file: the HDF5 library failed while reading it ({})", file_name,
        WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                            : fmt::format("exit status {}", WEXITSTATUS(status))));
  }
  if (!report.empty() && report.front() == 'E') throw CalibrationDataError(report.substr(1));
  return decode_rows(report, file_name);
}

namespace {

/// The rows' declarations as file attributes (kernel_measurements.h), when every row makes the
/// same one and no attribute states it; rows declared onto two curves cannot share a file.
void write_declarations(const Writer& writer, hid_t file, const std::filesystem::path& path,
                        const std::vector<KernelMeasurement>& rows,
                        const std::vector<std::pair<std::string, std::string>>& attributes) {
  const auto stated = [&](std::string_view name) {
    return std::any_of(attributes.begin(), attributes.end(),
                       [&](const auto& a) { return a.first == name; });
  };
  if (!rows.empty() && !rows.front().provenance.empty() && !stated("provenance") &&
      std::all_of(rows.begin(), rows.end(), [&](const KernelMeasurement& r) {
        return r.provenance == rows.front().provenance;
      })) {
    writer.string_attribute(file, "provenance", rows.front().provenance);
  }
  // One curve for the file's memory-op rows, or none: a layout with one attribute cannot
  // store rows declared onto different curves.
  const KernelMeasurement* curved = nullptr;
  for (const KernelMeasurement& r : rows) {
    if (!r.curve.empty() && curved == nullptr) curved = &r;
  }
  if (curved != nullptr) {
    for (const KernelMeasurement& r : rows) {
      if (r.curve != curved->curve) {
        throw CalibrationDataError(fmt::format(
            "{}: cannot store the measurement from {} (curve `{}`) beside the one from {} "
            "(curve `{}`): one file states one `curve`; write each table to a file of its own",
            path.string(), r.origin, r.curve, curved->origin, curved->curve));
      }
    }
    const auto it = std::find_if(attributes.begin(), attributes.end(),
                                 [](const auto& a) { return a.first == "curve"; });
    if (it == attributes.end()) {
      writer.string_attribute(file, "curve", curved->curve);
    } else if (it->second != curved->curve) {
      writer.fail(fmt::format("the attribute curve `{}` is not the rows' curve `{}`", it->second,
                              curved->curve));
    }
  }
  if (!rows.empty() && !stated("harness") &&
      std::all_of(rows.begin(), rows.end(),
                  [](const KernelMeasurement& r) { return r.harness_none; })) {
    writer.string_attribute(file, "harness", "none");
  } else if (!rows.empty() && !stated("harness") &&
             std::all_of(rows.begin(), rows.end(), [](const KernelMeasurement& r) {
               return r.harness_declared && !r.harness_none;
             })) {
    writer.string_attribute(file, "harness", "fitted");
  }
}

}  // namespace

std::string measurement_hdf5_image(
    const std::filesystem::path& path, const std::vector<KernelMeasurement>& rows,
    std::string_view gpu, std::string_view source,
    const std::vector<std::pair<std::string, std::string>>& attributes) {
  for (size_t i = 0; i < attributes.size(); ++i) {
    const std::string& name = attributes[i].first;
    bool repeated = false;
    for (size_t j = 0; j < i; ++j)
      repeated = repeated || attributes[j].first == name;
    if (name.empty() || name == "gpu" || name == "source" || repeated) {
      throw CalibrationDataError(fmt::format(
          "{}: file attribute `{}`: names must be non-empty, distinct and not gpu or source",
          path.string(), name));
    }
  }
  const ErrorPrintingOff quiet;
  // Columns per op, ops in order of their first rows.
  struct OpColumns {
    std::string op;
    std::vector<Columns> columns;
    std::vector<double> seconds;
    std::vector<uint8_t> split;
  };
  std::vector<OpColumns> ops;
  std::map<std::string, size_t, std::less<>> index;
  for (const KernelMeasurement& row : rows) {
    const auto [it, added] = index.emplace(row.op, ops.size());
    if (added) ops.push_back({row.op, {}, {}, {}});
    OpColumns& op = ops[it->second];
    op.columns.push_back(columns_of(row, path));
    if (!(row.seconds > 0.0)) {
      throw CalibrationDataError(fmt::format("{}: measurement from {} has time {} s; must be > 0",
                                             path.string(), row.origin, row.seconds));
    }
    op.seconds.push_back(row.seconds);
    op.split.push_back(row.held_out ? 1 : 0);
  }

  const Writer writer(path);
  const std::string file_name = path.string();
  const PropertyList create(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_link_creation_order(create.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  H5Pset_obj_track_times(create.get(), false);  // the root group: no modification time either
  // In memory (the core driver without a backing store): libhdf5 never opens a path, so it can
  // follow no link planted there; the caller writes the image.
  const PropertyList access(H5Pcreate(H5P_FILE_ACCESS));
  if (!access.valid() || H5Pset_fapl_core(access.get(), size_t{1} << 20, 0) < 0) {
    writer.fail("cannot set up an in-memory file");
  }
  File file(H5Fcreate(file_name.c_str(), H5F_ACC_TRUNC, create.get(), access.get()));
  if (!file.valid()) writer.fail("cannot create the file");
  writer.string_attribute(file.get(), "gpu", gpu);
  writer.string_attribute(file.get(), "source", source);
  for (const auto& [name, value] : attributes)
    writer.string_attribute(file.get(), name.c_str(), value);
  write_declarations(writer, file.get(), path, rows, attributes);

  // dtype names as fixed-length strings (null-padded to kDtypeChars): a reader then never asks
  // libhdf5 to follow variable-length heap references, the part of a file a corruption makes
  // crash the library.
  constexpr size_t kDtypeChars = 8;
  const Datatype string_type(H5Tcopy(H5T_C_S1));
  H5Tset_size(string_type.get(), kDtypeChars);
  H5Tset_strpad(string_type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(string_type.get(), H5T_CSET_UTF8);
  for (const OpColumns& op : ops) {
    const Group group(
        H5Gcreate2(file.get(), op.op.c_str(), H5P_DEFAULT, writer.group_create(), H5P_DEFAULT));
    if (!group.valid()) writer.fail(fmt::format("group /{}", op.op));
    const size_t length = op.columns.size();
    std::vector<char> dtypes(length * kDtypeChars, '\0');
    std::vector<int64_t> m, n, k, batch;
    for (size_t i = 0; i < length; ++i) {
      const Columns& c = op.columns[i];
      c.dtype.copy(dtypes.data() + i * kDtypeChars, std::min(c.dtype.size(), kDtypeChars));
      m.push_back(c.m);
      n.push_back(c.n);
      k.push_back(c.k);
      batch.push_back(c.batch);
    }
    const auto write = [&](const char* name, hid_t file_type, hid_t memory_type, const void* data) {
      writer.dataset(group.get(), op.op, name, file_type, memory_type, length, data);
    };
    write("dtype", string_type.get(), string_type.get(), dtypes.data());
    write("m", H5T_STD_I64LE, H5T_NATIVE_INT64, m.data());
    write("n", H5T_STD_I64LE, H5T_NATIVE_INT64, n.data());
    if (op.op == "gemm") {
      write("k", H5T_STD_I64LE, H5T_NATIVE_INT64, k.data());
      write("batch", H5T_STD_I64LE, H5T_NATIVE_INT64, batch.data());
    } else {
      // A memory op's traffic, when some row states other than one read and one write.
      std::vector<double> reads, writes;
      for (const Columns& c : op.columns) {
        reads.push_back(c.traffic.reads);
        writes.push_back(c.traffic.writes);
      }
      const auto all_one = [](const std::vector<double>& v) {
        return std::all_of(v.begin(), v.end(), [](double x) { return x == 1.0; });
      };
      if (!all_one(reads) || !all_one(writes)) {
        write("reads", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, reads.data());
        write("writes", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, writes.data());
      }
    }
    write("time_s", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, op.seconds.data());
    write("split", H5T_STD_U8LE, H5T_NATIVE_UINT8, op.split.data());
  }
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) writer.fail("cannot flush the file");
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) writer.fail("cannot read back the file image");
  std::string image(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), image.data(), image.size()) != size) {
    writer.fail("cannot read back the file image");
  }
  if (!file.close()) writer.fail("cannot close the file");
  return image;
}

void write_measurement_hdf5(const std::filesystem::path& path,
                            const std::vector<KernelMeasurement>& rows, std::string_view gpu,
                            std::string_view source,
                            const std::vector<std::pair<std::string, std::string>>& attributes) {
  const std::string image = measurement_hdf5_image(path, rows, gpu, source, attributes);
  const Writer writer(path);
  // A regular file only: never through a symbolic link, never onto a device or a pipe (O_NONBLOCK:
  // opening a pipe without a reader fails instead of waiting for one).
  const int fd = ::open(path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) writer.fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    writer.fail("not a regular file");
  }
  size_t done = 0;
  while (done < image.size()) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      writer.fail(std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) writer.fail(std::strerror(errno));
}

}  // namespace upsim

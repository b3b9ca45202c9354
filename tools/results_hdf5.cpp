#include "tools/results_hdf5.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "tools/output_folder.h"

namespace upsim::cli {

namespace {

/// How much the in-memory file grows at a time (bytes): a results table takes tens of KiB.
constexpr size_t kImageIncrement = 64 * 1024;
/// The in-memory file's name. Before it creates a file, libhdf5 probes the name with an open
/// that neither creates nor truncates (to find the file among those already open), the core
/// driver too; nothing can exist below /dev/null (a device, not a folder), so that probe fails
/// with ENOTDIR and no path of the user's is ever opened.
constexpr const char* kImageName = "/dev/null/upsim-results.h5";

/// An HDF5 identifier closed by its own close function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what, const std::string& file)
      : id_(id), close_(close) {
    if (id_ < 0) throw std::runtime_error(fmt::format("{}: cannot {}", file, what));
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

bool numeric_column(const std::vector<std::vector<std::string>>& rows, size_t c) {
  for (const auto& r : rows) {
    const std::string& v = c < r.size() ? r[c] : std::string();
    if (v.empty()) continue;
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    if (end == nullptr || *end != '\0') return false;
  }
  return true;
}

/// Every value of column `c` an integer that int64 holds (none empty: NaN has no integer).
bool integer_column(const std::vector<std::vector<std::string>>& rows, size_t c) {
  for (const auto& r : rows) {
    const std::string& v = c < r.size() ? r[c] : std::string();
    int64_t x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return false;
  }
  return true;
}

void check(herr_t rc, const std::string& what, const std::string& file) {
  if (rc < 0) throw std::runtime_error(fmt::format("{}: cannot {}", file, what));
}

}  // namespace

std::string results_hdf5_image(const std::vector<std::string>& header,
                               const std::vector<std::vector<std::string>>& rows) {
  const std::string name = "results.h5 (in memory)";
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are reported as exceptions here
  // The core driver without a backing store: the file lives in memory, no path is opened.
  const Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "make properties", name);
  check(H5Pset_fapl_core(fapl.get(), kImageIncrement, false), "set the in-memory driver", name);
  const Handle file(H5Fcreate(kImageName, H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose,
                    "create", name);
  {
    const Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "make properties", name);
    check(H5Pset_obj_track_times(gcpl.get(), false), "set properties", name);
    const Handle group(H5Gcreate2(file.get(), "results", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                       H5Gclose, "create /results", name);
    const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "make properties", name);
    check(H5Pset_obj_track_times(dcpl.get(), false), "set properties", name);
    const hsize_t n = rows.size();
    const Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "make a dataspace", name);
    const Handle text(H5Tcopy(H5T_C_S1), H5Tclose, "make a string type", name);
    check(H5Tset_size(text.get(), H5T_VARIABLE), "make a string type", name);
    check(H5Tset_cset(text.get(), H5T_CSET_UTF8), "make a string type", name);
    for (size_t c = 0; c < header.size(); ++c) {
      const bool integers = !rows.empty() && integer_column(rows, c);
      const bool numbers = numeric_column(rows, c);
      const hid_t type = integers ? H5T_STD_I64LE : numbers ? H5T_IEEE_F64LE : text.get();
      const Handle set(H5Dcreate2(group.get(), header[c].c_str(), type, space.get(), H5P_DEFAULT,
                                  dcpl.get(), H5P_DEFAULT),
                       H5Dclose, fmt::format("create dataset `{}`", header[c]), name);
      if (integers) {
        std::vector<int64_t> v;
        for (const auto& r : rows) {
          int64_t x = 0;
          std::from_chars(r[c].data(), r[c].data() + r[c].size(), x);
          v.push_back(x);
        }
        check(H5Dwrite(set.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
              fmt::format("write `{}`", header[c]), name);
      } else if (numbers) {
        std::vector<double> v;
        for (const auto& r : rows) {
          const std::string& s = c < r.size() ? r[c] : std::string();
          v.push_back(s.empty() ? std::numeric_limits<double>::quiet_NaN()
                                : std::strtod(s.c_str(), nullptr));
        }
        check(H5Dwrite(set.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
              fmt::format("write `{}`", header[c]), name);
      } else {
        std::vector<const char*> v;
        for (const auto& r : rows)
          v.push_back(c < r.size() ? r[c].c_str() : "");
        check(H5Dwrite(set.get(), text.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
              fmt::format("write `{}`", header[c]), name);
      }
    }
    // The column order, as an attribute of the group.
    const hsize_t columns = header.size();
    const Handle aspace(H5Screate_simple(1, &columns, nullptr), H5Sclose, "make a dataspace", name);
    const Handle attr(
        H5Acreate2(group.get(), "columns", text.get(), aspace.get(), H5P_DEFAULT, H5P_DEFAULT),
        H5Aclose, "create the columns attribute", name);
    std::vector<const char*> names;
    for (const std::string& h : header)
      names.push_back(h.c_str());
    check(H5Awrite(attr.get(), text.get(), names.data()), "write the columns attribute", name);
  }
  // Every object is closed above, so the image holds them all (H5Fget_file_image flushes).
  check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "flush", name);
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size < 0) throw std::runtime_error(fmt::format("{}: cannot get the file image", name));
  std::string image(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), image.data(), image.size()) != size) {
    throw std::runtime_error(fmt::format("{}: cannot get the file image", name));
  }
  return image;
}

void write_results_hdf5(const std::filesystem::path& path, const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  write_file_atomically(path, results_hdf5_image(header, rows));
}

}  // namespace upsim::cli

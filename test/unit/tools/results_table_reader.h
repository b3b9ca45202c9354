// Reads results.h5's table (tools/results_hdf5.h) back with the HDF5 C API, for the tests: the
// members of /results/table, one column at a time, and text attributes. Each function throws
// std::runtime_error when libhdf5 fails or the member is missing.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace upsim::test {

/// results.h5 opened read-only, and its /results/table.
class ResultsTable {
 public:
  explicit ResultsTable(const std::filesystem::path& path)
      : file_(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) {
    if (file_ < 0) throw std::runtime_error("cannot open " + path.string());
    set_ = H5Dopen2(file_, "results/table", H5P_DEFAULT);
    if (set_ < 0) {
      H5Fclose(file_);
      throw std::runtime_error("no results/table in " + path.string());
    }
    type_ = H5Dget_type(set_);
  }
  ~ResultsTable() {
    H5Tclose(type_);
    H5Dclose(set_);
    H5Fclose(file_);
  }
  ResultsTable(const ResultsTable&) = delete;
  ResultsTable& operator=(const ResultsTable&) = delete;

  hid_t file() const { return file_; }
  hid_t table() const { return set_; }

  size_t rows() const {
    const hid_t space = H5Dget_space(set_);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(space, &n, nullptr);
    H5Sclose(space);
    return n;
  }

  /// The member names, in order.
  std::vector<std::string> members() const {
    std::vector<std::string> names;
    for (int i = 0; i < H5Tget_nmembers(type_); ++i) {
      char* name = H5Tget_member_name(type_, static_cast<unsigned>(i));
      names.emplace_back(name);
      H5free_memory(name);
    }
    return names;
  }

  /// The member's type class (H5T_INTEGER, H5T_FLOAT, H5T_STRING, H5T_BITFIELD) and size.
  H5T_class_t member_class(const std::string& member) const {
    return H5Tget_member_class(type_, index(member));
  }
  size_t member_size(const std::string& member) const {
    const hid_t t = H5Tget_member_type(type_, index(member));
    const size_t size = H5Tget_size(t);
    H5Tclose(t);
    return size;
  }

  std::vector<int64_t> integers(const std::string& member) const {
    return read<int64_t>(member, H5T_NATIVE_INT64);
  }
  std::vector<double> numbers(const std::string& member) const {
    return read<double>(member, H5T_NATIVE_DOUBLE);
  }
  /// A bool member (PyTables' BoolAtom: an 8-bit bitfield), 0 or 1.
  std::vector<uint8_t> booleans(const std::string& member) const {
    return read<uint8_t>(member, H5T_NATIVE_B8);
  }
  /// A fixed-width text member, each value up to its first null.
  std::vector<std::string> texts(const std::string& member) const {
    const hid_t t = H5Tget_member_type(type_, index(member));
    const size_t width = H5Tget_size(t);
    std::vector<char> bytes(rows() * width + 1, '\0');
    read_into(member, t, width, bytes.data());
    H5Tclose(t);
    std::vector<std::string> out;
    for (size_t i = 0; i < rows(); ++i)
      out.emplace_back(bytes.data() + i * width, strnlen(bytes.data() + i * width, width));
    return out;
  }

 private:
  unsigned index(const std::string& member) const {
    const int i = H5Tget_member_index(type_, member.c_str());
    if (i < 0) throw std::runtime_error("no member `" + member + "`");
    return static_cast<unsigned>(i);
  }
  template <typename T>
  std::vector<T> read(const std::string& member, hid_t memory_type) const {
    index(member);
    std::vector<T> values(rows() + 1);
    read_into(member, memory_type, sizeof(T), values.data());
    values.pop_back();
    return values;
  }
  /// Reads one member into `out` through a compound memory type of that member alone.
  void read_into(const std::string& member, hid_t memory_type, size_t size, void* out) const {
    const hid_t one = H5Tcreate(H5T_COMPOUND, size);
    H5Tinsert(one, member.c_str(), 0, memory_type);
    const herr_t rc = H5Dread(set_, one, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
    H5Tclose(one);
    if (rc < 0) throw std::runtime_error("cannot read member `" + member + "`");
  }

  hid_t file_ = -1;
  hid_t set_ = -1;
  hid_t type_ = -1;
};

/// The text of a string attribute of `object` (at `path` below it); "" for a null dataspace.
inline std::string text_attribute(hid_t object, const char* path, const char* attribute) {
  const hid_t attr = H5Aopen_by_name(object, path, attribute, H5P_DEFAULT, H5P_DEFAULT);
  if (attr < 0) throw std::runtime_error(std::string("no attribute ") + attribute);
  const hid_t type = H5Aget_type(attr);
  const hid_t space = H5Aget_space(attr);
  std::string text;
  if (H5Sget_simple_extent_type(space) != H5S_NULL) {
    std::vector<char> bytes(H5Tget_size(type) + 1, '\0');
    H5Aread(attr, type, bytes.data());
    text = bytes.data();
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Aclose(attr);
  return text;
}

}  // namespace upsim::test

#include "tools/results_hdf5.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <stdexcept>
#include <string_view>

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
/// What an empty cell of a text column holds: pandas' nan_rep, which it reads back as NaN.
constexpr std::string_view kNanRep = "nan";

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

void check(herr_t rc, const std::string& what, const std::string& file) {
  if (rc < 0) throw std::runtime_error(fmt::format("{}: cannot {}", file, what));
}

/// A column's member type in the table (tools/results_hdf5.h).
enum class Kind { integer, boolean, number, text };

const std::string& cell(const std::vector<std::string>& row, size_t c) {
  static const std::string empty;
  return c < row.size() ? row[c] : empty;
}

/// An optional sign and decimal digits whose value int64 holds (pandas.read_csv's integers).
bool parse_integer(std::string_view s, int64_t& value) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) return false;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  return ec == std::errc() && end == s.data() + s.size();
}

/// pandas.read_csv's default true_values and false_values.
bool parse_boolean(std::string_view s, bool& value) {
  if (s == "true" || s == "True" || s == "TRUE") {
    value = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    value = false;
    return true;
  }
  return false;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

/// A decimal number ([sign] digits [. digits] [e [sign] digits], digits on at least one side of
/// the point) or [sign] inf / infinity / nan in any case: what pandas.read_csv reads as a float
/// (no hexadecimal, no spaces, which std::strtod alone would take too).
bool is_number(std::string_view s) {
  std::string_view t = s;
  if (!t.empty() && (t.front() == '+' || t.front() == '-')) t.remove_prefix(1);
  if (equals_ignoring_case(t, "inf") || equals_ignoring_case(t, "infinity") ||
      equals_ignoring_case(t, "nan")) {
    return true;
  }
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])))
      ++i;
    return i - from;
  };
  size_t mantissa = digits();
  if (i < t.size() && t[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == t.size();
}

Kind column_kind(const std::vector<std::vector<std::string>>& rows, size_t c) {
  // pandas.read_csv makes object columns of a table without rows.
  if (rows.empty()) return Kind::text;
  bool integers = true;
  bool booleans = true;
  bool numbers = true;
  for (const auto& r : rows) {
    const std::string& v = cell(r, c);
    int64_t i = 0;
    bool b = false;
    integers = integers && parse_integer(v, i);
    booleans = booleans && parse_boolean(v, b);
    numbers = numbers && (v.empty() || is_number(v));
  }
  return integers ? Kind::integer : booleans ? Kind::boolean : numbers ? Kind::number : Kind::text;
}

/// The member name of a column: its name with each `/` (PyTables' separator of nested columns,
/// which no table it reads has in a member name) written as `.`.
std::string member_name(std::string name) {
  std::replace(name.begin(), name.end(), '/', '.');
  return name;
}

/// A column of the table: its member type in the file and in memory (the same but for byte
/// order), its size in bytes and its offset in a row.
struct Member {
  Kind kind = Kind::text;
  hid_t file_type = -1;
  hid_t memory_type = -1;
  size_t size = 0;
  size_t offset = 0;
};

/// A scalar string attribute as PyTables writes a Python str: UTF-8, null-terminated, as long as
/// the text; the empty text has a null dataspace of one-byte strings.
void text_attribute(hid_t object, const char* attribute, std::string_view text,
                    const std::string& file) {
  const Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "make a string type", file);
  check(H5Tset_size(type.get(), std::max<size_t>(text.size(), 1)), "make a string type", file);
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "make a string type", file);
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "make a string type", file);
  const Handle space(H5Screate(text.empty() ? H5S_NULL : H5S_SCALAR), H5Sclose, "make a dataspace",
                     file);
  const Handle attr(
      H5Acreate2(object, attribute, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
      fmt::format("create attribute {}", attribute), file);
  if (!text.empty()) {
    check(H5Awrite(attr.get(), type.get(), text.data()),
          fmt::format("write attribute {}", attribute), file);
  }
}

/// A scalar attribute of `type` holding `value` (memory of that type).
void value_attribute(hid_t object, const std::string& attribute, hid_t file_type, hid_t memory_type,
                     const void* value, const std::string& file) {
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose, "make a dataspace", file);
  const Handle attr(
      H5Acreate2(object, attribute.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose, fmt::format("create attribute {}", attribute), file);
  check(H5Awrite(attr.get(), memory_type, value), fmt::format("write attribute {}", attribute),
        file);
}

/// PyTables' attributes of a group: CLASS, TITLE, VERSION.
void group_attributes(hid_t group, const std::string& file) {
  text_attribute(group, "CLASS", "GROUP", file);
  text_attribute(group, "TITLE", "", file);
  text_attribute(group, "VERSION", "1.0", file);
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
    const Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose, "open /", name);
    group_attributes(root.get(), name);
    text_attribute(root.get(), "PYTABLES_FORMAT_VERSION", "2.1", name);
    const Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "make properties", name);
    check(H5Pset_obj_track_times(gcpl.get(), false), "set properties", name);
    const Handle group(H5Gcreate2(file.get(), "results", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                       H5Gclose, "create /results", name);
    group_attributes(group.get(), name);

    // The members: one per column, packed in table order.
    std::vector<Member> members(header.size());
    std::deque<Handle> text_types;
    size_t row_size = 0;
    for (size_t c = 0; c < header.size(); ++c) {
      Member& m = members[c];
      m.kind = column_kind(rows, c);
      m.offset = row_size;
      switch (m.kind) {
        case Kind::integer:
          m.file_type = H5T_STD_I64LE;
          m.memory_type = H5T_NATIVE_INT64;
          m.size = sizeof(int64_t);
          break;
        case Kind::boolean:
          m.file_type = m.memory_type = H5T_STD_B8LE;
          m.size = 1;
          break;
        case Kind::number:
          m.file_type = H5T_IEEE_F64LE;
          m.memory_type = H5T_NATIVE_DOUBLE;
          m.size = sizeof(double);
          break;
        case Kind::text: {
          size_t width = 1;
          for (const auto& r : rows) {
            const std::string& v = cell(r, c);
            width = std::max(width, v.empty() ? kNanRep.size() : v.size());
          }
          text_types.emplace_back(H5Tcopy(H5T_C_S1), H5Tclose, "make a string type", name);
          const hid_t type = text_types.back().get();
          check(H5Tset_size(type, width), "make a string type", name);
          check(H5Tset_strpad(type, H5T_STR_NULLTERM), "make a string type", name);
          m.file_type = m.memory_type = type;
          m.size = width;
          break;
        }
      }
      row_size += m.size;
    }
    const Handle file_row(H5Tcreate(H5T_COMPOUND, std::max<size_t>(row_size, 1)), H5Tclose,
                          "make the row type", name);
    const Handle memory_row(H5Tcreate(H5T_COMPOUND, std::max<size_t>(row_size, 1)), H5Tclose,
                            "make the row type", name);
    std::vector<std::string> names;
    for (size_t c = 0; c < header.size(); ++c) {
      names.push_back(member_name(header[c]));
      const std::string what = fmt::format("add column `{}` to the row type", header[c]);
      check(H5Tinsert(file_row.get(), names[c].c_str(), members[c].offset, members[c].file_type),
            what, name);
      check(
          H5Tinsert(memory_row.get(), names[c].c_str(), members[c].offset, members[c].memory_type),
          what, name);
    }

    // The rows, packed as memory_row lays them out; text null-padded to its width.
    std::vector<char> data(std::max<size_t>(rows.size() * row_size, 1), '\0');
    for (size_t i = 0; i < rows.size(); ++i) {
      char* row = data.data() + i * row_size;
      for (size_t c = 0; c < header.size(); ++c) {
        const Member& m = members[c];
        const std::string& v = cell(rows[i], c);
        char* at = row + m.offset;
        switch (m.kind) {
          case Kind::integer: {
            int64_t x = 0;
            parse_integer(v, x);
            std::memcpy(at, &x, sizeof x);
            break;
          }
          case Kind::boolean: {
            bool b = false;
            parse_boolean(v, b);
            *at = b ? 1 : 0;
            break;
          }
          case Kind::number: {
            const double x = v.empty() ? std::numeric_limits<double>::quiet_NaN()
                                       : std::strtod(v.c_str(), nullptr);
            std::memcpy(at, &x, sizeof x);
            break;
          }
          case Kind::text: {
            const std::string_view t = v.empty() ? kNanRep : std::string_view(v);
            std::memcpy(at, t.data(), t.size());
            break;
          }
        }
      }
    }

    const hsize_t n = rows.size();
    const Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "make a dataspace", name);
    const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "make properties", name);
    check(H5Pset_obj_track_times(dcpl.get(), false), "set properties", name);
    const Handle table(H5Dcreate2(group.get(), "table", file_row.get(), space.get(), H5P_DEFAULT,
                                  dcpl.get(), H5P_DEFAULT),
                       H5Dclose, "create /results/table", name);
    if (n > 0) {
      check(H5Dwrite(table.get(), memory_row.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
            "write /results/table", name);
    }

    // PyTables' attributes of a Table.
    text_attribute(table.get(), "CLASS", "TABLE", name);
    text_attribute(table.get(), "TITLE", "", name);
    text_attribute(table.get(), "VERSION", "2.7", name);
    const int64_t rows_count = static_cast<int64_t>(n);
    value_attribute(table.get(), "NROWS", H5T_STD_I64LE, H5T_NATIVE_INT64, &rows_count, name);
    for (size_t c = 0; c < header.size(); ++c) {
      const Member& m = members[c];
      text_attribute(table.get(), fmt::format("FIELD_{}_NAME", c).c_str(), names[c], name);
      const std::string fill = fmt::format("FIELD_{}_FILL", c);
      const int64_t zero = 0;
      const double zero_number = 0.0;
      const char no_text[1] = {'\0'};
      switch (m.kind) {
        case Kind::integer:
          value_attribute(table.get(), fill, m.file_type, m.memory_type, &zero, name);
          break;
        case Kind::boolean:
          value_attribute(table.get(), fill, m.file_type, m.memory_type, no_text, name);
          break;
        case Kind::number:
          value_attribute(table.get(), fill, m.file_type, m.memory_type, &zero_number, name);
          break;
        case Kind::text: {
          // PyTables' fill of a string member: the empty string, one byte wide.
          const Handle one(H5Tcopy(H5T_C_S1), H5Tclose, "make a string type", name);
          check(H5Tset_size(one.get(), 1), "make a string type", name);
          value_attribute(table.get(), fill, one.get(), one.get(), no_text, name);
          break;
        }
      }
    }
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

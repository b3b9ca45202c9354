#include "tools/plot_axes.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "sim/config/quantity_parse.h"
#include "tools/plot_script.h"

namespace upsim::cli {
namespace {

/// Every value through `parse` (base units), or nullopt when one does not parse.
std::optional<std::vector<double>> parsed(const std::vector<std::string>& values,
                                          const std::function<double(std::string_view)>& parse) {
  std::vector<double> out;
  for (const std::string& v : values) {
    try {
      const double x = parse(v);
      if (!std::isfinite(x)) return std::nullopt;
      out.push_back(x);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return out;
}

struct Unit {
  const char* name;
  double base_per_unit;
};

/// `values` (base units) in the largest of `units` (ascending) that keeps the largest value >= 1.
NumericAxis in_unit(std::vector<double> values, std::initializer_list<Unit> units) {
  const double largest = values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
  Unit chosen = *units.begin();
  for (const Unit& u : units) {
    if (largest >= u.base_per_unit) chosen = u;
  }
  for (double& v : values)
    v /= chosen.base_per_unit;
  return NumericAxis{std::move(values), chosen.name, false};
}

}  // namespace

std::optional<NumericAxis> numeric_axis(const std::vector<std::string>& values) {
  std::optional<NumericAxis> axis;
  if (auto plain = parsed(values, [](std::string_view t) {
        const std::optional<double> v = finite_number(t);
        if (!v) throw UnitError("not a number");
        return *v;
      })) {
    axis = NumericAxis{std::move(*plain), "", false};
  } else if (auto bw = parsed(values, [](std::string_view t) {
               return parse_bandwidth(t).bytes_per_second();
             })) {
    axis = in_unit(std::move(*bw), {{"GB/s", 1e9}});
  } else if (auto bytes = parsed(
                 values, [](std::string_view t) { return static_cast<double>(parse_bytes(t)); })) {
    axis = in_unit(std::move(*bytes),
                   {{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}});
  } else if (auto seconds =
                 parsed(values, [](std::string_view t) { return parse_duration(t).seconds(); })) {
    axis = in_unit(std::move(*seconds), {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}});
  }
  if (!axis || axis->values.empty()) return axis;
  const auto [lo, hi] = std::minmax_element(axis->values.begin(), axis->values.end());
  axis->logarithmic = *lo > 0.0 && *hi / *lo >= 100.0;
  return axis;
}

std::vector<size_t> series_columns(const std::vector<const std::vector<std::string>*>& rows,
                                   size_t x, const std::vector<size_t>& candidates) {
  std::vector<size_t> out;
  for (const size_t c : candidates) {
    std::map<std::string, std::string> value_at_x;
    bool determined = true;
    for (const std::vector<std::string>* row : rows) {
      const auto [it, added] = value_at_x.try_emplace((*row)[x], (*row)[c]);
      determined = determined && (added || it->second == (*row)[c]);
    }
    if (!determined) out.push_back(c);
  }
  return out;
}

std::string short_column_name(std::string_view column) {
  const size_t last = column.rfind('.');
  if (last == std::string_view::npos || last == 0) return std::string(column);
  const size_t before = column.rfind('.', last - 1);
  return std::string(before == std::string_view::npos ? column : column.substr(before + 1));
}

std::string part_title(std::string_view column) {
  std::string out(column.ends_with("_ms") ? column.substr(0, column.size() - 3) : column);
  std::replace(out.begin(), out.end(), '_', ' ');
  return out;
}

}  // namespace upsim::cli

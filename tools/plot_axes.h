// How `upsim plot` (tools/plot_script.h) reads a sweep's axis values for a plot: numbers as a
// numeric axis, quantities with units (600GB/s, 25MiB, 1.5us) as a numeric axis in one display
// unit, anything else as categories shown short (a YAML file by its stem); which other axis
// columns split the points into series (not those the x value determines, such as the zipped
// partners of x); short names for series and breakdown parts. Pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace upsim::cli {

/// The x values of a plot as numbers: the values themselves (unit "") when every one is a finite
/// number, or quantities of one kind converted to `unit` (GB/s; B, KiB, MiB or GiB; ns, us, ms or
/// s: the largest that keeps the largest value at least 1); nullopt for categories.
struct NumericAxis {
  std::vector<double> values;
  std::string unit;
  /// The values span at least two decades (all positive): draw them on a log scale.
  bool logarithmic = false;
};
std::optional<NumericAxis> numeric_axis(const std::vector<std::string>& values);

/// Of `candidates` (column indices into each row of `rows`), those that split the points of
/// column `x` into series: a column whose value the x value determines (for every pair of rows
/// with the same x the same value; e.g. a zip partner of x) is left out.
std::vector<size_t> series_columns(const std::vector<const std::vector<std::string>*>& rows,
                                   size_t x, const std::vector<size_t>& candidates);

/// A column name as a series key shows it: its last two dotted components
/// ("platform.topology.node.link_kinds.nvlink4.bandwidth" -> "nvlink4.bandwidth").
std::string short_column_name(std::string_view column);

/// A breakdown column as a legend entry: without its "_ms" unit, underscores as spaces
/// ("exposed_comm_ms" -> "exposed comm").
std::string part_title(std::string_view column);

}  // namespace upsim::cli

#include "sim/config/quantity_parse.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <system_error>
#include <utility>

#include "sim/formats/text.h"

namespace upsim {
namespace {

struct Kind {
  std::string_view noun;     // "duration"
  std::string_view example;  // "1.5us"
  std::string_view units;    // the list printed on an unknown unit
};

constexpr Kind kDurationKind{"duration", "1.5us", "ps, ns, us, µs, ms, s"};
constexpr Kind kBandwidthKind{
    "bandwidth", "25GB/s",
    "B/s, KB/s, MB/s, GB/s, TB/s, PB/s, KiB/s, MiB/s, GiB/s, TiB/s, bit/s, Kbit/s, Mbit/s, "
    "Gbit/s, Tbit/s (also Gb/s, Gbps)"};
constexpr Kind kFlopRateKind{"flop rate", "312TFLOP/s",
                             "FLOP/s, KFLOP/s, MFLOP/s, GFLOP/s, TFLOP/s, PFLOP/s, EFLOP/s "
                             "(also TFLOPS, Tflop/s)"};
constexpr Kind kBytesKind{"size", "25MiB or 4096B",
                          "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB; a bare number only for "
                          "0"};

struct DoubleUnit {
  std::string_view name;
  double factor;
};

constexpr std::array<DoubleUnit, 32> kBandwidthUnits{{
    {"B/s", 1.0},
    {"KB/s", 1e3},
    {"kB/s", 1e3},
    {"MB/s", 1e6},
    {"GB/s", 1e9},
    {"TB/s", 1e12},
    {"PB/s", 1e15},
    {"KiB/s", 1024.0},
    {"MiB/s", 1048576.0},
    {"GiB/s", 1073741824.0},
    {"TiB/s", 1099511627776.0},
    {"bit/s", 0.125},
    {"b/s", 0.125},
    {"bps", 0.125},
    {"Kbit/s", 125.0},
    {"kbit/s", 125.0},
    {"Kb/s", 125.0},
    {"kb/s", 125.0},
    {"Kbps", 125.0},
    {"kbps", 125.0},
    {"Mbit/s", 125e3},
    {"Mb/s", 125e3},
    {"Mbps", 125e3},
    {"Gbit/s", 125e6},
    {"Gb/s", 125e6},
    {"Gbps", 125e6},
    {"Tbit/s", 125e9},
    {"Tb/s", 125e9},
    {"Tbps", 125e9},
    {"Pbit/s", 125e12},
    {"Pb/s", 125e12},
    {"Pbps", 125e12},
}};

constexpr std::array<DoubleUnit, 7> kFlopPrefixes{
    {{"", 1.0}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}}};
constexpr std::array<std::string_view, 4> kFlopSpellings{"FLOP/s", "FLOPS", "flop/s", "Flop/s"};

struct Pow10Unit {
  std::string_view name;
  int pow10;
};

constexpr std::array<Pow10Unit, 7> kDurationUnits{{{"ps", 0},
                                                   {"ns", 3},
                                                   {"us", 6},
                                                   {"\xC2\xB5s", 6},  // U+00B5 MICRO SIGN
                                                   {"\xCE\xBCs", 6},  // U+03BC GREEK SMALL MU
                                                   {"ms", 9},
                                                   {"s", 12}}};

constexpr std::array<Pow10Unit, 7> kDecimalByteUnits{
    {{"B", 0}, {"KB", 3}, {"kB", 3}, {"MB", 6}, {"GB", 9}, {"TB", 12}, {"PB", 15}}};

struct BinaryUnit {
  std::string_view name;
  int pow1024;
};

constexpr std::array<BinaryUnit, 5> kBinaryByteUnits{
    {{"KiB", 1}, {"MiB", 2}, {"GiB", 3}, {"TiB", 4}, {"PiB", 5}}};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

struct Quantity {
  std::string_view number;  // sign stripped; digits, optional '.', optional exponent
  std::string_view unit;    // trimmed; empty when absent
};

// Splits "1.5 us" into "1.5" and "us". Throws on a missing number or a negative sign.
Quantity split_quantity(std::string_view text, const Kind& kind) {
  const std::string_view s = trim_blanks(text);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  const size_t start = i;
  size_t digits = 0;
  while (i < s.size() && is_digit(s[i]))
    ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i]))
      ++i, ++digits;
  }
  if (digits == 0) {
    throw UnitError(fmt::format("invalid {} \"{}\": expected a number followed by a unit, e.g. {}",
                                kind.noun, text, kind.example));
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && is_digit(s[j])) {
      i = j;
      while (i < s.size() && is_digit(s[i]))
        ++i;
    }
  }
  if (negative) {
    throw UnitError(fmt::format("negative {} \"{}\": must be zero or positive", kind.noun, text));
  }
  return Quantity{s.substr(start, i - start), trim_blanks(s.substr(i))};
}

[[noreturn]] void throw_missing_unit(std::string_view text, const Kind& kind) {
  throw UnitError(fmt::format("missing unit in {} \"{}\": write e.g. {} (units: {})", kind.noun,
                              text, kind.example, kind.units));
}

[[noreturn]] void throw_unknown_unit(std::string_view text, std::string_view unit,
                                     const Kind& kind) {
  throw UnitError(fmt::format("unknown {} unit `{}` in \"{}\"; valid units: {}", kind.noun, unit,
                              text, kind.units));
}

[[noreturn]] void throw_out_of_range(std::string_view text, const Kind& kind) {
  throw UnitError(fmt::format("{} \"{}\" is out of range", kind.noun, text));
}

// A non-negative decimal number as mantissa * 10^exponent, the mantissa without leading or
// trailing zeros (empty = zero).
struct Decimal {
  std::string mantissa;
  int64_t exponent = 0;
};

Decimal parse_decimal(std::string_view number, std::string_view text, const Kind& kind) {
  Decimal d;
  size_t i = 0;
  while (i < number.size() && is_digit(number[i]))
    d.mantissa += number[i++];
  if (i < number.size() && number[i] == '.') {
    ++i;
    while (i < number.size() && is_digit(number[i])) {
      d.mantissa += number[i++];
      --d.exponent;
    }
  }
  if (i < number.size()) {  // exponent: [eE][+-]?digits
    ++i;
    bool negative = false;
    if (number[i] == '+' || number[i] == '-') negative = number[i++] == '-';
    int64_t e = 0;
    const auto [ptr, ec] = std::from_chars(number.data() + i, number.data() + number.size(), e);
    if (ec != std::errc() || e > 100'000) throw_out_of_range(text, kind);
    d.exponent += negative ? -e : e;
  }
  const size_t first = d.mantissa.find_first_not_of('0');
  if (first == std::string::npos) return Decimal{};
  d.mantissa.erase(0, first);
  while (d.mantissa.back() == '0') {
    d.mantissa.pop_back();
    ++d.exponent;
  }
  return d;
}

std::optional<int64_t> parse_digits(std::string_view digits) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

struct Scaled {
  int64_t value = 0;
  bool exact = true;
};

// d * 10^pow10 rounded to the nearest integer (ties away from zero); nullopt on overflow.
std::optional<Scaled> scale_pow10(const Decimal& d, int64_t pow10) {
  if (d.mantissa.empty()) return Scaled{};
  const int64_t total = d.exponent + pow10;
  const auto length = static_cast<int64_t>(d.mantissa.size());
  if (total >= 0) {
    if (length + total > 19) return std::nullopt;
    auto v = parse_digits(d.mantissa);
    if (!v) return std::nullopt;
    for (int64_t k = 0; k < total; ++k) {
      if (__builtin_mul_overflow(*v, int64_t{10}, &*v)) return std::nullopt;
    }
    return Scaled{*v, true};
  }
  // The mantissa has no trailing zeros, so dropping digits always loses a non-zero part.
  const int64_t keep = length + total;
  if (keep < 0) return Scaled{0, false};
  if (keep == 0) return Scaled{d.mantissa[0] >= '5' ? 1 : 0, false};
  auto v = parse_digits(std::string_view(d.mantissa).substr(0, static_cast<size_t>(keep)));
  if (!v) return std::nullopt;
  if (d.mantissa[static_cast<size_t>(keep)] >= '5' && __builtin_add_overflow(*v, int64_t{1}, &*v)) {
    return std::nullopt;
  }
  return Scaled{*v, false};
}

double parse_double(std::string_view number, std::string_view text, const Kind& kind) {
  double v = 0.0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || ptr != number.data() + number.size() || !std::isfinite(v)) {
    throw_out_of_range(text, kind);
  }
  return v;
}

// Prints v with at most three decimals, without trailing zeros: 12.345, 1.5, 100.
std::string three_decimals(double v) {
  std::string s = fmt::format("{:.3f}", v);
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

// Prints v in the largest unit that keeps the number >= 1; units ordered ascending.
template <size_t N>
std::string format_scaled(double v, const std::array<DoubleUnit, N>& units) {
  size_t pick = 0;
  for (size_t i = 0; i < N; ++i) {
    if (std::fabs(v) >= units[i].factor) pick = i;
  }
  return fmt::format("{} {}", three_decimals(v / units[pick].factor), units[pick].name);
}

// Largest decimal unit (descending list) whose multiple states v exactly; else the base unit.
template <size_t N>
std::string format_exact_double(double v, const std::array<DoubleUnit, N>& descending,
                                std::string_view base) {
  for (const DoubleUnit& u : descending) {
    const double q = v / u.factor;
    if (std::fabs(v) >= u.factor && q * u.factor == v) return fmt::format("{}{}", q, u.name);
  }
  return fmt::format("{}{}", v, base);
}

}  // namespace

Duration parse_duration(std::string_view text) {
  const Quantity q = split_quantity(text, kDurationKind);
  if (q.unit.empty()) throw_missing_unit(text, kDurationKind);
  for (const Pow10Unit& u : kDurationUnits) {
    if (q.unit != u.name) continue;
    const auto scaled = scale_pow10(parse_decimal(q.number, text, kDurationKind), u.pow10);
    if (!scaled) throw_out_of_range(text, kDurationKind);
    return Duration::from_ps(scaled->value);
  }
  throw_unknown_unit(text, q.unit, kDurationKind);
}

Bandwidth parse_bandwidth(std::string_view text) {
  const Quantity q = split_quantity(text, kBandwidthKind);
  if (q.unit.empty()) throw_missing_unit(text, kBandwidthKind);
  for (const DoubleUnit& u : kBandwidthUnits) {
    if (q.unit == u.name) {
      return Bandwidth::bytes_per_second(parse_double(q.number, text, kBandwidthKind) * u.factor);
    }
  }
  throw_unknown_unit(text, q.unit, kBandwidthKind);
}

FlopRate parse_flop_rate(std::string_view text) {
  const Quantity q = split_quantity(text, kFlopRateKind);
  if (q.unit.empty()) throw_missing_unit(text, kFlopRateKind);
  for (const DoubleUnit& prefix : kFlopPrefixes) {
    if (!q.unit.starts_with(prefix.name)) continue;
    for (std::string_view spelling : kFlopSpellings) {
      if (q.unit.substr(prefix.name.size()) == spelling) {
        return FlopRate::flops_per_second(parse_double(q.number, text, kFlopRateKind) *
                                          prefix.factor);
      }
    }
  }
  throw_unknown_unit(text, q.unit, kFlopRateKind);
}

int64_t parse_bytes(std::string_view text) {
  const Quantity q = split_quantity(text, kBytesKind);
  const Decimal d = parse_decimal(q.number, text, kBytesKind);
  auto whole = [&](std::optional<Scaled> s) {
    if (!s) throw_out_of_range(text, kBytesKind);
    if (!s->exact) {
      throw UnitError(fmt::format("size \"{}\" is not a whole number of bytes", text));
    }
    return s->value;
  };
  if (q.unit.empty()) {
    // A bare number is ambiguous (PyTorch's DDP bucket_cap_mb counts MB, a buffer size may be
    // meant in KiB): only zero needs no unit.
    const int64_t bytes = whole(scale_pow10(d, 0));
    if (bytes != 0) throw_missing_unit(text, kBytesKind);
    return 0;
  }
  for (const Pow10Unit& u : kDecimalByteUnits) {
    if (q.unit == u.name) return whole(scale_pow10(d, u.pow10));
  }
  for (const BinaryUnit& u : kBinaryByteUnits) {
    if (q.unit != u.name) continue;
    if (d.mantissa.empty()) return 0;
    // value = mantissa * 1024^k * 10^exponent, computed exactly.
    auto v = parse_digits(d.mantissa);
    if (!v || d.exponent > 18) throw_out_of_range(text, kBytesKind);
    for (int k = 0; k < u.pow1024; ++k) {
      if (__builtin_mul_overflow(*v, int64_t{1024}, &*v)) throw_out_of_range(text, kBytesKind);
    }
    if (d.exponent >= 0) return whole(scale_pow10(Decimal{std::to_string(*v), d.exponent}, 0));
    int64_t divisor = 1;
    for (int64_t k = 0; k < -d.exponent; ++k) {
      if (__builtin_mul_overflow(divisor, int64_t{10}, &divisor)) return whole(Scaled{0, false});
    }
    return whole(Scaled{*v / divisor, *v % divisor == 0});
  }
  throw_unknown_unit(text, q.unit, kBytesKind);
}

std::string format_duration(Duration d) {
  const int64_t ps = d.ps();
  const int64_t magnitude = ps < 0 ? -ps : ps;
  if (magnitude < 1'000) return fmt::format("{} ps", ps);
  constexpr std::array<DoubleUnit, 4> kUnits{{{"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}}};
  return format_scaled(static_cast<double>(ps), kUnits);
}

std::string format_bandwidth(Bandwidth b) {
  constexpr std::array<DoubleUnit, 6> kUnits{
      {{"B/s", 1.0}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12}, {"PB/s", 1e15}}};
  return format_scaled(b.bytes_per_second(), kUnits);
}

std::string format_flop_rate(FlopRate f) {
  constexpr std::array<DoubleUnit, 7> kUnits{{{"FLOP/s", 1.0},
                                              {"KFLOP/s", 1e3},
                                              {"MFLOP/s", 1e6},
                                              {"GFLOP/s", 1e9},
                                              {"TFLOP/s", 1e12},
                                              {"PFLOP/s", 1e15},
                                              {"EFLOP/s", 1e18}}};
  return format_scaled(f.flops_per_second(), kUnits);
}

std::string format_bytes(int64_t bytes) {
  const int64_t magnitude = bytes < 0 ? -bytes : bytes;
  if (magnitude < 1024) return fmt::format("{} B", bytes);
  constexpr std::array<DoubleUnit, 5> kUnits{{{"KiB", 1024.0},
                                              {"MiB", 1048576.0},
                                              {"GiB", 1073741824.0},
                                              {"TiB", 1099511627776.0},
                                              {"PiB", 1125899906842624.0}}};
  return format_scaled(static_cast<double>(bytes), kUnits);
}

std::string format_duration_exact(Duration d) {
  const int64_t ps = d.ps();
  if (ps == 0) return "0s";
  const int64_t magnitude = ps < 0 ? -ps : ps;
  const std::string_view sign = ps < 0 ? "-" : "";
  constexpr std::array<Pow10Unit, 4> kUnits{{{"s", 12}, {"ms", 9}, {"us", 6}, {"ns", 3}}};
  for (const Pow10Unit& u : kUnits) {
    int64_t unit = 1;
    for (int k = 0; k < u.pow10; ++k)
      unit *= 10;
    // At most three decimals: the remainder must be a multiple of unit / 1000.
    if (magnitude < unit || magnitude % (unit / 1000) != 0) continue;
    const int64_t milli = magnitude % unit / (unit / 1000);
    std::string frac = milli == 0 ? "" : fmt::format(".{:03}", milli);
    while (!frac.empty() && frac.back() == '0')
      frac.pop_back();
    return fmt::format("{}{}{}{}", sign, magnitude / unit, frac, u.name);
  }
  return fmt::format("{}ps", ps);
}

std::string format_bandwidth_exact(Bandwidth b) {
  constexpr std::array<DoubleUnit, 5> kDescending{
      {{"PB/s", 1e15}, {"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"KB/s", 1e3}}};
  return format_exact_double(b.bytes_per_second(), kDescending, "B/s");
}

std::string format_flop_rate_exact(FlopRate f) {
  constexpr std::array<DoubleUnit, 6> kDescending{{{"EFLOP/s", 1e18},
                                                   {"PFLOP/s", 1e15},
                                                   {"TFLOP/s", 1e12},
                                                   {"GFLOP/s", 1e9},
                                                   {"MFLOP/s", 1e6},
                                                   {"KFLOP/s", 1e3}}};
  return format_exact_double(f.flops_per_second(), kDescending, "FLOP/s");
}

std::string format_bytes_exact(int64_t bytes) {
  if (bytes <= 0) return std::to_string(bytes);
  // The unit giving the smallest whole number wins; binary units win ties.
  constexpr std::array<std::pair<std::string_view, int64_t>, 10> kUnits{
      {{"PiB", int64_t{1} << 50},
       {"TiB", int64_t{1} << 40},
       {"GiB", int64_t{1} << 30},
       {"MiB", int64_t{1} << 20},
       {"KiB", int64_t{1} << 10},
       {"PB", 1'000'000'000'000'000},
       {"TB", 1'000'000'000'000},
       {"GB", 1'000'000'000},
       {"MB", 1'000'000},
       {"KB", 1'000}}};
  std::string_view best_name;
  int64_t best_count = bytes;
  for (const auto& [name, unit] : kUnits) {
    if (bytes % unit == 0 && bytes / unit < best_count) {
      best_name = name;
      best_count = bytes / unit;
    }
  }
  return fmt::format("{}{}", best_count, best_name.empty() ? std::string_view("B") : best_name);
}

}  // namespace upsim

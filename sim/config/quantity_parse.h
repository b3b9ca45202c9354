// Parsing and printing of physical quantities at the configuration edge.
//
// Contract:
//  - Parsers take "<number>[ ]<unit>", e.g. "1.5us", "10 ms", "25GB/s", "312TFLOP/s", "4KiB".
//    The number is decimal with an optional fraction and exponent ("1.5e3ns"). Negative values,
//    missing numbers, missing units (a byte count may omit it only when it is 0) and unknown units
//    throw UnitError, whose what() names the text and the reason. Unit symbols are case-sensitive
//    where case carries meaning (B = byte, b = bit).
//  - Durations and byte counts are exact: the decimal text is scaled with integer arithmetic.
//    Durations round to the nearest picosecond (ties away from zero); byte counts must be whole.
//  - Bandwidths and flop rates are doubles (number * unit factor).
//  - format_* print for humans (at most 3 decimals, e.g. "12.345 ms"); format_*_exact print a
//    string that the matching parser maps back to exactly the same value (used when writing the
//    resolved configuration).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/time.h"
#include "sim/units.h"

namespace upsim {

class UnitError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Units: ps, ns, us (also "µs"), ms, s.
Duration parse_duration(std::string_view text);
/// Bytes per second: B/s, KB/s, MB/s, GB/s, TB/s, PB/s (powers of 1000; "kB/s" too),
/// KiB/s, MiB/s, GiB/s, TiB/s (powers of 1024); bits per second: bit/s, Kbit/s .. Tbit/s,
/// also spelled Kb/s .. Tb/s and Kbps .. Tbps (powers of 1000, divided by 8).
Bandwidth parse_bandwidth(std::string_view text);
/// FLOP/s with prefixes K, M, G, T, P, E; "FLOPS" and "flop/s" spellings too.
FlopRate parse_flop_rate(std::string_view text);
/// Bytes: B, KB, MB, GB, TB, PB (powers of 1000; "kB" too), KiB, MiB, GiB, TiB, PiB (powers of
/// 1024); a bare number only for 0 ("4096" is an error: write "4096B" or "4KiB"). The result
/// must be a whole number of bytes.
int64_t parse_bytes(std::string_view text);

/// Picks ps / ns / us / ms / s so that the number is at least 1: "12.345 ms", "1.5 us".
std::string format_duration(Duration d);
/// Decimal units: "25 GB/s", "1.5 TB/s".
std::string format_bandwidth(Bandwidth b);
/// "312 TFLOP/s".
std::string format_flop_rate(FlopRate f);
/// Binary units: "4 KiB", "1.5 GiB", "512 B".
std::string format_bytes(int64_t bytes);

/// Exact round-trip forms: "1.5us", "25GB/s", "312TFLOP/s", "4KiB".
std::string format_duration_exact(Duration d);
std::string format_bandwidth_exact(Bandwidth b);
std::string format_flop_rate_exact(FlopRate f);
std::string format_bytes_exact(int64_t bytes);

}  // namespace upsim

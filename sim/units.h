// Physical quantities other than time, as small value types so that units live in types.
//
// Contract: `Bandwidth` is bytes per second, `FlopRate` floating-point operations per second,
// both stored as double (rates are model inputs, not event times). Sizes in bytes are plain
// int64_t named `*_bytes`. Parsing "25GB/s" / "312TFLOP/s" / "4KiB" lives in
// sim/config/quantity_parse.h.
#pragma once

#include <compare>
#include <cstdint>

#include "sim/time.h"

namespace upsim {

/// A count or size as a double, for flop and byte formulas (an explicit, named conversion).
constexpr double as_double(int64_t v) {
  return static_cast<double>(v);
}

class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bytes_per_second(double v) { return Bandwidth(v); }
  static constexpr Bandwidth gigabytes_per_second(double v) { return Bandwidth(v * 1e9); }
  constexpr double bytes_per_second() const { return bytes_per_s_; }
  constexpr double gigabytes_per_second() const { return bytes_per_s_ * 1e-9; }
  /// Time to move `bytes` at this rate. Precondition: rate > 0.
  Duration transfer_time(double bytes) const {
    return Duration::from_seconds_f(bytes / bytes_per_s_);
  }
  constexpr Bandwidth operator*(double k) const { return Bandwidth(bytes_per_s_ * k); }
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(double v) : bytes_per_s_(v) {}
  double bytes_per_s_ = 0.0;
};

class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate flops_per_second(double v) { return FlopRate(v); }
  static constexpr FlopRate teraflops(double v) { return FlopRate(v * 1e12); }
  constexpr double flops_per_second() const { return flops_per_s_; }
  constexpr double teraflops() const { return flops_per_s_ * 1e-12; }
  /// Time to execute `flops` at this rate. Precondition: rate > 0.
  Duration compute_time(double flops) const {
    return Duration::from_seconds_f(flops / flops_per_s_);
  }
  constexpr FlopRate operator*(double k) const { return FlopRate(flops_per_s_ * k); }
  constexpr auto operator<=>(const FlopRate&) const = default;

 private:
  constexpr explicit FlopRate(double v) : flops_per_s_(v) {}
  double flops_per_s_ = 0.0;
};

}  // namespace upsim

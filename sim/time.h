// Simulated time: integer picoseconds in strong types.
//
// Contract:
//  - `Duration` is a signed span of time, `Time` an absolute instant since the start of a run.
//    Both wrap an int64_t count of picoseconds (range about +-106 days).
//  - Time - Time = Duration; Time + Duration = Time; there is no Time + Time.
//  - Conversions from floating point round to the nearest picosecond (ties away from zero), so
//    a model that returns a double number of microseconds is converted exactly once, here.
//  - Units are parsed and printed at the edges (sim/config, sim/export), never inside models.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace upsim {

class Duration {
 public:
  constexpr Duration() = default;

  static constexpr Duration from_ps(int64_t ps) { return Duration(ps); }
  static constexpr Duration from_ns(int64_t ns) { return Duration(ns * 1'000); }
  static constexpr Duration from_us(int64_t us) { return Duration(us * 1'000'000); }
  static constexpr Duration from_ms(int64_t ms) { return Duration(ms * 1'000'000'000); }
  /// Rounds a floating-point microsecond count to the nearest picosecond. Throws
  /// std::range_error for a value outside the range (about +-106 days) or not a number.
  static Duration from_us_f(double us) { return from_ps_f(us * 1e6); }
  /// Rounds a floating-point second count to the nearest picosecond. Throws std::range_error
  /// for a value outside the range (about +-106 days) or not a number.
  static Duration from_seconds_f(double s) { return from_ps_f(s * 1e12); }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double us() const { return static_cast<double>(ps_) * 1e-6; }
  constexpr double ms() const { return static_cast<double>(ps_) * 1e-9; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr Duration operator+(Duration o) const { return Duration(ps_ + o.ps_); }
  constexpr Duration operator-(Duration o) const { return Duration(ps_ - o.ps_); }
  constexpr Duration& operator+=(Duration o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) {
    ps_ -= o.ps_;
    return *this;
  }
  constexpr Duration operator*(int64_t k) const { return Duration(ps_ * k); }
  constexpr Duration operator/(int64_t k) const { return Duration(ps_ / k); }
  constexpr auto operator<=>(const Duration&) const = default;

 private:
  constexpr explicit Duration(int64_t ps) : ps_(ps) {}
  static Duration from_ps_f(double ps) {
    // 9.2e18 ps: the largest double below 2^63, so that llround cannot overflow.
    if (!(std::abs(ps) < 9.2e18)) {
      throw std::range_error("a duration of " + std::to_string(ps * 1e-12) +
                             " s is outside the simulator's range (+-106 days)");
    }
    return Duration(std::llround(ps));
  }
  int64_t ps_ = 0;
};

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time from_ps(int64_t ps) { return Time(ps); }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double us() const { return static_cast<double>(ps_) * 1e-6; }
  /// Time since the start of the run.
  constexpr Duration since_start() const { return Duration::from_ps(ps_); }

  constexpr Time operator+(Duration d) const { return Time(ps_ + d.ps()); }
  constexpr Time operator-(Duration d) const { return Time(ps_ - d.ps()); }
  constexpr Duration operator-(Time o) const { return Duration::from_ps(ps_ - o.ps_); }
  constexpr Time& operator+=(Duration d) {
    ps_ += d.ps();
    return *this;
  }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  constexpr explicit Time(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

constexpr Time max(Time a, Time b) {
  return a < b ? b : a;
}
constexpr Time min(Time a, Time b) {
  return a < b ? a : b;
}
constexpr Duration max(Duration a, Duration b) {
  return a < b ? b : a;
}
constexpr Duration min(Duration a, Duration b) {
  return a < b ? a : b;
}

}  // namespace upsim

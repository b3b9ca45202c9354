#include "sim/config/quantity_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace upsim {
namespace {

// Runs `f` and returns the UnitError message; fails the test if nothing is thrown.
template <typename F>
std::string unit_error(F f) {
  try {
    f();
  } catch (const UnitError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UnitError";
  return "";
}

TEST(ParseDuration, EverySuffixIsExactInPicoseconds) {
  EXPECT_EQ(parse_duration("7ps").ps(), 7);
  EXPECT_EQ(parse_duration("3ns").ps(), 3'000);
  EXPECT_EQ(parse_duration("1.5us").ps(), 1'500'000);
  EXPECT_EQ(parse_duration("1.5\xC2\xB5s").ps(), 1'500'000);  // U+00B5 micro sign
  EXPECT_EQ(parse_duration("1.5\xCE\xBCs").ps(), 1'500'000);  // U+03BC Greek mu
  EXPECT_EQ(parse_duration("10 ms").ps(), 10'000'000'000);
  EXPECT_EQ(parse_duration("2s").ps(), 2'000'000'000'000);
  EXPECT_EQ(parse_duration("0.1us").ps(), 100'000);
  EXPECT_EQ(parse_duration("12.345678ms").ps(), 12'345'678'000);
  EXPECT_EQ(parse_duration("1e3ns").ps(), 1'000'000);
  EXPECT_EQ(parse_duration("2.5E-3s").ps(), 2'500'000'000);
  EXPECT_EQ(parse_duration("  .5ns ").ps(), 500);
  EXPECT_EQ(parse_duration("0s").ps(), 0);
  EXPECT_EQ(parse_duration("+4ns").ps(), 4'000);
}

TEST(ParseDuration, RoundsBelowOnePicosecondToNearest) {
  EXPECT_EQ(parse_duration("1.4ps").ps(), 1);
  EXPECT_EQ(parse_duration("1.5ps").ps(), 2);
  EXPECT_EQ(parse_duration("0.0004ns").ps(), 0);
  EXPECT_EQ(parse_duration("0.0005ns").ps(), 1);
}

TEST(ParseDuration, RejectsMissingUnitUnknownUnitNegativeAndOverflow) {
  EXPECT_NE(unit_error([] { parse_duration("10"); }).find("missing unit"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_duration("10"); }).find("e.g. 1.5us"), std::string::npos);
  const std::string unknown = unit_error([] { parse_duration("3 parsecs"); });
  EXPECT_NE(unknown.find("unknown duration unit `parsecs`"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("ps, ns, us"), std::string::npos) << unknown;
  EXPECT_NE(unit_error([] { parse_duration("-1us"); }).find("negative"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_duration("us"); }).find("expected a number"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_duration("200 days"); }).find("unknown"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_duration("1e7s"); }).find("out of range"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_duration("1US"); }).find("unknown"), std::string::npos);
}

TEST(ParseBandwidth, EverySuffixParsesToBytesPerSecond) {
  EXPECT_EQ(parse_bandwidth("100B/s").bytes_per_second(), 100.0);
  EXPECT_EQ(parse_bandwidth("3KB/s").bytes_per_second(), 3e3);
  EXPECT_EQ(parse_bandwidth("3kB/s").bytes_per_second(), 3e3);
  EXPECT_EQ(parse_bandwidth("3MB/s").bytes_per_second(), 3e6);
  EXPECT_EQ(parse_bandwidth("25GB/s").bytes_per_second(), 25e9);
  EXPECT_EQ(parse_bandwidth("1.5 TB/s").bytes_per_second(), 1.5e12);
  EXPECT_EQ(parse_bandwidth("2KiB/s").bytes_per_second(), 2048.0);
  EXPECT_EQ(parse_bandwidth("2MiB/s").bytes_per_second(), 2.0 * 1024 * 1024);
  EXPECT_EQ(parse_bandwidth("2GiB/s").bytes_per_second(), 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bandwidth("1TiB/s").bytes_per_second(), 1099511627776.0);
  EXPECT_EQ(parse_bandwidth("8bit/s").bytes_per_second(), 1.0);
  EXPECT_EQ(parse_bandwidth("8Kbit/s").bytes_per_second(), 1e3);
  EXPECT_EQ(parse_bandwidth("8Mb/s").bytes_per_second(), 1e6);
  EXPECT_EQ(parse_bandwidth("400Gbit/s").bytes_per_second(), 50e9);
  EXPECT_EQ(parse_bandwidth("400Gb/s").bytes_per_second(), 50e9);
  EXPECT_EQ(parse_bandwidth("400Gbps").bytes_per_second(), 50e9);
  EXPECT_EQ(parse_bandwidth("1.6Tbit/s").bytes_per_second(), 200e9);
}

TEST(ParseBandwidth, RejectsMissingUnitBytesWithoutRateAndNegative) {
  EXPECT_NE(unit_error([] { parse_bandwidth("25"); }).find("missing unit"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_bandwidth("25GB"); }).find("unknown bandwidth unit `GB`"),
            std::string::npos);
  EXPECT_NE(unit_error([] { parse_bandwidth("-25GB/s"); }).find("negative"), std::string::npos);
}

TEST(ParseFlopRate, PrefixesAndSpellings) {
  EXPECT_EQ(parse_flop_rate("5FLOP/s").flops_per_second(), 5.0);
  EXPECT_EQ(parse_flop_rate("2KFLOP/s").flops_per_second(), 2e3);
  EXPECT_EQ(parse_flop_rate("2MFLOP/s").flops_per_second(), 2e6);
  EXPECT_EQ(parse_flop_rate("19.5GFLOP/s").flops_per_second(), 19.5e9);
  EXPECT_EQ(parse_flop_rate("312TFLOP/s").flops_per_second(), 312e12);
  EXPECT_EQ(parse_flop_rate("312 TFLOPS").flops_per_second(), 312e12);
  EXPECT_EQ(parse_flop_rate("312Tflop/s").flops_per_second(), 312e12);
  EXPECT_EQ(parse_flop_rate("2PFLOP/s").flops_per_second(), 2e15);
  EXPECT_NE(unit_error([] { parse_flop_rate("312"); }).find("missing unit"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_flop_rate("312TB/s"); }).find("unknown flop rate unit"),
            std::string::npos);
  EXPECT_NE(unit_error([] { parse_flop_rate("-1TFLOP/s"); }).find("negative"), std::string::npos);
}

TEST(ParseBytes, EverySuffixIsExact) {
  EXPECT_EQ(parse_bytes("4096B"), 4096);
  EXPECT_EQ(parse_bytes("0"), 0);
  EXPECT_EQ(parse_bytes("12B"), 12);
  EXPECT_EQ(parse_bytes("4KB"), 4'000);
  EXPECT_EQ(parse_bytes("4kB"), 4'000);
  EXPECT_EQ(parse_bytes("1.5MB"), 1'500'000);
  EXPECT_EQ(parse_bytes("80GB"), 80'000'000'000);
  EXPECT_EQ(parse_bytes("2TB"), 2'000'000'000'000);
  EXPECT_EQ(parse_bytes("4KiB"), 4096);
  EXPECT_EQ(parse_bytes("1.5KiB"), 1536);
  EXPECT_EQ(parse_bytes("3MiB"), 3 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("80GiB"), int64_t{80} << 30);
  EXPECT_EQ(parse_bytes("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(parse_bytes("1e3B"), 1000);
  EXPECT_EQ(parse_bytes("0.5 KiB"), 512);
}

TEST(ParseBytes, ABareNumberOtherThanZeroIsMissingItsUnit) {
  // "ddp_bucket: 25" meant as PyTorch's bucket_cap_mb must not become 25 bytes.
  const std::string error = unit_error([] { parse_bytes("25"); });
  EXPECT_NE(error.find("missing unit in size \"25\""), std::string::npos) << error;
  EXPECT_NE(error.find("25MiB"), std::string::npos) << error;
  EXPECT_NE(unit_error([] { parse_bytes("4096"); }).find("missing unit"), std::string::npos);
}

TEST(ParseBytes, RejectsFractionsNegativeUnknownAndOverflow) {
  EXPECT_NE(unit_error([] { parse_bytes("1.5B"); }).find("whole number of bytes"),
            std::string::npos);
  EXPECT_NE(unit_error([] { parse_bytes("1.0001KB"); }).find("whole number"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_bytes("0.1KiB"); }).find("whole number"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_bytes("-4KiB"); }).find("negative"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_bytes("4 KIB"); }).find("unknown size unit"), std::string::npos);
  EXPECT_NE(unit_error([] { parse_bytes("100000PiB"); }).find("out of range"), std::string::npos);
}

TEST(FormatForHumans, PicksSensibleUnits) {
  EXPECT_EQ(format_duration(Duration::from_ps(12'345'000'000)), "12.345 ms");
  EXPECT_EQ(format_duration(Duration::from_ps(1'500'000)), "1.5 us");
  EXPECT_EQ(format_duration(Duration::from_ps(100'000)), "100 ns");
  EXPECT_EQ(format_duration(Duration::from_ps(999)), "999 ps");
  EXPECT_EQ(format_duration(Duration::from_ps(3'000'000'000'000)), "3 s");
  EXPECT_EQ(format_duration(Duration::from_ps(-1'500'000)), "-1.5 us");
  EXPECT_EQ(format_bandwidth(Bandwidth::bytes_per_second(25e9)), "25 GB/s");
  EXPECT_EQ(format_bandwidth(Bandwidth::bytes_per_second(1.5e12)), "1.5 TB/s");
  EXPECT_EQ(format_bandwidth(Bandwidth::bytes_per_second(12.0)), "12 B/s");
  EXPECT_EQ(format_flop_rate(FlopRate::flops_per_second(312e12)), "312 TFLOP/s");
  EXPECT_EQ(format_bytes(4096), "4 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(int64_t{80} << 30), "80 GiB");
}

TEST(FormatExact, RoundTripsThroughTheParsers) {
  EXPECT_EQ(format_duration_exact(Duration::from_ps(1'500'000)), "1.5us");
  EXPECT_EQ(format_duration_exact(Duration::from_ps(12'345'678'900)), "12345678.9ns");
  EXPECT_EQ(format_duration_exact(Duration::from_ps(7)), "7ps");
  EXPECT_EQ(format_duration_exact(Duration::zero()), "0s");
  for (int64_t ps : {int64_t{1}, int64_t{999}, int64_t{1'000}, int64_t{1'234'567},
                     int64_t{10'000'000'000}, int64_t{123'456'789'012'345}}) {
    const Duration d = Duration::from_ps(ps);
    EXPECT_EQ(parse_duration(format_duration_exact(d)), d) << ps;
  }
  EXPECT_EQ(format_bandwidth_exact(Bandwidth::bytes_per_second(25e9)), "25GB/s");
  EXPECT_EQ(format_flop_rate_exact(FlopRate::flops_per_second(312e12)), "312TFLOP/s");
  for (double v : {25e9, 12.5e9, 1.0, 123456789.123, 1099511627776.0, 0.1}) {
    EXPECT_EQ(
        parse_bandwidth(format_bandwidth_exact(Bandwidth::bytes_per_second(v))).bytes_per_second(),
        v);
    EXPECT_EQ(
        parse_flop_rate(format_flop_rate_exact(FlopRate::flops_per_second(v))).flops_per_second(),
        v);
  }
  EXPECT_EQ(format_bytes_exact(4096), "4KiB");
  EXPECT_EQ(format_bytes_exact(1'000'000'000'000), "1TB");
  EXPECT_EQ(format_bytes_exact(1'500), "1500B");
  EXPECT_EQ(format_bytes_exact(0), "0");
  for (int64_t b :
       {int64_t{1}, int64_t{1'500}, int64_t{4'096}, int64_t{80} << 30, int64_t{2'000'000}}) {
    EXPECT_EQ(parse_bytes(format_bytes_exact(b)), b) << b;
  }
}

}  // namespace
}  // namespace upsim

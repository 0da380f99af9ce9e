// Tests of the unit types: conversions between bytes, bandwidth, FLOPs and time, GB vs GiB,
// rounding to the picosecond and saturation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "sim/base/units.h"

using ts::Bandwidth;
using ts::Bytes;
using ts::Duration;
using ts::FlopRate;
using ts::Flops;
using ts::SimTime;

TEST_CASE("Duration constructors convert to integer picoseconds", "[units]") {
  STATIC_REQUIRE(Duration::from_seconds(1.0).ps() == 1'000'000'000'000);
  STATIC_REQUIRE(Duration::from_ms(1.0).ps() == 1'000'000'000);
  STATIC_REQUIRE(Duration::from_us(1.0).ps() == 1'000'000);
  STATIC_REQUIRE(Duration::from_ns(1.0).ps() == 1'000);
  STATIC_REQUIRE(Duration::from_ps(7).ps() == 7);
  CHECK(Duration::from_us(2.5).us() == Approx(2.5));
  CHECK(Duration::from_ms(3.0).seconds() == Approx(3e-3));
  CHECK(Duration::zero().ps() == 0);
}

TEST_CASE("Duration::from_seconds rounds to the nearest picosecond, halves away from zero", "[units]") {
  // 0.4 ps and 0.6 ps are far from the .5 boundary, so binary rounding of the inputs cannot
  // change the expected result.
  CHECK(Duration::from_ns(0.0004).ps() == 0);
  CHECK(Duration::from_ns(0.0006).ps() == 1);
  CHECK(Duration::from_ns(-0.0004).ps() == 0);
  CHECK(Duration::from_ns(-0.0006).ps() == -1);
  CHECK(Duration::from_ns(1.2344).ps() == 1234);
}

TEST_CASE("Duration::from_seconds saturates beyond the int64 picosecond range", "[units]") {
  // int64 picoseconds end at 9.22e18 ps = 9.22e6 s (about 106 days).
  CHECK(Duration::from_seconds(1e7) == Duration::max());
  CHECK(Duration::from_seconds(std::numeric_limits<double>::infinity()) == Duration::max());
  CHECK(Duration::from_seconds(std::numeric_limits<double>::quiet_NaN()) == Duration::max());
  CHECK(Duration::from_seconds(-1e7).ps() == std::numeric_limits<std::int64_t>::min());
  CHECK(Duration::from_seconds(-std::numeric_limits<double>::infinity()).ps() ==
        std::numeric_limits<std::int64_t>::min());
  // Just inside the range: 9e6 s is representable.
  CHECK(Duration::from_seconds(9e6).ps() == 9'000'000'000'000'000'000);
  CHECK(Duration::max().ps() == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("Duration arithmetic", "[units]") {
  const Duration a = Duration::from_ps(300);
  const Duration b = Duration::from_ps(100);
  CHECK((a + b).ps() == 400);
  CHECK((a - b).ps() == 200);
  CHECK((a * 3).ps() == 900);
  CHECK(a / b == Approx(3.0));
  Duration c = a;
  c += b;
  CHECK(c.ps() == 400);
  c -= a;
  CHECK(c == b);
  CHECK(b < a);
  // scaled() rounds to the nearest picosecond.
  CHECK(Duration::from_ps(10).scaled(0.26).ps() == 3);
  CHECK(Duration::from_us(1).scaled(1.5).ps() == 1'500'000);
}

TEST_CASE("SimTime is a point on the clock, differences are Durations", "[units]") {
  const SimTime t0 = SimTime::zero();
  const SimTime t1 = t0 + Duration::from_ns(5);
  CHECK(t1.ps() == 5000);
  CHECK((t1 - t0) == Duration::from_ns(5));
  CHECK(t0 < t1);
  SimTime t2 = t1;
  t2 += Duration::from_ps(1);
  CHECK(t2.ps() == 5001);
  CHECK(SimTime::from_ps(2'000'000).us() == Approx(2.0));
  CHECK(SimTime::from_ps(3'000'000'000'000).seconds() == Approx(3.0));
}

TEST_CASE("Bytes: GB is 1e9 bytes, GiB is 2^30 bytes, never mixed", "[units]") {
  STATIC_REQUIRE(Bytes::gb(1).count() == 1'000'000'000);
  STATIC_REQUIRE(Bytes::gib(1).count() == 1'073'741'824);
  STATIC_REQUIRE(Bytes::mib(1).count() == 1'048'576);
  CHECK(Bytes::gib(80).count() == 85'899'345'920);
  CHECK(Bytes::gib(80).in_gb() == Approx(85.89934592));
  CHECK(Bytes::gb(80).in_gib() == Approx(74.50580596923828));
  CHECK(Bytes::gib(1.5).in_gib() == Approx(1.5));
  CHECK(Bytes::gb(2).in_gb() == Approx(2.0));
  CHECK(Bytes::gib(1) != Bytes::gb(1));
}

TEST_CASE("Bytes::from_real rounds to the nearest byte, halves away from zero", "[units]") {
  CHECK(Bytes::from_real(2.4).count() == 2);
  CHECK(Bytes::from_real(2.5).count() == 3);
  CHECK(Bytes::from_real(-2.5).count() == -3);
  CHECK(Bytes::from_real(0.49).count() == 0);
}

TEST_CASE("Bytes arithmetic", "[units]") {
  Bytes a(1000);
  CHECK((a + Bytes(24)).count() == 1024);
  CHECK((a - Bytes(1)).count() == 999);
  CHECK((a * 3).count() == 3000);
  CHECK((a / 3).count() == 333);  // integer division truncates
  a += Bytes(10);
  CHECK(a.count() == 1010);
  a -= Bytes(10);
  CHECK(a == Bytes(1000));
  CHECK(Bytes(1) < Bytes(2));
  CHECK(Bytes().count() == 0);
}

TEST_CASE("Bandwidth: line rates in bits, memory rates in bytes", "[units]") {
  // 400 Gb/s InfiniBand NDR = 50 GB/s.
  CHECK(Bandwidth::gbits_per_s(400).bytes_per_s() == Approx(50e9));
  CHECK(Bandwidth::gbits_per_s(400).gbytes_per_s() == Approx(50.0));
  CHECK(Bandwidth::gbytes_per_s(900).bytes_per_s() == Approx(900e9));
  CHECK(Bandwidth::bytes_per_s(1e6).gbytes_per_s() == Approx(1e-3));
  CHECK((Bandwidth::gbytes_per_s(100) * 0.5).gbytes_per_s() == Approx(50.0));
  CHECK(Bandwidth::gbits_per_s(8) == Bandwidth::gbytes_per_s(1));
}

TEST_CASE("Bytes / Bandwidth gives the transfer Duration", "[units]") {
  // t = bytes / (bytes/s).
  CHECK((Bytes::gb(1) / Bandwidth::gbytes_per_s(1)).ps() == 1'000'000'000'000);
  // 1 GiB at 1 GB/s = 1.073741824 s: the GB/GiB distinction is a 7.4% difference.
  CHECK((Bytes::gib(1) / Bandwidth::gbytes_per_s(1)).ps() == 1'073'741'824'000);
  // 1 byte at 400 Gb/s = 1/50e9 s = 20 ps.
  CHECK((Bytes(1) / Bandwidth::gbits_per_s(400)).ps() == 20);
  // 3 bytes at 1 TB/s = 3 ps; 1 byte at 3 TB/s = 0.333 ps rounds to 0.
  CHECK((Bytes(3) / Bandwidth::gbytes_per_s(1000)).ps() == 3);
  CHECK((Bytes(1) / Bandwidth::gbytes_per_s(3000)).ps() == 0);
  // Zero bandwidth: infinite time saturates to Duration::max().
  CHECK((Bytes(1) / Bandwidth::bytes_per_s(0)) == Duration::max());
  CHECK((Bytes(0) / Bandwidth::gbytes_per_s(1)) == Duration::zero());
}

TEST_CASE("Flops / FlopRate gives the compute Duration", "[units]") {
  CHECK((Flops(1e12) / FlopRate::tflops(1)).ps() == 1'000'000'000'000);
  // 989 TFLOP/s (H100 SXM dense BF16 datasheet) for 989e9 FLOPs = 1 ms.
  CHECK((Flops(989e9) / FlopRate::tflops(989)) == Duration::from_ms(1));
  CHECK(FlopRate::per_s(2e12).tflops() == Approx(2.0));
  CHECK((FlopRate::tflops(10) * 0.5).tflops() == Approx(5.0));
  Flops f(1.0);
  f += Flops(2.0);
  CHECK(f.value() == Approx(3.0));
  CHECK((f * 2.0).value() == Approx(6.0));
  CHECK((f + Flops(1)).value() == Approx(4.0));
  // FLOP counts beyond int64 are representable (a 405B-parameter iteration exceeds 2^63).
  CHECK(Flops(1e20).value() > 9.3e18);
}

TEST_CASE("Achieved rates over a Duration", "[units]") {
  CHECK((Flops(5e12) / Duration::from_seconds(2)).tflops() == Approx(2.5));
  CHECK((Bytes::gb(10) / Duration::from_seconds(4)).gbytes_per_s() == Approx(2.5));
}

// Unit types saturate at the int64 range instead of overflowing (absurd inputs reach it; the
// driver turns a saturated iteration time into an input error).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "sim/base/units.h"

using namespace ts;

namespace {
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
}  // namespace

TEST_CASE("saturating int64 helpers clamp at the range and are exact inside it") {
  CHECK(sat_add(kMax, 1) == kMax);
  CHECK(sat_add(kMin, -1) == kMin);
  CHECK(sat_add(40, 2) == 42);
  CHECK(sat_sub(kMin, 1) == kMin);
  CHECK(sat_sub(kMax, -1) == kMax);
  CHECK(sat_sub(40, -2) == 42);
  CHECK(sat_mul(kMax / 2, 3) == kMax);
  CHECK(sat_mul(kMax / 2, -3) == kMin);
  CHECK(sat_mul(-(kMax / 2), -3) == kMax);
  CHECK(sat_mul(-6, 7) == -42);
}

TEST_CASE("time and bytes saturate instead of wrapping") {
  const Duration huge = Duration::from_seconds(1e30);
  CHECK(huge == Duration::max());
  CHECK(Duration::from_seconds(std::nan("")) == Duration::max());
  CHECK((huge + Duration::from_ps(1)) == Duration::max());
  CHECK((Duration::from_ps(kMax / 2) * 4) == Duration::max());
  SimTime t = SimTime::from_ps(kMax - 10);
  t += Duration::from_ps(100);
  CHECK(t.ps() == kMax);
  CHECK((t - SimTime::zero()) == Duration::max());
  CHECK(Bytes::from_real(1e30).count() == kMax);
  CHECK(Bytes::from_real(-1e30).count() == kMin);
  CHECK(Bytes::from_real(std::nan("")).count() == kMax);
  CHECK((Bytes(kMax) + Bytes(1)).count() == kMax);
  CHECK((Bytes(kMax / 3) * 4).count() == kMax);
  CHECK((Bytes(kMin) - Bytes(1)).count() == kMin);
  // Inside the range nothing changes.
  CHECK((Bytes(3) * 4 - Bytes(2)).count() == 10);
  CHECK((Duration::from_ps(7) + Duration::from_ps(5)).ps() == 12);
  CHECK(Bytes::from_real(2.5).count() == 3);
}

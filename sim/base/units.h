// Unit types: simulated time in integer picoseconds, bytes, FLOPs, bandwidth and FLOP rates.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace ts {

// int64 arithmetic that saturates at the range instead of overflowing (undefined behaviour).
constexpr std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
  }
  return r;
}
constexpr std::int64_t sat_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) {
    return b < 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
  }
  return r;
}
constexpr std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    return (a < 0) != (b < 0) ? std::numeric_limits<std::int64_t>::min()
                              : std::numeric_limits<std::int64_t>::max();
  }
  return r;
}

// A span of simulated time, stored as integer picoseconds so that event ordering is exact and
// reproducible. int64 picoseconds cover about 106 days, far beyond one training iteration.
class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ps(std::int64_t ps) { return Duration(ps); }
  static constexpr Duration from_ns(double ns) { return from_seconds(ns * 1e-9); }
  static constexpr Duration from_us(double us) { return from_seconds(us * 1e-6); }
  static constexpr Duration from_ms(double ms) { return from_seconds(ms * 1e-3); }
  // Rounds to the nearest picosecond; saturates at max() for values beyond the range (and NaN).
  static constexpr Duration from_seconds(double s) {
    const double ps = s * 1e12;
    if (!(ps < 9.2e18)) return max();
    if (ps < -9.2e18) return Duration(std::numeric_limits<std::int64_t>::min());
    return Duration(static_cast<std::int64_t>(ps < 0 ? ps - 0.5 : ps + 0.5));
  }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double us() const { return static_cast<double>(ps_) * 1e-6; }

  constexpr auto operator<=>(const Duration&) const = default;
  // Arithmetic saturates at the int64 range instead of wrapping (absurd inputs reach it; the
  // driver reports a saturated iteration time as an input error).
  constexpr Duration operator+(Duration o) const { return Duration(sat_add(ps_, o.ps_)); }
  constexpr Duration operator-(Duration o) const { return Duration(sat_sub(ps_, o.ps_)); }
  constexpr Duration& operator+=(Duration o) { ps_ = sat_add(ps_, o.ps_); return *this; }
  constexpr Duration& operator-=(Duration o) { ps_ = sat_sub(ps_, o.ps_); return *this; }
  constexpr Duration operator*(std::int64_t k) const { return Duration(sat_mul(ps_, k)); }
  constexpr double operator/(Duration o) const {
    return static_cast<double>(ps_) / static_cast<double>(o.ps_);
  }
  // Scales by a real factor, rounding to the nearest picosecond.
  constexpr Duration scaled(double f) const { return from_seconds(seconds() * f); }

 private:
  constexpr explicit Duration(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

// A point on the simulated clock (picoseconds since the start of the simulation).
class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_ps(std::int64_t ps) { return SimTime(ps); }
  static constexpr SimTime zero() { return SimTime(0); }
  constexpr std::int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double us() const { return static_cast<double>(ps_) * 1e-6; }
  constexpr auto operator<=>(const SimTime&) const = default;
  constexpr SimTime operator+(Duration d) const { return SimTime(sat_add(ps_, d.ps())); }
  constexpr SimTime& operator+=(Duration d) { ps_ = sat_add(ps_, d.ps()); return *this; }
  constexpr Duration operator-(SimTime o) const { return Duration::from_ps(sat_sub(ps_, o.ps_)); }

 private:
  constexpr explicit SimTime(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

// A number of bytes. GB (1e9) and GiB (2^30) conversions are explicit and named.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t n) : n_(n) {}
  // Rounds a real byte count (from a formula) to the nearest byte; saturates beyond the int64
  // range (and for NaN) as Duration::from_seconds does.
  static constexpr Bytes from_real(double b) {
    if (!(b < 9.2e18)) return Bytes(std::numeric_limits<std::int64_t>::max());
    if (b < -9.2e18) return Bytes(std::numeric_limits<std::int64_t>::min());
    return Bytes(static_cast<std::int64_t>(b < 0 ? b - 0.5 : b + 0.5));
  }
  static constexpr Bytes gib(double g) { return from_real(g * 1073741824.0); }
  static constexpr Bytes mib(double m) { return from_real(m * 1048576.0); }
  static constexpr Bytes gb(double g) { return from_real(g * 1e9); }
  constexpr std::int64_t count() const { return n_; }
  constexpr double real() const { return static_cast<double>(n_); }
  constexpr double in_gib() const { return real() / 1073741824.0; }
  constexpr double in_gb() const { return real() / 1e9; }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return Bytes(sat_add(n_, o.n_)); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(sat_sub(n_, o.n_)); }
  constexpr Bytes& operator+=(Bytes o) { n_ = sat_add(n_, o.n_); return *this; }
  constexpr Bytes& operator-=(Bytes o) { n_ = sat_sub(n_, o.n_); return *this; }
  constexpr Bytes operator*(std::int64_t k) const { return Bytes(sat_mul(n_, k)); }
  constexpr Bytes operator/(std::int64_t k) const { return Bytes(n_ / k); }

 private:
  std::int64_t n_ = 0;
};

// Floating-point operations. Real-valued: a 405B-parameter iteration exceeds 2^63 FLOPs.
class Flops {
 public:
  constexpr Flops() = default;
  constexpr explicit Flops(double f) : f_(f) {}
  constexpr double value() const { return f_; }
  constexpr auto operator<=>(const Flops&) const = default;
  constexpr Flops operator+(Flops o) const { return Flops(f_ + o.f_); }
  constexpr Flops& operator+=(Flops o) { f_ += o.f_; return *this; }
  constexpr Flops operator*(double k) const { return Flops(f_ * k); }

 private:
  double f_ = 0;
};

// Bytes per second.
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bytes_per_s(double b) { return Bandwidth(b); }
  static constexpr Bandwidth gbytes_per_s(double gb) { return Bandwidth(gb * 1e9); }
  // Network line rates are quoted in bits: 400 Gb/s = 50 GB/s.
  static constexpr Bandwidth gbits_per_s(double gbit) { return Bandwidth(gbit * 1e9 / 8); }
  constexpr double bytes_per_s() const { return bps_; }
  constexpr double gbytes_per_s() const { return bps_ * 1e-9; }
  constexpr auto operator<=>(const Bandwidth&) const = default;
  constexpr Bandwidth operator*(double k) const { return Bandwidth(bps_ * k); }

 private:
  constexpr explicit Bandwidth(double b) : bps_(b) {}
  double bps_ = 0;
};

// FLOPs per second.
class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate per_s(double f) { return FlopRate(f); }
  static constexpr FlopRate tflops(double t) { return FlopRate(t * 1e12); }
  constexpr double per_s() const { return f_; }
  constexpr double tflops() const { return f_ * 1e-12; }
  constexpr auto operator<=>(const FlopRate&) const = default;
  constexpr FlopRate operator*(double k) const { return FlopRate(f_ * k); }

 private:
  constexpr explicit FlopRate(double f) : f_(f) {}
  double f_ = 0;
};

// Time to move `b` at rate `bw`, and to execute `f` at rate `r`.
constexpr Duration operator/(Bytes b, Bandwidth bw) {
  return Duration::from_seconds(b.real() / bw.bytes_per_s());
}
constexpr Duration operator/(Flops f, FlopRate r) {
  return Duration::from_seconds(f.value() / r.per_s());
}
// Achieved rates over a span of time.
constexpr FlopRate operator/(Flops f, Duration d) { return FlopRate::per_s(f.value() / d.seconds()); }
constexpr Bandwidth operator/(Bytes b, Duration d) {
  return Bandwidth::bytes_per_s(b.real() / d.seconds());
}

}  // namespace ts

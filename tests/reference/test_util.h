#pragma once
// Test-side helpers, written independently of reference/src (different formulations on purpose).
#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fusediff/model/convention.h"

namespace fusediff::reference::testing {

using boost::multiprecision::cpp_int;
using boost::multiprecision::cpp_rational;

// Exact rational of a finite double via frexp: x = q 2^e, q in [0.5, 1) has at most 53 significant bits, so
// q * 2^53 is an integer.
inline cpp_rational exact(double x) {
  if (x == 0) return 0;
  int e = 0;
  const double q = std::frexp(x, &e);
  const auto m = static_cast<int64_t>(std::ldexp(q, 53));  // exact
  cpp_rational r = m;
  const int k = e - 53;
  if (k >= 0) return r * cpp_rational(cpp_int(1) << k);
  return r / cpp_rational(cpp_int(1) << -k);
}

inline cpp_int floor_of(const cpp_rational& r) {
  cpp_int q = numerator(r) / denominator(r);
  if (cpp_rational(q) > r) q -= 1;
  return q;
}

// Rounding written as the textbook formulas: away = sign * floor(|r| + 1/2), up = floor(r + 1/2),
// even = nearest, on an exact tie the even neighbour.
inline cpp_int round_mode(const cpp_rational& r, RoundingMode mode) {
  const cpp_rational half(1, 2);
  switch (mode) {
    case RoundingMode::half_up: return floor_of(r + half);
    case RoundingMode::half_away_from_zero: {
      if (r < 0) return -floor_of(-r + half);
      return floor_of(r + half);
    }
    case RoundingMode::half_to_even: {
      const cpp_int lower = floor_of(r);
      const cpp_rational diff = r - cpp_rational(lower);
      if (diff < half) return lower;
      if (diff > half) return lower + 1;
      return (lower % 2 == 0) ? lower : cpp_int(lower + 1);
    }
  }
  throw std::logic_error("mode");
}

inline int64_t clamp64(const cpp_int& v, int64_t lo, int64_t hi) {
  if (v < lo) return lo;
  if (v > hi) return hi;
  return static_cast<int64_t>(v);
}

// Parses a decimal/scientific literal ("-1.25e-3", "0.0", "7") exactly.
inline cpp_rational parse_decimal(const std::string& s) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  std::string digits;
  int frac = 0;
  bool point = false;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      point = true;
    } else {
      digits += s[i];
      if (point) ++frac;
    }
  }
  long e = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) e = std::stol(s.substr(i + 1));
  else if (i != s.size()) throw std::invalid_argument("bad decimal: " + s);
  while (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
  cpp_rational v = cpp_int(digits.empty() ? std::string("0") : digits);
  const long k = e - frac;
  const cpp_int p = boost::multiprecision::pow(cpp_int(10), static_cast<unsigned>(k < 0 ? -k : k));
  v = k >= 0 ? cpp_rational(v * p) : cpp_rational(v / p);
  return neg ? cpp_rational(-v) : v;
}

// A decimal literal as (negative, digits D without leading zeros, exponent E) with value 0.D x 10^E; D is
// empty for zero. Cheap for any exponent (1e-30989693 included): nothing is expanded.
struct DecimalParts {
  bool negative = false;
  std::string digits;
  long exponent = 0;
};
inline DecimalParts split_decimal(const std::string& s) {
  DecimalParts p;
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) p.negative = s[i++] == '-';
  std::string digits;
  long point = -1;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') point = static_cast<long>(digits.size());
    else digits += s[i];
  }
  if (point < 0) point = static_cast<long>(digits.size());
  long e = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) e = std::stol(s.substr(i + 1));
  else if (i != s.size()) throw std::invalid_argument("bad decimal: " + s);
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return DecimalParts{};
  p.digits = digits.substr(first);
  p.exponent = point - static_cast<long>(first) + e;  // 0.D x 10^(point - first + e)
  while (!p.digits.empty() && p.digits.back() == '0') p.digits.pop_back();
  return p;
}

// |a - b| <= 10^-digits |b| for two decimal literals, without expanding their exponents.
inline bool decimals_agree(const std::string& a_text, const std::string& b_text, int digits) {
  const DecimalParts a = split_decimal(a_text), b = split_decimal(b_text);
  if (a.digits.empty() || b.digits.empty()) return a.digits.empty() && b.digits.empty();
  if (a.negative != b.negative) return false;
  const long shift = a.exponent - b.exponent;  // equal, or off by one across a power of ten
  if (shift < -1 || shift > 1) return false;
  const size_t n = std::max(a.digits.size(), b.digits.size()) + 2;
  auto mantissa = [n](const std::string& d) { return cpp_int(d + std::string(n - d.size(), '0')); };
  cpp_int ma = mantissa(a.digits), mb = mantissa(b.digits);  // values ma 10^(Ea-n), mb 10^(Eb-n)
  if (shift == 1) ma *= 10;
  if (shift == -1) mb *= 10;
  const cpp_int diff = ma > mb ? cpp_int(ma - mb) : cpp_int(mb - ma);
  return diff * boost::multiprecision::pow(cpp_int(10), static_cast<unsigned>(digits)) <= mb;
}

// Exact decimal expansion of a double (every binary fraction terminates in decimal).
inline std::string exact_decimal(double x) {
  const cpp_rational r = exact(x);
  const cpp_int num = abs(numerator(r));
  const cpp_int den = denominator(r);  // a power of two 2^k
  unsigned k = 0;
  while ((cpp_int(1) << k) < den) ++k;
  // num / 2^k = num * 5^k / 10^k
  const cpp_int scaled = num * boost::multiprecision::pow(cpp_int(5), k);
  std::string digits = scaled.str();
  if (digits.size() <= k) digits = std::string(k + 1 - digits.size(), '0') + digits;
  std::string out = (r < 0 ? "-" : "") + digits.substr(0, digits.size() - k);
  if (k > 0) out += "." + digits.substr(digits.size() - k);
  return out;
}

}  // namespace fusediff::reference::testing

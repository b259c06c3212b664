#include "exact.h"

#include <bit>
#include <cmath>

#include "fusediff/model/errors.h"

namespace fusediff::reference::detail {

cpp_rational pow2(int k) {
  cpp_int p = 1;
  if (k >= 0) return cpp_rational(p << k);
  return cpp_rational(p, cpp_int(1) << (-k));
}

namespace {
cpp_rational from_parts(bool negative, uint64_t mantissa, int exponent) {
  cpp_rational r = cpp_rational(cpp_int(mantissa)) * pow2(exponent);
  return negative ? cpp_rational(-r) : r;
}

cpp_int pow10(long k) { return boost::multiprecision::pow(cpp_int(10), static_cast<unsigned>(k)); }

// 10^k as a rational, k of either sign.
cpp_rational pow10_rational(long k) {
  if (k >= 0) return cpp_rational(pow10(k));
  return cpp_rational(cpp_int(1), pow10(-k));
}
}  // namespace

cpp_rational exact_rational(float value) {
  if (!std::isfinite(value)) throw InputError("reference: a non-finite float32 has no exact rational value");
  // binary32: sign | 8 exponent bits | 23 fraction bits; value = m * 2^e exactly.
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const bool negative = (bits >> 31) != 0;
  const uint32_t biased = (bits >> 23) & 0xFFu;
  const uint32_t fraction = bits & 0x7FFFFFu;
  if (biased == 0) return from_parts(negative, fraction, -149);               // subnormal (or zero)
  return from_parts(negative, fraction | 0x800000u, static_cast<int>(biased) - 150);  // normal: 1.f * 2^(b-127)
}

cpp_rational exact_rational(double value) {
  if (!std::isfinite(value)) throw InputError("reference: a non-finite double has no exact rational value");
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const bool negative = (bits >> 63) != 0;
  const uint64_t biased = (bits >> 52) & 0x7FFu;
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  if (biased == 0) return from_parts(negative, fraction, -1074);
  return from_parts(negative, fraction | (uint64_t{1} << 52), static_cast<int>(biased) - 1075);
}

cpp_int floor_rational(const cpp_rational& r) {
  const cpp_int n = numerator(r);
  const cpp_int d = denominator(r);  // > 0
  cpp_int q = n / d;                 // truncates toward zero
  if (n < 0 && q * d != n) q -= 1;   // floor for negative non-integers
  return q;
}

int half_compare(const cpp_rational& r, const cpp_int& floor_r) {
  const cpp_int n = numerator(r);
  const cpp_int d = denominator(r);
  const cpp_int twice_remainder = 2 * (n - floor_r * d);  // 2 * frac(r) * d, in [0, 2d)
  if (twice_remainder < d) return -1;
  if (twice_remainder > d) return 1;
  return 0;
}

int64_t round_rational(const cpp_rational& r, RoundingMode mode) {
  const cpp_int f = floor_rational(r);
  if (f > kClampMagnitude) return kClampMagnitude;
  if (f < -kClampMagnitude) return -kClampMagnitude;
  return round_split(mode, static_cast<int64_t>(f), half_compare(r, f));
}

double tie_distance_rational(const cpp_rational& r) {
  const cpp_int f = floor_rational(r);
  const cpp_rational phi = r - cpp_rational(f);  // [0, 1)
  cpp_rational d = phi - cpp_rational(1, 2);
  if (d < 0) d = -d;
  return to_double(d);
}

double to_double(const cpp_rational& r) { return r.convert_to<double>(); }

std::string format_decimal_digits(bool negative, std::string digits, long exp10) {
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (digits.empty() || digits == "0") return "0";
  const long n = static_cast<long>(digits.size());
  std::string out = negative ? "-" : "";
  if (exp10 >= -5 && exp10 <= 30) {
    if (exp10 <= 0) {
      out += "0." + std::string(static_cast<size_t>(-exp10), '0') + digits;
    } else if (exp10 >= n) {
      out += digits + std::string(static_cast<size_t>(exp10 - n), '0');
    } else {
      out += digits.substr(0, static_cast<size_t>(exp10)) + "." + digits.substr(static_cast<size_t>(exp10));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  const long e = exp10 - 1;
  out += (e < 0 ? "e-" : "e+") + std::to_string(e < 0 ? -e : e);
  return out;
}

std::string decimal_string(const cpp_rational& r, int digits) {
  if (digits < 1) digits = 1;
  if (r == 0) return "0";
  const bool negative = r < 0;
  const cpp_rational a = negative ? cpp_rational(-r) : r;
  // Find E with 10^(E-1) <= a < 10^E, starting from an estimate via bit lengths.
  const long bits = static_cast<long>(msb(numerator(a))) - static_cast<long>(msb(denominator(a)));
  long e = static_cast<long>(std::floor(static_cast<double>(bits) * 0.30102999566398120));
  while (a >= pow10_rational(e)) ++e;
  while (a < pow10_rational(e - 1)) --e;
  // Scale to `digits` integer digits and round half to even.
  const cpp_rational scaled = a * pow10_rational(digits - e);
  cpp_int i = floor_rational(scaled);
  const int cmp = half_compare(scaled, i);
  if (cmp > 0 || (cmp == 0 && (i % 2) != 0)) i += 1;
  if (i == pow10(digits)) {  // rounding carried into a new digit
    i = pow10(digits - 1);
    ++e;
  }
  return format_decimal_digits(negative, i.str(), e);
}

cpp_rational parse_decimal(std::string_view text, std::string_view field) {
  auto fail = [&]() -> cpp_rational {
    throw InputError(std::string(field) + ": '" + std::string(text) +
                     "' is not a decimal number (expected [-]digits[.digits][e[-]digits])");
  };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  std::string digits;
  long fraction_digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch >= '0' && ch <= '9') {
      digits += ch;
      if (seen_point) ++fraction_digits;
    } else if (ch == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (digits.empty()) return fail();
  long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) exp_negative = text[i++] == '-';
    if (i >= text.size()) return fail();
    for (; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9') return fail();
      exponent = exponent * 10 + (text[i] - '0');
      if (exponent > 100000) {
        throw InputError(std::string(field) + ": '" + std::string(text) + "' has an exponent beyond 1e100000");
      }
    }
    if (exp_negative) exponent = -exponent;
  }
  if (i != text.size()) return fail();
  // cpp_int reads a leading 0 as an octal prefix: strip leading zeros first.
  const size_t first = digits.find_first_not_of('0');
  digits = first == std::string::npos ? std::string("0") : digits.substr(first);
  cpp_rational value = cpp_rational(cpp_int(digits)) * pow10_rational(exponent - fraction_digits);
  return negative ? cpp_rational(-value) : value;
}

}  // namespace fusediff::reference::detail

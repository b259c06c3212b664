#include "fusediff/model/quant.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

int32_t QuantType::qmin() const {
  switch (scalar) {
    case ScalarType::int8: return narrow ? -127 : -128;
    case ScalarType::uint8: return 0;
    case ScalarType::int16: return narrow ? -32767 : -32768;
  }
  return 0;
}

int32_t QuantType::qmax() const {
  switch (scalar) {
    case ScalarType::int8: return 127;
    case ScalarType::uint8: return 255;
    case ScalarType::int16: return 32767;
  }
  return 0;
}

int32_t QuantType::bits() const { return scalar == ScalarType::int16 ? 16 : 8; }

namespace {
constexpr detail::Names<ScalarType, 3> kScalarTypes{
    {{"int8", ScalarType::int8}, {"uint8", ScalarType::uint8}, {"int16", ScalarType::int16}}};
constexpr detail::Names<RoundingMode, 3> kRoundingModes{{{"half_away_from_zero", RoundingMode::half_away_from_zero},
                                                         {"half_to_even", RoundingMode::half_to_even},
                                                         {"half_up", RoundingMode::half_up}}};
}  // namespace

std::string_view to_string(ScalarType t) { return detail::NameOf(t, kScalarTypes); }

std::string_view to_string(RoundingMode m) { return detail::NameOf(m, kRoundingModes); }

std::string to_string(const QuantType& t) {
  std::string s(to_string(t.scalar));
  if (t.narrow) s += "_narrow";
  return s;
}

ScalarType parse_scalar_type(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "type", kScalarTypes);
}

RoundingMode parse_rounding_mode(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "rounding mode", kRoundingModes);
}

float parse_float32(std::string_view text, std::string_view field) {
  float value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;  // from_chars rejects a leading '+'
  auto [ptr, ec] = std::from_chars(first, last, value, std::chars_format::general);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != last) {
    throw InputError(std::string(field) + ": '" + std::string(text) + "' is not a number");
  }
  if (ec == std::errc::result_out_of_range || !std::isfinite(value)) {
    throw InputError(std::string(field) + ": '" + std::string(text) + "' is not a finite float32");
  }
  return value;
}

namespace {
template <typename T>
std::string ShortestDecimal(T value) {
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round-trip form
  return std::string(buffer, ptr);
}
}  // namespace

std::string format_float32(float value) { return ShortestDecimal(value); }
std::string format_double(double value) { return ShortestDecimal(value); }

int64_t parse_int(std::string_view text, std::string_view field) {
  int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec != std::errc() || ptr != last) {
    throw InputError(std::string(field) + ": '" + std::string(text) + "' is not an integer");
  }
  return value;
}

void validate(const QuantParams& q, std::string_view field) {
  if (!std::isfinite(q.scale) || !(q.scale > 0.0f)) {
    throw InputError(std::string(field) + ".scale: " + format_float32(q.scale) + " is not a finite value > 0");
  }
  if (!q.type.contains(q.zero_point)) {
    throw InputError(std::string(field) + ".zero_point: " + std::to_string(q.zero_point) + " is outside " +
                     to_string(q.type) + " [" + std::to_string(q.type.qmin()) + ", " + std::to_string(q.type.qmax()) +
                     "]");
  }
}

}  // namespace fusediff

#pragma once
// Quantized types, quantization parameters and rounding modes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusediff {

enum class ScalarType { int8, uint8, int16 };

// A quantized integer type. `narrow` drops the most negative code of a signed type (int8 [-127, 127]).
struct QuantType {
  ScalarType scalar = ScalarType::int8;
  bool narrow = false;

  int32_t qmin() const;
  int32_t qmax() const;
  int32_t bits() const;               // 8 or 16
  uint32_t code_count() const { return static_cast<uint32_t>(qmax() - qmin() + 1); }
  bool contains(int64_t code) const { return code >= qmin() && code <= qmax(); }
  friend bool operator==(const QuantType&, const QuantType&) = default;
};

// real = scale * (code - zero_point). scale is float32, > 0 and finite; zero_point inside the type.
struct QuantParams {
  QuantType type;
  float scale = 1.0f;
  int32_t zero_point = 0;
  friend bool operator==(const QuantParams&, const QuantParams&) = default;
};

// How a real value is rounded to an integer at a quantization boundary.
//   half_away_from_zero: ties go away from zero (C round, TFLite TfLiteRound, gemmlowp RoundingDivideByPOT)
//   half_to_even:        ties go to the even neighbour (IEEE default, ONNX, oneDNN)
//   half_up:             ties go toward +infinity (floor(x + 1/2); TFLite single-rounding shift)
enum class RoundingMode { half_away_from_zero, half_to_even, half_up };

std::string_view to_string(ScalarType t);
std::string_view to_string(RoundingMode m);
std::string to_string(const QuantType& t);  // "int8", "int8_narrow"

// Parsers throw InputError naming `field` and the accepted values.
ScalarType parse_scalar_type(std::string_view text, std::string_view field);
RoundingMode parse_rounding_mode(std::string_view text, std::string_view field);

// Parse a decimal/scientific number to the nearest float32 (round-to-nearest-even on the exact decimal
// value, via std::from_chars). Rejects non-finite and trailing garbage. Throws InputError naming `field`.
float parse_float32(std::string_view text, std::string_view field);
// Shortest decimal that parses back to exactly `value` (round-trips through parse_float32).
std::string format_float32(float value);
// Shortest decimal that parses back to exactly `value` ("1e-300", "0.1", "inf", "nan"). Use it, never %f or
// std::to_string, for a scale or any double in a message: %f shows 1e-300 as 0.000000.
std::string format_double(double value);

int64_t parse_int(std::string_view text, std::string_view field);
// "1:-2:3" as integers (empty text: none); a bad one throws InputError naming field[i].
std::vector<int64_t> split_integers(const std::string& text, const std::string& field);

// Throws InputError when scale is not finite and > 0 or the zero point is outside the type.
void validate(const QuantParams& q, std::string_view field);

}  // namespace fusediff

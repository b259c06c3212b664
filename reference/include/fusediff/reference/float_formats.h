#pragma once
// binary32 -> binary16 / bfloat16 conversions and back, from the formats' definitions on exact integers, independent
// of the host FPU (no float arithmetic: the bit pattern is decomposed into sign, integer significand and exponent,
// rounded by integer shifts, and reassembled). The rules a conversion follows are a FloatBoundary (model/batchnorm.h):
// rounding (nearest even or toward zero), overflow (infinity or saturation), binary32 subnormal inputs (kept or
// flushed to +-0), NaN (payload kept and quieted, canonical, canonical without sign). Infinities stay infinities.
// binary16: 1 sign, 5 exponent, 10 fraction bits: largest finite 65504, smallest normal 2^-14, smallest subnormal
// 2^-24. bfloat16: binary32's upper half: 8 exponent bits, 7 fraction bits, binary32's range and subnormals.
#include <cstdint>

#include "fusediff/model/batchnorm.h"

namespace fusediff::reference {

uint16_t F32ToF16Bits(float x, const FloatBoundary& rules);
uint16_t F32ToBf16Bits(float x, const FloatBoundary& rules);
float F16BitsToF32(uint16_t bits);   // exact: every binary16 value is a binary32 value (a NaN is quieted)
float Bf16BitsToF32(uint16_t bits);  // exact: the bits become binary32's upper half

// x stored at a boundary of rules.format and read back as binary32: f32 returns x (subnormals flushed when the
// rules say so), f16 / bf16 convert there and back.
float RoundToFormat(float x, const FloatBoundary& rules);

// x stored in rules.format, as its ordered code (model/convention.h float_order_code): a float output's y.
int32_t FloatOutputCode(float x, const FloatBoundary& rules);

}  // namespace fusediff::reference

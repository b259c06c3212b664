#pragma once
// binary32 -> binary16 / bfloat16 as kernels convert: bit manipulation on the binary32 encoding with a round bit
// (binary16: the rebiased exponent and a 13-bit round field; bfloat16: u + 0x7FFF + lsb, then the upper half), the
// rules of a FloatBoundary (model/batchnorm.h). Independent of the reference's conversions (reference/float_formats.h),
// which the tests compare them with.
#include <cstdint>

#include "fusediff/model/batchnorm.h"

namespace fusediff::fused {

uint16_t ToF16Bits(float x, const FloatBoundary& rules);
// The mutant bn-f16-overflow-wraps: ToF16Bits without its overflow check (the rebiased exponent wraps).
uint16_t ToF16BitsWrappingOverflow(float x, const FloatBoundary& rules);
uint16_t ToBf16Bits(float x, const FloatBoundary& rules);
float FromF16Bits(uint16_t h);
float FromBf16Bits(uint16_t h);
// Stored in rules.format and read back (f32: x).
float StoreAs(float x, const FloatBoundary& rules);
// StoreAs with ToF16BitsWrappingOverflow for binary16 (the mutant bn-f16-overflow-wraps).
float StoreAsWrappingF16Overflow(float x, const FloatBoundary& rules);

}  // namespace fusediff::fused

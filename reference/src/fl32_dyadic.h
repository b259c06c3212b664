#pragma once
// binary32 sums and quotients decided on exact dyadic integers (value = +-magnitude * 2^exponent), without
// rationals: the per-element steps of the ORT stage rules (stages.cpp). Same results as Fl32Add / Fl32Divide
// (round to nearest, ties to even, subnormals, overflow to +-infinity), at integer speed.
#include <cstdint>

namespace fusediff::reference::detail {

// +-magnitude * 2^exponent, magnitude < 2^48: any finite float (magnitude < 2^24) or the exact product of two.
struct Dyadic {
  bool negative = false;
  uint64_t magnitude = 0;
  int exponent = 0;
};

Dyadic exact_dyadic(float value);               // value must be finite (InputError otherwise)
Dyadic exact_product(float a, float b);         // a * b exactly (finite inputs)
Dyadic negated(Dyadic d);

// fl32(x + y): the exact sum rounded once. An exact zero sum is +0 unless both addends are negative zeros.
float fl32_sum(const Dyadic& x, const Dyadic& y);
// fl32(a / b): the exact quotient rounded once; b must be non-zero (InputError).
float fl32_quotient(float a, float b);

}  // namespace fusediff::reference::detail

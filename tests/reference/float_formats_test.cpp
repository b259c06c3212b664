// binary16 / bfloat16 conversions of the reference (reference/float_formats.h): every binary32 bit pattern against
// the CPU's F16C vcvtps2ph (this file alone is compiled with -mf16c; the test skips where the CPU lacks F16C), the
// declared rules at their edges, and bfloat16 against an independent decision in binary64.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "fusediff/reference/float_formats.h"

namespace fusediff::reference {
namespace {

FloatBoundary Rules(FloatFormat f) { return FloatBoundary{f}; }  // rne, inf, keep subnormals, NaN payload

// Every one of the 2^32 binary32 patterns: the reference's f16 bits equal vcvtps2ph's (imm 0: nearest even, MXCSR
// not consulted; NaN payloads truncated and quieted, as quiet_payload declares). Two threads, each half the space.
TEST(FloatFormats, F16MatchesF16cOnEveryBinary32Pattern) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C (vcvtps2ph): nothing to compare with";
  const FloatBoundary rules = Rules(FloatFormat::f16);
  std::vector<uint64_t> mismatches(2, 0), first(2, UINT64_MAX);
  const auto work = [&](unsigned part) {
    for (uint64_t hi = part; hi < (uint64_t{1} << 16); hi += 2) {
      for (uint32_t lo = 0; lo < (1u << 16); lo += 4) {
        alignas(16) uint32_t bits[4];
        for (uint32_t j = 0; j < 4; ++j) bits[j] = static_cast<uint32_t>(hi << 16) | (lo + j);
        const __m128i h = _mm_cvtps_ph(_mm_load_ps(reinterpret_cast<const float*>(bits)), _MM_FROUND_TO_NEAREST_INT);
        alignas(16) uint16_t hw[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(hw), h);
        for (uint32_t j = 0; j < 4; ++j) {
          if (F32ToF16Bits(std::bit_cast<float>(bits[j]), rules) != hw[j]) {
            if (mismatches[part]++ == 0) first[part] = bits[j];
          }
        }
      }
    }
  };
  std::thread other(work, 1u);
  work(0u);
  other.join();
  EXPECT_EQ(mismatches[0] + mismatches[1], 0u) << "first mismatching binary32 pattern 0x" << std::hex
                                                 << std::min(first[0], first[1]);
}

TEST(FloatFormats, F16ToF32MatchesF16cOnEveryBinary16Pattern) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C (vcvtph2ps): nothing to compare with";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float hw = _cvtsh_ss(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(F16BitsToF32(static_cast<uint16_t>(h))), std::bit_cast<uint32_t>(hw)) << h;
  }
}

TEST(FloatFormats, F16OverflowAndSubnormalEdges) {
  FloatBoundary rne = Rules(FloatFormat::f16);
  EXPECT_EQ(F32ToF16Bits(65504.0f, rne), 0x7BFFu);
  EXPECT_EQ(F32ToF16Bits(65519.996f, rne), 0x7BFFu);  // below the midpoint 65520: rounds down to 65504
  EXPECT_EQ(F32ToF16Bits(65520.0f, rne), 0x7C00u);    // the midpoint: ties to even, which is 2^16 = infinity
  EXPECT_EQ(F32ToF16Bits(-1e9f, rne), 0xFC00u);
  FloatBoundary sat = rne;
  sat.overflow = FloatOverflow::saturate;
  EXPECT_EQ(F32ToF16Bits(65520.0f, sat), 0x7BFFu);
  EXPECT_EQ(F32ToF16Bits(-1e9f, sat), 0xFBFFu);
  EXPECT_EQ(F32ToF16Bits(std::numeric_limits<float>::infinity(), sat), 0x7C00u);  // infinity stays infinity
  EXPECT_EQ(F32ToF16Bits(0x1p-24f, rne), 0x0001u);              // the smallest subnormal
  EXPECT_EQ(F32ToF16Bits(0x1p-25f, rne), 0x0000u);              // half of it: a tie, to even 0
  EXPECT_EQ(F32ToF16Bits(std::nextafter(0x1p-25f, 1.0f), rne), 0x0001u);
  EXPECT_EQ(F32ToF16Bits(0x1.8p-24f, rne), 0x0002u);            // 1.5 quanta: tie to even 2
  EXPECT_EQ(F32ToF16Bits(0x1p-14f, rne), 0x0400u);              // the smallest normal
  FloatBoundary rtz = rne;
  rtz.rounding = FloatRounding::toward_zero;
  EXPECT_EQ(F32ToF16Bits(65535.0f, rtz), 0x7BFFu);  // toward zero never overflows to infinity
  EXPECT_EQ(F32ToF16Bits(1.0f + 0x1.ffp-11f, rtz), 0x3C00u);
  FloatBoundary flush = rne;
  flush.subnormals = SubnormalInputs::flush_inputs;
  EXPECT_EQ(F32ToF16Bits(-std::numeric_limits<float>::denorm_min(), flush), 0x8000u);
  EXPECT_EQ(RoundToFormat(std::numeric_limits<float>::denorm_min(), FloatBoundary{FloatFormat::f32, FloatRounding::nearest_even,
                                                                                  FloatOverflow::infinity, SubnormalInputs::flush_inputs}),
            0.0f);
}

TEST(FloatFormats, NanRules) {
  const float snan = std::bit_cast<float>(0xFF812345u);  // negative signalling NaN with a payload
  FloatBoundary r = Rules(FloatFormat::f16);
  EXPECT_EQ(F32ToF16Bits(snan, r), 0xFE00u | (0x012345u >> 13));
  r.nan = NanRule::canonical;
  EXPECT_EQ(F32ToF16Bits(snan, r), 0xFE00u);
  r.nan = NanRule::canonical_positive;
  EXPECT_EQ(F32ToF16Bits(snan, r), 0x7E00u);
  const FloatBoundary flushing = flush_subnormals_float_boundary(FloatFormat::bf16);
  EXPECT_EQ(F32ToBf16Bits(snan, flushing), 0xFFC1u);  // oneDNN: high half | 0x0040, sign kept
  EXPECT_EQ(F32ToBf16Bits(std::numeric_limits<float>::denorm_min(), flushing), 0x0000u);  // oneDNN flushes subnormals
  const FloatBoundary torch = pytorch_float_boundary(FloatFormat::bf16);
  EXPECT_EQ(F32ToBf16Bits(snan, torch), 0x7FC0u);  // c10::BFloat16: canonical, sign dropped
  EXPECT_EQ(F32ToBf16Bits(std::numeric_limits<float>::denorm_min(), torch), 0x0000u);  // rounds to 0 (tiny)
  EXPECT_EQ(F32ToBf16Bits(std::bit_cast<float>(0x00018000u), torch), 0x0002u);  // subnormal kept: 1.5 -> tie to even 2
}

// bfloat16 nearest even and toward zero against an independent rule: the two bf16 neighbours of x (truncation
// and the next one up) and the midpoint between them, all exact in binary64.
uint16_t Bf16ByBinary64(float x, bool nearest) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t down = static_cast<uint16_t>(bits >> 16);
  if (!nearest || (bits & 0xFFFFu) == 0) return down;
  const uint16_t up = static_cast<uint16_t>(down + 1);
  const double lo = double(Bf16BitsToF32(down));
  const double hi = ((up & 0x7F80u) == 0x7F80u) ? std::copysign(0x1p128, lo) : double(Bf16BitsToF32(up));
  const double mid = 0.5 * (lo + hi), v = double(x);
  const double d = std::abs(v) - std::abs(mid);
  if (d > 0) return up;
  if (d < 0) return down;
  return (down & 1u) ? up : down;
}

TEST(FloatFormats, Bf16AgainstBinary64Decision) {
  std::mt19937_64 rng(13);
  FloatBoundary rne = Rules(FloatFormat::bf16), rtz = rne;
  rtz.rounding = FloatRounding::toward_zero;
  std::vector<uint32_t> patterns = {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x7F7F7FFFu, 0x7F7F8000u, 0x00008000u,
                                    0x00018000u, 0x807F8000u, 0x3F80FFFFu};
  for (int i = 0; i < 1 << 22; ++i) patterns.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t b : patterns) {
    const float x = std::bit_cast<float>(b);
    if (std::isnan(x) || std::isinf(x)) continue;
    ASSERT_EQ(F32ToBf16Bits(x, rne), Bf16ByBinary64(x, true)) << std::hex << b;
    ASSERT_EQ(F32ToBf16Bits(x, rtz), Bf16ByBinary64(x, false)) << std::hex << b;
  }
  FloatBoundary sat = rne;
  sat.overflow = FloatOverflow::saturate;
  EXPECT_EQ(F32ToBf16Bits(std::numeric_limits<float>::max(), rne), 0x7F80u);
  EXPECT_EQ(F32ToBf16Bits(std::numeric_limits<float>::max(), sat), 0x7F7Fu);
}

}  // namespace
}  // namespace fusediff::reference

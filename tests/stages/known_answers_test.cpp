// Hand-worked results of every add and average-pool rule, reference and fused side by side, and the inputs each
// rule refuses. The worked arithmetic is in the comments; cases found by search say so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "fusediff/fused/stages.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/stages.h"

namespace fusediff {
namespace {

constexpr QuantType kInt8{ScalarType::int8, false};
constexpr QuantType kUint8{ScalarType::uint8, false};
constexpr QuantType kInt16{ScalarType::int16, false};

QuantParams Q(QuantType t, float scale, int32_t zero_point) { return QuantParams{t, scale, zero_point}; }

// The reference's result, after checking that the fused kernel gives the same code.
reference::StageRounding Add(AddRule rule, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                             const QuantParams& qo) {
  const reference::StageRounding r = reference::QuantizedAdd(rule, a, qa, b, qb, qo);
  EXPECT_EQ(fused::QuantizedAddKernel(rule, qa, qb, qo)(a, b), r.code)
      << "rule " << static_cast<int>(rule) << " a=" << a << " b=" << b;
  return r;
}

reference::StageRounding Pool(AvgPoolRule rule, const std::vector<int32_t>& taps, const QuantParams& qi,
                              const QuantParams& qo) {
  const reference::StageRounding r = reference::AveragePool(rule, taps, qi, qo);
  EXPECT_EQ(fused::AveragePoolKernel(rule, qi, qo)(taps), r.code) << "rule " << static_cast<int>(rule);
  return r;
}

// ---- average pool

// zp = 10, codes {0, 1}: TFLite sums raw codes, (1 + 1) / 2 = 1. In the real domain the mean is -9.5 s; rounding
// that half away from zero gives -10 s, code 0. ORT's float mean rounds half to even: 0.5 -> 0, code 0.
TEST(StagePool, TfliteRoundsAwayFromCodeZeroNotFromTheZeroPoint) {
  const QuantParams q = Q(kInt8, 0.25f, 10);
  const reference::StageRounding t = Pool(AvgPoolRule::tflite, {0, 1}, q, q);
  EXPECT_EQ(t.code, 1);
  EXPECT_EQ(t.tie_distance, 0.0);
  EXPECT_FALSE(t.saturated);
  EXPECT_EQ(Pool(AvgPoolRule::ort_qlinear, {0, 1}, q, q).code, 0);
  EXPECT_EQ(Pool(AvgPoolRule::ort_global, {0, 1}, q, q).code, 0);
  // Negative sums: (-3 - 1) / 2 = -2 (C truncation), i.e. -1.5 away from zero.
  EXPECT_EQ(Pool(AvgPoolRule::tflite, {-1, -2}, q, q).code, -2);
  // Odd n has no tie: (1 + 1 + 2 + 1) / 3 = 1 (4/3), (5 + 1) / 3 = 2 (5/3).
  EXPECT_EQ(Pool(AvgPoolRule::tflite, {1, 1, 2}, q, q).code, 1);
  EXPECT_EQ(Pool(AvgPoolRule::tflite, {1, 2, 2}, q, q).code, 2);
  EXPECT_NEAR(Pool(AvgPoolRule::tflite, {1, 2, 2}, q, q).tie_distance, 1.0 / 6.0, 1e-15);
  // int16 uses the same expression.
  const QuantParams q16 = Q(kInt16, 1.0f / 4096, 0);
  EXPECT_EQ(Pool(AvgPoolRule::tflite, {-32768, -32767}, q16, q16).code, -32768);
}

// The injected bug: sum / n truncated. {0, 1} -> 0 and {-1, -2} -> -1 where TFLite gives 1 and -2.
TEST(StagePool, TruncatingMutant) {
  const std::vector<int32_t> up{0, 1}, down{-1, -2};
  EXPECT_EQ(fused::AveragePoolTruncating(up), 0);
  EXPECT_EQ(fused::AveragePoolTruncating(down), -1);
  EXPECT_THROW(fused::AveragePoolTruncating(std::vector<int32_t>{}), InputError);
}

// Found by search (uint8, s = 0.1, zp = 0, the same quantization in and out), exact mean 15.5:
//   ort_global: acc = 31, M = fl32(0.1f / fl32(0.1f * 2)) = 0.5 exactly, f = 15.5 -> half to even: 16;
//   ort_qlinear: fl32(0.1f * 16) + fl32(0.1f * 15), / 2, / 0.1f -> 15.4999990, below the tie: 15.
TEST(StagePool, GlobalAndQlinearDisagreeOnOneWindow) {
  const QuantParams q = Q(kUint8, 0.1f, 0);
  const reference::StageRounding global = Pool(AvgPoolRule::ort_global, {16, 15}, q, q);
  const reference::StageRounding qlinear = Pool(AvgPoolRule::ort_qlinear, {16, 15}, q, q);
  EXPECT_EQ(global.code, 16);
  EXPECT_EQ(global.tie_distance, 0.0);
  EXPECT_EQ(qlinear.code, 15);
  EXPECT_GT(qlinear.tie_distance, 0.0);
  EXPECT_LT(qlinear.tie_distance, 1e-5);
  EXPECT_EQ(Pool(AvgPoolRule::tflite, {16, 15}, q, q).code, 16);  // (31 + 1) / 2
}

// ort_global clamps in float before it converts: a mean far above the range gives qmax, saturated.
TEST(StagePool, OrtSaturates) {
  const QuantParams qi = Q(kInt8, 1.0f, 0), qo = Q(kInt8, 0.25f, 0);
  const reference::StageRounding g = Pool(AvgPoolRule::ort_global, {100, 100}, qi, qo);  // 100 / 0.25 = 400
  EXPECT_EQ(g.code, 127);
  EXPECT_EQ(g.unsaturated, 400);
  EXPECT_TRUE(g.saturated);
  const reference::StageRounding q = Pool(AvgPoolRule::ort_qlinear, {-100, -100}, qi, qo);
  EXPECT_EQ(q.code, -128);
  EXPECT_EQ(q.unsaturated, -400);
  EXPECT_TRUE(q.saturated);
}

// ---- add

// sa = sb = 0.5, so = 1, zero points 0 (int8). TFLite: Ma = Mb = 0.5/1 -> (2^30, 0), Mo = 1 / 2^20 -> (2^30, -19).
// a = 1: x = 2^20, SRDHM(2^20, 2^30) = 2^19, sum 2^19, SRDHM -> 2^18, RDBPOT(2^18, 19) = round(0.5) = 1 (away).
// The exact value 0.5 rounds half to even to 0, and so does MLAS's y = 0.5.
TEST(StageAdd, TfliteTieAwayFromZero) {
  const QuantParams h = Q(kInt8, 0.5f, 0), one = Q(kInt8, 1.0f, 0);
  EXPECT_EQ(Add(AddRule::tflite, 1, h, 0, h, one).code, 1);
  EXPECT_EQ(Add(AddRule::tflite, 1, h, 0, h, one).tie_distance, 0.0);
  EXPECT_EQ(Add(AddRule::tflite, -1, h, 0, h, one).code, -1);
  EXPECT_EQ(Add(AddRule::tflite, 3, h, 0, h, one).code, 2);  // 1.5 -> 2 either way
  for (const AddRule r : {AddRule::onnx_spec, AddRule::ort_mlas, AddRule::ort_mlas_fma, AddRule::ort_raw}) {
    EXPECT_EQ(Add(r, 1, h, 0, h, one).code, 0);
    EXPECT_EQ(Add(r, -1, h, 0, h, one).code, 0);
    EXPECT_EQ(Add(r, 3, h, 0, h, one).code, 2);
  }
  EXPECT_EQ(Add(AddRule::onnx_spec, 1, h, 0, h, one).tie_distance, 0.0);
  // int16 takes left shift 15 and rounds the same way.
  const QuantParams h16 = Q(kInt16, 0.5f, 0), one16 = Q(kInt16, 1.0f, 0);
  EXPECT_EQ(Add(AddRule::tflite, 1, h16, 0, h16, one16).code, 1);
  EXPECT_EQ(Add(AddRule::tflite, -32767, h16, 0, h16, one16).code, -16384);  // -16383.5 away from zero
}

// Found by search (int8): sa = 0x1.94340ep-5, za = -93; sb = 0x1.c40b1ep-8, zb = 50; so = 0x1.00e242p-8, zo = 82;
// a = -97, b = 9. The exact sum (zero point included) is -40.500076: code -41. MLAS's k = 1164.69 cancels
// a ra = -1221.03, which magnifies the roundings: SSE2's separate steps give y = -40.500050 (-41), AVX2's two
// FMAs y = -40.499973 (-40).
TEST(StageAdd, FmaAndSeparateStepsDisagree) {
  const QuantParams qa = Q(kInt8, 0x1.94340ep-5f, -93), qb = Q(kInt8, 0x1.c40b1ep-8f, 50),
                    qo = Q(kInt8, 0x1.00e242p-8f, 82);
  EXPECT_EQ(Add(AddRule::ort_mlas, -97, qa, 9, qb, qo).code, -41);
  EXPECT_EQ(Add(AddRule::ort_mlas_fma, -97, qa, 9, qb, qo).code, -40);
  EXPECT_EQ(Add(AddRule::onnx_spec, -97, qa, 9, qb, qo).code, -41);
  EXPECT_EQ(Add(AddRule::ort_raw, -97, qa, 9, qb, qo).code, -41);
  EXPECT_LT(Add(AddRule::ort_mlas_fma, -97, qa, 9, qb, qo).tie_distance, 1e-4);
}

// 0.05 + 0.05 -> 0.1 (int8, zero points 0), a = 0, b = 13: exactly 6.5 (0.1f is exactly 2 * 0.05f).
// onnx_spec: half to even, 6. MLAS: rb = 0.5 exactly, y = 6.5, 6. ort_raw: fl32(0.05f * 13) = 0.65000004, / 0.1f
// = 6.5000005 -> 7. TFLite: the tie goes away from zero, 7.
TEST(StageAdd, RawHelperRoundsTwice) {
  const QuantParams h = Q(kInt8, 0.05f, 0), o = Q(kInt8, 0.1f, 0);
  EXPECT_EQ(Add(AddRule::onnx_spec, 0, h, 13, h, o).code, 6);
  EXPECT_EQ(Add(AddRule::ort_mlas, 0, h, 13, h, o).code, 6);
  EXPECT_EQ(Add(AddRule::ort_mlas_fma, 0, h, 13, h, o).code, 6);
  EXPECT_EQ(Add(AddRule::ort_raw, 0, h, 13, h, o).code, 7);
  EXPECT_EQ(Add(AddRule::tflite, 0, h, 13, h, o).code, 7);
  // int16: MlasQLinearAdd<int16_t> runs the raw helper under every ORT rule.
  const QuantParams h16 = Q(kInt16, 0.05f, 0), o16 = Q(kInt16, 0.1f, 0);
  EXPECT_EQ(Add(AddRule::ort_mlas, 0, h16, 13, h16, o16).code, 7);
  EXPECT_EQ(Add(AddRule::ort_mlas_fma, 0, h16, 13, h16, o16).code, 7);
  EXPECT_EQ(Add(AddRule::onnx_spec, 0, h16, 13, h16, o16).code, 6);
}

// ra = 2^20 / 2^-5 = 2^25, a = 127: y = 127 2^25 >= 2^31. cvtps2dq returns the integer indefinite 0x80000000,
// which the saturating packs turn into -128; the raw helper clamps v in float first and gives 127.
TEST(StageAdd, RawClampVersusIndefiniteInteger) {
  const QuantParams big = Q(kInt8, 0x1p20f, 0), small = Q(kInt8, 0x1p-5f, 0);
  for (const AddRule r : {AddRule::ort_mlas, AddRule::ort_mlas_fma}) {
    const reference::StageRounding m = Add(r, 127, big, 0, big, small);
    EXPECT_EQ(m.code, -128);
    EXPECT_EQ(m.unsaturated, int64_t{127} << 25);
    EXPECT_TRUE(m.saturated);
  }
  const reference::StageRounding raw = Add(AddRule::ort_raw, 127, big, 0, big, small);
  EXPECT_EQ(raw.code, 127);
  EXPECT_TRUE(raw.saturated);
  EXPECT_EQ(Add(AddRule::ort_raw, -128, big, 0, big, small).code, -128);
  EXPECT_EQ(Add(AddRule::onnx_spec, 127, big, 0, big, small).code, 127);
  // The raw helper's clamp bounds are relative to the zero point: [-128 - 100, 127 - 100], then + 100.
  const QuantParams o = Q(kInt8, 1.0f, 100), one = Q(kInt8, 1.0f, 0);
  EXPECT_EQ(Add(AddRule::ort_raw, 20, one, 10, one, o).code, 127);  // 30 + 100 saturates
  EXPECT_EQ(Add(AddRule::ort_raw, -120, one, -120, one, o).code, -128);
  EXPECT_EQ(Add(AddRule::ort_raw, 20, one, 5, one, o).code, 125);
}

TEST(StageFl32, FusedMultiplyAddRoundsOnce) {
  const float x = 1.0f + 0x1p-23f;
  // (1 + 2^-23)^2 - 1 = 2^-22 + 2^-46 exactly; the separate product rounds to 1 + 2^-22 first.
  EXPECT_EQ(reference::Fl32FusedMultiplyAdd(x, x, -1.0f), 0x1p-22f + 0x1p-46f);
  EXPECT_EQ(reference::Fl32FusedMultiplyAdd(2.0f, 3.0f, 1.0f), 7.0f);
  EXPECT_THROW(reference::Fl32FusedMultiplyAdd(INFINITY, 1.0f, 0.0f), InputError);
}

// ---- refusals: reference and fused refuse the same inputs.

template <typename F>
void ExpectBothRefuse(F&& reference_call, AddRule rule, const QuantParams& qa, const QuantParams& qb,
                      const QuantParams& qo) {
  EXPECT_THROW(reference_call(), InputError);
  EXPECT_THROW(fused::QuantizedAddKernel(rule, qa, qb, qo), InputError);
}

TEST(StageRefusals, TfliteAddOutputMultiplierAtLeastOne) {
  // 2 max(sa, sb) / (2^20 so) = 2 / (2^20 2^-20) = 2; so = 2^-19 gives exactly 1, still refused (must be < 1).
  for (const float so : {0x1p-20f, 0x1p-19f}) {
    const QuantParams one = Q(kInt8, 1.0f, 0), qo = Q(kInt8, so, 0);
    ExpectBothRefuse([&] { return reference::QuantizedAdd(AddRule::tflite, 0, one, 0, one, qo); }, AddRule::tflite,
                     one, one, qo);
  }
  // Just below 1: accepted.
  const QuantParams one = Q(kInt8, 1.0f, 0), qo = Q(kInt8, 0x1.000002p-19f, 0);
  EXPECT_NO_THROW(Add(AddRule::tflite, 1, one, 1, one, qo));
}

TEST(StageRefusals, TypesMustMatchWhereTheRuleSaysSo) {
  const QuantParams i8 = Q(kInt8, 0.1f, 0), u8 = Q(kUint8, 0.1f, 128);
  for (const AddRule r : {AddRule::tflite, AddRule::ort_mlas, AddRule::ort_mlas_fma, AddRule::ort_raw}) {
    ExpectBothRefuse([&] { return reference::QuantizedAdd(r, 0, i8, 128, u8, i8); }, r, i8, u8, i8);
  }
  // onnx_spec is defined for any types.
  EXPECT_EQ(Add(AddRule::onnx_spec, 10, i8, 138, u8, Q(kInt16, 0.01f, 0)).code, 200);
}

TEST(StageRefusals, OrtScaleDomain) {
  const QuantParams ok = Q(kInt8, 0.1f, 0), huge = Q(kInt8, 0x1p41f, 0);
  for (const AddRule r : {AddRule::ort_mlas, AddRule::ort_mlas_fma, AddRule::ort_raw}) {
    ExpectBothRefuse([&] { return reference::QuantizedAdd(r, 0, huge, 0, ok, ok); }, r, huge, ok, ok);
  }
  // onnx_spec: the reference is exact at any scale; the fused integer kernel refuses spans beyond 2^80.
  const QuantParams tiny = Q(kInt8, 0x1p-100f, 0), vast = Q(kInt8, 0x1p100f, 0);
  EXPECT_EQ(reference::QuantizedAdd(AddRule::onnx_spec, 1, vast, 0, vast, tiny).code, 127);
  EXPECT_THROW(fused::QuantizedAddKernel(AddRule::onnx_spec, vast, vast, tiny), InputError);
}

TEST(StageRefusals, CodesOutsideTheirType) {
  const QuantParams q = Q(kInt8, 0.1f, 0);
  EXPECT_THROW(reference::QuantizedAdd(AddRule::onnx_spec, 128, q, 0, q, q), InputError);
  EXPECT_THROW(fused::QuantizedAddKernel(AddRule::onnx_spec, q, q, q)(0, -129), InputError);
  EXPECT_THROW(reference::AveragePool(AvgPoolRule::tflite, std::vector<int32_t>{0, 200}, q, q), InputError);
  EXPECT_THROW(fused::AveragePoolKernel(AvgPoolRule::tflite, q, q)(std::vector<int32_t>{0, 200}), InputError);
  EXPECT_THROW(reference::AveragePool(AvgPoolRule::tflite, std::vector<int32_t>{}, q, q), InputError);
  EXPECT_THROW(fused::AveragePoolKernel(AvgPoolRule::tflite, q, q)(std::vector<int32_t>{}), InputError);
  EXPECT_THROW(reference::QuantizedAdd(AddRule::tflite, 0, Q(kInt8, -1.0f, 0), 0, q, q), InputError);
}

TEST(StageRefusals, TflitePoolNeedsEqualQuantization) {
  const QuantParams q = Q(kInt8, 0.1f, 3);
  const std::vector<int32_t> taps{1, 2};
  for (const QuantParams& other : {Q(kInt8, 0.2f, 3), Q(kInt8, 0.1f, 4), Q(kUint8, 0.1f, 3)}) {
    EXPECT_THROW(reference::AveragePool(AvgPoolRule::tflite, taps, q, other), InputError);
    EXPECT_THROW(fused::AveragePoolKernel(AvgPoolRule::tflite, q, other), InputError);
  }
}

TEST(StageRefusals, OrtPoolDomain) {
  const QuantParams q16 = Q(kInt16, 0.001f, 0), q8 = Q(kInt8, 0.1f, 0);
  const std::vector<int32_t> taps{1, 2};
  for (const AvgPoolRule r : {AvgPoolRule::ort_qlinear, AvgPoolRule::ort_global}) {
    EXPECT_THROW(reference::AveragePool(r, taps, q16, q16), InputError);
    EXPECT_THROW(fused::AveragePoolKernel(r, q16, q16), InputError);
    EXPECT_THROW(reference::AveragePool(r, taps, q8, Q(kUint8, 0.1f, 0)), InputError);
    EXPECT_THROW(fused::AveragePoolKernel(r, q8, Q(kUint8, 0.1f, 0)), InputError);
  }
  // ORT's global kernel refuses M = sx / (so n) outside [2^-32, 256): 1000 / (1 * 2) = 500.
  const QuantParams big = Q(kInt8, 1000.0f, 0), one = Q(kInt8, 1.0f, 0);
  EXPECT_THROW(reference::AveragePool(AvgPoolRule::ort_global, taps, big, one), InputError);
  const fused::AveragePoolKernel global(AvgPoolRule::ort_global, big, one);
  EXPECT_THROW(global(taps), InputError);
  EXPECT_EQ(Pool(AvgPoolRule::ort_qlinear, taps, big, one).code, 127);  // the per-tap kernel has no such check
}

}  // namespace
}  // namespace fusediff

// The fused stage kernels against the exact reference, rule by rule: random quantizations (scales log-uniform
// over realistic ranges, or small binary fractions that make exact ties common; zero points across the type) and
// random codes, plus every code pair of a few fixed int8 quantizations. Reference and fused must give the same
// code and refuse the same inputs.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/fused/stages.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/stages.h"

namespace fusediff {
namespace {

constexpr AddRule kAddRules[] = {AddRule::tflite,  AddRule::onnx_spec, AddRule::ort_mlas, AddRule::ort_mlas_fma,
                                 AddRule::ort_raw, AddRule::binary32_unfused};

rc::Gen<QuantType> AnyType(bool with_int16) {
  std::vector<QuantType> types{{ScalarType::int8, false}, {ScalarType::uint8, false}, {ScalarType::int8, true}};
  if (with_int16) types.push_back({ScalarType::int16, false});
  return rc::gen::elementOf(types);
}

// Mostly log-uniform in [2^-14, 2^3]; one draw in four a small binary fraction k 2^-j (k <= 16), whose ratios
// and sums are often exact, so that rounding ties are common.
rc::Gen<float> Scale() {
  return rc::gen::weightedOneOf<float>(
      {{3, rc::gen::map(rc::gen::inRange(-1400, 300), [](int e) { return static_cast<float>(std::exp2(e / 100.0)); })},
       {1, rc::gen::map(rc::gen::pair(rc::gen::inRange(1, 17), rc::gen::inRange(0, 13)),
                        [](const std::pair<int, int>& p) { return std::ldexp(static_cast<float>(p.first), -p.second); })}});
}

QuantParams Quant(const QuantType& t) {
  return QuantParams{t, *Scale(), *rc::gen::inRange(t.qmin(), t.qmax() + 1)};
}

int32_t Code(const QuantType& t) { return *rc::gen::inRange(t.qmin(), t.qmax() + 1); }

void CheckInvariants(const reference::StageRounding& r, const QuantParams& qo) {
  RC_ASSERT(qo.type.contains(r.code));
  RC_ASSERT(r.saturated == (r.code != r.unsaturated));
  RC_ASSERT(r.tie_distance >= 0.0);
  RC_ASSERT(r.tie_distance <= 0.5);
}

std::string Describe(AddRule rule, const QuantParams& qa, const QuantParams& qb, const QuantParams& qo) {
  auto q = [](const QuantParams& p) {
    return to_string(p.type) + ":" + format_float32(p.scale) + ":" + std::to_string(p.zero_point);
  };
  return "rule " + std::to_string(static_cast<int>(rule)) + " a " + q(qa) + " b " + q(qb) + " out " + q(qo);
}

RC_GTEST_PROP(StageCrossCheck, AddMatchesReference, ()) {
  const AddRule rule = *rc::gen::elementOf(std::vector<AddRule>(std::begin(kAddRules), std::end(kAddRules)));
  // TFLite and MLAS take one scalar type for a, b and the output; the specification takes any.
  const QuantType t = *AnyType(true);
  const bool one_type = rule != AddRule::onnx_spec;
  const QuantParams qa = Quant(t);
  const QuantParams qb = Quant(one_type ? QuantType{t.scalar, *rc::gen::arbitrary<bool>() && t.scalar == ScalarType::int8} : *AnyType(true));
  const QuantParams qo = Quant(one_type ? QuantType{t.scalar, false} : *AnyType(true));
  RC_LOG() << Describe(rule, qa, qb, qo) << "\n";
  std::optional<fused::QuantizedAddKernel> kernel;
  try {
    kernel.emplace(rule, qa, qb, qo);
  } catch (const InputError&) {
  }
  RC_CLASSIFY(!kernel, "refused");
  for (int i = 0; i < 256; ++i) {
    const int32_t a = Code(qa.type), b = Code(qb.type);
    if (!kernel) {
      RC_ASSERT_THROWS_AS(reference::QuantizedAdd(rule, a, qa, b, qb, qo), InputError);
      continue;
    }
    const reference::StageRounding r = reference::QuantizedAdd(rule, a, qa, b, qb, qo);
    CheckInvariants(r, qo);
    RC_ASSERT((*kernel)(a, b) == r.code);
  }
}

rc::Gen<std::vector<int32_t>> Window(const QuantType& t) {
  return rc::gen::container<std::vector<int32_t>>(static_cast<std::size_t>(*rc::gen::inRange(1, 17)),
                                                  rc::gen::inRange(t.qmin(), t.qmax() + 1));
}

RC_GTEST_PROP(StageCrossCheck, PoolMatchesReference, ()) {
  const AvgPoolRule rule =
      *rc::gen::element(AvgPoolRule::tflite, AvgPoolRule::ort_qlinear, AvgPoolRule::ort_global);
  // TFLite needs equal quantization; ORT takes 8-bit input and output of one scalar type, often equal too.
  const QuantType t = *AnyType(rule == AvgPoolRule::tflite);
  const QuantParams qi = Quant(t);
  const QuantParams qo = (rule == AvgPoolRule::tflite || *rc::gen::arbitrary<bool>()) ? qi : Quant(t);
  RC_LOG() << "rule " << static_cast<int>(rule) << " in " << to_string(qi.type) << ":" << format_float32(qi.scale)
           << ":" << qi.zero_point << " out " << format_float32(qo.scale) << ":" << qo.zero_point << "\n";
  const fused::AveragePoolKernel kernel(rule, qi, qo);
  for (int i = 0; i < 64; ++i) {
    const std::vector<int32_t> taps = *Window(qi.type);
    std::optional<int32_t> code;
    try {
      code = kernel(taps);
    } catch (const InputError&) {  // ort_global's multiplier depends on n
    }
    if (!code) {
      RC_ASSERT_THROWS_AS(reference::AveragePool(rule, taps, qi, qo), InputError);
      continue;
    }
    const reference::StageRounding r = reference::AveragePool(rule, taps, qi, qo);
    CheckInvariants(r, qo);
    RC_ASSERT(*code == r.code);
  }
}

// Every int8 code pair, each rule, four fixed quantizations; also the count of pairs where a rule's code differs
// from the exact specification's, measured once and pinned.
TEST(StageCrossCheck, ExhaustiveInt8Pairs) {
  const QuantType i8{ScalarType::int8, false};
  struct Case {
    QuantParams a, b, o;
    int64_t differs_from_spec[6];  // per kAddRules entry
  };
  const Case cases[] = {
      // 0.05 + 0.05 -> 0.1: every half-integer sum is an exact tie.
      {{i8, 0.05f, 0}, {i8, 0.05f, 0}, {i8, 0.1f, 0}, {16512, 0, 0, 0, 6444, 5270}},
      {{i8, 0.0235f, -3}, {i8, 0.0412f, 7}, {i8, 0.0517f, -11}, {0, 0, 0, 0, 0, 0}},
      {{i8, 0.1f, 5}, {i8, 0.3f, -20}, {i8, 0.7f, 3}, {0, 0, 0, 0, 0, 0}},
      // Binary fractions throughout: v = 2 (a + 128) + (b - 17) / 2, so every odd b - 17 is an exact tie. MLAS and
      // the raw helper round v + zo (zo = 1 is inside k), the specification rounds v and adds zo: the ties part.
      {{i8, 0.125f, -128}, {i8, 0.03125f, 17}, {i8, 0.0625f, 1}, {4357, 0, 8704, 8704, 8704, 8704}},
  };
  for (const Case& c : cases) {
    std::vector<int32_t> spec;
    for (int32_t a = -128; a <= 127; ++a) {
      for (int32_t b = -128; b <= 127; ++b) spec.push_back(reference::QuantizedAdd(AddRule::onnx_spec, a, c.a, b, c.b, c.o).code);
    }
    for (size_t k = 0; k < std::size(kAddRules); ++k) {
      const AddRule rule = kAddRules[k];
      const fused::QuantizedAddKernel kernel(rule, c.a, c.b, c.o);
      int64_t mismatches = 0, differs = 0;
      size_t index = 0;
      for (int32_t a = -128; a <= 127; ++a) {
        for (int32_t b = -128; b <= 127; ++b, ++index) {
          const int32_t code = reference::QuantizedAdd(rule, a, c.a, b, c.b, c.o).code;
          mismatches += kernel(a, b) != code;
          differs += code != spec[index];
        }
      }
      EXPECT_EQ(mismatches, 0) << Describe(rule, c.a, c.b, c.o);
      EXPECT_EQ(differs, c.differs_from_spec[k]) << Describe(rule, c.a, c.b, c.o);
    }
  }
}

}  // namespace
}  // namespace fusediff

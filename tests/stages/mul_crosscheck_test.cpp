// The fused mul kernel (fused/src/stages/mul.cpp) against the exact reference (reference/stages.h QuantizedMul),
// both rules: every int8 code pair of a few quantizations (dyadic ones with exact ties, TFLite's left shift, zero
// points at both ends), random quantizations, both operand shapes; and the mutant mul-ignores-input-zero-point
// differs from it exactly where zb != 0 moves the product.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/stages.h"

namespace fusediff {
namespace {

QuantParams Int8(float scale, int32_t zero_point) { return QuantParams{QuantType{ScalarType::int8}, scale, zero_point}; }

// The fused kernel on one element (the tensor form) under `mutant`.
int32_t FusedMul(const Stage& s, const QuantParams& in, int32_t a, int32_t b, Mutant mutant = Mutant::none) {
  CaseSpec spec;
  spec.mutant = mutant;
  std::string why;
  const std::unique_ptr<fused::StageKernel> kernel = fused::find_fused_stage(StageKind::mul)->Create(spec, s, in, &why);
  fused::StageTensor t{PatternGeometry{1, 1, 1, 1}, {a}};
  StageOperands o;
  o.codes = {b};
  kernel->Run(o, t);
  return t.codes[0];
}

Stage Mul(MulRule rule, const QuantParams& b, const QuantParams& o) {
  Stage s;
  s.kind = StageKind::mul;
  s.mul_rule = rule;
  s.mul_input = b;
  s.out = o;
  return s;
}

TEST(MulCrossCheck, EveryInt8PairOfFixedQuantizations) {
  struct Q {
    QuantParams a, b, o;
  };
  const std::vector<Q> qs = {
      {Int8(0.5f, 0), Int8(0.25f, 0), Int8(1.0f, 0)},              // M = 2^-3: exact ties
      {Int8(0.0625f, -3), Int8(0x1p-6f, 5), Int8(0x1p-3f, 7)},     // ties with zero points
      {Int8(1.0f, 0), Int8(1.0f, 2), Int8(0.25f, -1)},             // M = 4: TFLite's left shift
      {Int8(0.0417f, -128), Int8(0.0123f, 127), Int8(0.0811f, 3)},  // no structure
  };
  for (const Q& q : qs) {
    for (MulRule rule : {MulRule::tflite, MulRule::onnx_spec}) {
      const Stage s = Mul(rule, q.b, q.o);
      for (int32_t a = -128; a <= 127; ++a) {
        for (int32_t b = -128; b <= 127; ++b) {
          const int32_t want = reference::QuantizedMul(rule, a, q.a, b, q.b, q.o).code;
          ASSERT_EQ(FusedMul(s, q.a, a, b), want) << to_string(rule) << " a=" << a << " b=" << b;
        }
      }
    }
  }
}

RC_GTEST_PROP(MulCrossCheck, RandomQuantizationsAndCodes, ()) {
  const auto quant = [] {
    const float scale = static_cast<float>(std::exp2(*rc::gen::inRange(-1200, 100) / 100.0));
    return Int8(scale, *rc::gen::inRange(-128, 128));
  };
  const QuantParams qa = quant(), qb = quant(), qo = quant();
  const MulRule rule = *rc::gen::element(MulRule::tflite, MulRule::onnx_spec);
  const double m = double(qa.scale) * qb.scale / qo.scale;
  RC_PRE(m < 0x1p13);  // TFLite's int32 bound (model validation), with margin for the binary32 product
  const Stage s = Mul(rule, qb, qo);
  for (int i = 0; i < 64; ++i) {
    const int32_t a = *rc::gen::inRange(-128, 128), b = *rc::gen::inRange(-128, 128);
    RC_ASSERT(FusedMul(s, qa, a, b) == reference::QuantizedMul(rule, a, qa, b, qb, qo).code);
  }
}

TEST(MulCrossCheck, PerChannelInputIsOneCodePerChannel) {
  Stage s = Mul(MulRule::onnx_spec, Int8(0.5f, 0), Int8(1.0f, 0));
  s.mul_operand = MulOperand::per_channel;
  std::string why;
  const auto kernel = fused::find_fused_stage(StageKind::mul)->Create(CaseSpec{}, s, Int8(1.0f, 0), &why);
  fused::StageTensor t{PatternGeometry{1, 1, 2, 2}, {3, 3, 4, 4}};  // (x, k): channel 0 reads b = 2, channel 1 b = -4
  StageOperands o;
  o.codes = {2, -4};
  kernel->Run(o, t);
  EXPECT_EQ(t.codes, (std::vector<int32_t>{3, -6, 4, -8}));
  o.codes = {2, -4, 1, 1};  // a tensor where one code per channel is declared
  EXPECT_THROW(kernel->Run(o, t), InputError);
}

TEST(MulCrossCheck, IgnoringTheSecondInputsZeroPointMovesTheProduct) {
  const Stage s = Mul(MulRule::tflite, Int8(0.25f, 4), Int8(1.0f, 0));
  // M = 1/8: (6 - 0)(8 - 4) / 8 = 3 declared; the mutant reads 6 * 8 / 8 = 6.
  EXPECT_EQ(FusedMul(s, Int8(0.5f, 0), 6, 8), 3);
  EXPECT_EQ(FusedMul(s, Int8(0.5f, 0), 6, 8, Mutant::mul_ignores_input_zero_point), 6);
}

}  // namespace
}  // namespace fusediff

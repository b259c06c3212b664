// Properties over RapidCheck-generated cases (Conv2D and ConvTranspose2D), shrinking to minimal counterexamples:
// the fused path's int32 conv (zero-point folding / scatter) equals the reference's int64 conv, and the driver's
// targeting lands where it aims.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/generators/rc_generators.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff {
namespace {

Convention SimpleConvention() {
  Convention c;
  c.requant = RequantVariant::exact;
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.05f, 0};
  c.output.q = QuantParams{QuantType{ScalarType::int8}, 0.05f, 0};
  c.activation = make_activation(ActivationKind::relu);
  return c;
}

RC_GTEST_PROP(GeneratedCases, FusedAccumulatorsEqualReferenceForBothOps, ()) {
  const generators::ConvSample s = *generators::genConvSample();
  RC_PRE(s.conv.output_elements() > 0 && s.conv.output_elements() <= 20000);
  try {
    s.conv.validate();
  } catch (const InputError&) {
    RC_DISCARD("invalid shape");
  }
  RC_CLASSIFY(s.conv.op() == ConvOp::conv_transpose2d, "transposed");
  RC_CLASSIFY(s.conv.output_padding_height() + s.conv.output_padding_width() > 0, "output padding");
  RC_CLASSIFY(s.conv.dilation_height() * s.conv.dilation_width() > 1, "dilated");
  RC_TAG(s.conv.input_quant().type.scalar == ScalarType::uint8 ? "uint8 input" : "int8 input");
  std::string why;
  auto kernel = fused::FusedKernel::Create(SimpleConvention(), TableKind::lut, Mutant::none, &why);
  RC_ASSERT(kernel != nullptr);
  std::vector<int32_t> y(s.conv.output_elements()), acc(s.conv.output_elements());
  kernel->Run(s.conv, s.input, y, acc);
  const std::vector<int64_t> expected = reference::Conv2DAccumulators(s.conv, s.input);
  for (size_t i = 0; i < expected.size(); ++i) RC_ASSERT(int64_t{acc[i]} == expected[i]);
}

RC_GTEST_PROP(GeneratedConventions, AreValid, ()) {
  const Convention c = *generators::genConvention();
  RC_TAG(to_string(c.requant));
  validate(c);  // throws (fails) when invalid
}

TEST(Targeting, KneeAimedPivotsLandOnKneeCodes) {
  RegionMix knee_only{1, 0, 0, 0};
  Convention c = SimpleConvention();
  c.activation = make_activation(ActivationKind::hard_swish);  // knees at -3 and 3
  c.requant = RequantVariant::double_rounding;
  c.intermediate.rounding = RoundingMode::half_away_from_zero;
  const std::vector<int32_t> knees = generators::KneeCodes(c);
  ASSERT_FALSE(knees.empty());
  int aimed = 0, landed = 0;
  for (uint32_t draw = 0; draw < 50; ++draw) {
    const generators::TargetedDraw d = generators::GenerateTargetedDraw(7, 99, draw, c, knee_only);
    d.conv.validate();
    const std::vector<int64_t> acc = reference::Conv2DAccumulators(d.conv, d.input);
    for (int32_t k = 1; k < d.conv.output_channels(); ++k) {  // channel 0 is the stratified bulk sample
      if (d.aimed[k] != Region::knee) continue;
      ++aimed;
      const reference::Requantizer r(c, d.conv.input_quant().scale, d.conv.weight_scales()[k]);
      const int32_t u = r(acc[k]).u;  // pivot (0, 0, 0, k) is output index k
      landed += std::count(knees.begin(), knees.end(), u) > 0;
    }
  }
  ASSERT_GT(aimed, 20);
  EXPECT_EQ(landed, aimed);
}

TEST(Targeting, BoundaryAccumulatorsStraddleTheTie) {
  Convention c = SimpleConvention();
  c.intermediate.q.zero_point = 3;
  const float sx = 0.01f, sw = 0.003f;
  const reference::Requantizer r(c, sx, sw);
  for (int32_t u = -100; u <= 100; u += 7) {
    const std::vector<int64_t> accs = generators::BoundaryAccumulators(c, sx, sw, u);
    // the tie between u-1 and u: the first accumulator rounds to u-1, the last to u.
    EXPECT_EQ(r(accs.front()).u, u - 1) << u;
    EXPECT_EQ(r(accs.back()).u, u) << u;
  }
}

}  // namespace
}  // namespace fusediff

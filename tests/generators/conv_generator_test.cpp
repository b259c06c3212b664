#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/counter_rng.h"

namespace fusediff::generators {
namespace {

Convention Int8Convention() {
  Convention c;
  c.activation = make_activation(ActivationKind::sigmoid);
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.0625f, 0};
  c.output.q = QuantParams{QuantType{ScalarType::uint8}, 1.0f / 256, 0};
  return c;
}

TEST(CounterRng, PureFunctionOfItsCoordinates) {
  CounterRng a(7, 99, 3, StreamPurpose::input), b(7, 99, 3, StreamPurpose::input);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next_u32(), b.next_u32());
  CounterRng other_draw(7, 99, 4, StreamPurpose::input), same(7, 99, 3, StreamPurpose::input);
  int equal = 0;
  for (int i = 0; i < 100; ++i) equal += other_draw.next_u32() == same.next_u32();
  EXPECT_LT(equal, 3);
}

RC_GTEST_PROP(CounterRng, UniformIntStaysInRange, (uint64_t seed, int32_t lo, uint16_t span)) {
  CounterRng rng(seed, 1, 0, StreamPurpose::parameters);
  const int64_t hi = int64_t{lo} + span;
  for (int i = 0; i < 20; ++i) {
    const int64_t v = rng.uniform_int(lo, hi);
    RC_ASSERT(v >= lo);
    RC_ASSERT(v <= hi);
  }
}

TEST(CounterRng, UniformIntHitsBothEnds) {
  CounterRng rng(1, 2, 0, StreamPurpose::input);
  bool low = false, high = false;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = rng.uniform_int(-128, 127);
    low |= v == -128;
    high |= v == 127;
  }
  EXPECT_TRUE(low && high);
}

RC_GTEST_PROP(ConvGenerator, CasesAreValidAndReproducible, (uint64_t seed, uint64_t stream, uint16_t draw)) {
  const Convention c = Int8Convention();
  const ConvCase a = GenerateConvCase(seed, stream, draw, c);
  const ConvCase b = GenerateConvCase(seed, stream, draw, c);
  a.validate();  // throws (fails the property) when invalid
  RC_ASSERT(a.weights() == b.weights());
  RC_ASSERT(a.bias() == b.bias());
  RC_ASSERT(a.weight_scales() == b.weight_scales());
  RC_ASSERT(GenerateConvInput(seed, stream, draw, a) == GenerateConvInput(seed, stream, draw, b));
  RC_ASSERT(GenerateConvShape(seed, stream, draw).output_elements() == a.output_elements());
  RC_CLASSIFY(a.input_quant().type.scalar == ScalarType::uint8, "uint8 input");
  RC_CLASSIFY(a.padding_top() + a.padding_bottom() > 0, "padded");
  RC_CLASSIFY(a.dilation_height() > 1 || a.dilation_width() > 1, "dilated");
}

TEST(ConvGenerator, LocateSampleWalksDrawsInOrder) {
  const uint64_t seed = 5, stream = 77;
  uint64_t first = 0;
  for (uint32_t draw = 0; draw < 20; ++draw) {
    const uint64_t outputs = GenerateConvShape(seed, stream, draw).output_elements();
    const SampleLocation begin = LocateSample(seed, stream, first);
    const SampleLocation end = LocateSample(seed, stream, first + outputs - 1);
    EXPECT_EQ(begin.draw, draw);
    EXPECT_EQ(begin.element, 0u);
    EXPECT_EQ(end.draw, draw);
    EXPECT_EQ(end.element, outputs - 1);
    first += outputs;
  }
}

}  // namespace
}  // namespace fusediff::generators

// XNNPACK's operators against the rules the backend declares (docs/xnnpack.md): every table read back code by code
// and compared with the reference's binary32_libm table before any convolution runs; the refusals that keep
// XNNPACK's asserts and unsupported parameters from running.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/fused/xnnpack_backend.h"
#include "fusediff/model/backend.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reference/stages.h"
#include "fusediff/reports/reports.h"
#include "shard_env.h"
#include "xnnpack_ops.h"
#include "xnnpack_path.h"

namespace fusediff::fused::xnnpack {
namespace {

// The table operator's output for every input code of `in`, read back through the operator.
std::vector<int32_t> ReadTable(const ElementwiseOp& op, const QuantParams& in) {
  Code8 x, y;
  x.is_signed = in.type.scalar == ScalarType::int8;
  x.resize(in.type.code_count());
  for (int32_t u = in.type.qmin(); u <= in.type.qmax(); ++u) x.set(static_cast<size_t>(u - in.type.qmin()), u);
  std::string why;
  EXPECT_TRUE(op.Run(x, y, &why)) << why;
  std::vector<int32_t> codes(x.size);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = y.get(i);
  return codes;
}

struct TableCase {
  ActivationKind kind;
  ScalarType type;
};

// The declared rule (PostOpArithmetic::binary32_libm), evaluated by the reference, against the library's table,
// over random input quantizations and parameters, on every code.
TEST(XnnpackTables, EveryCodeMatchesTheDeclaredRule) {
  std::mt19937_64 rng(28);
  const TableCase cases[] = {
      {ActivationKind::sigmoid, ScalarType::int8}, {ActivationKind::sigmoid, ScalarType::uint8},
      {ActivationKind::tanh, ScalarType::int8},    {ActivationKind::tanh, ScalarType::uint8},
      {ActivationKind::elu, ScalarType::int8},     {ActivationKind::leaky_relu, ScalarType::uint8}};
  for (const TableCase& t : cases) {
    for (int trial = 0; trial < 40; ++trial) {
      const QuantType type{t.type, false};
      std::uniform_int_distribution<int32_t> zp(type.qmin(), type.qmax());
      QuantParams in{type, static_cast<float>(std::exp2(std::uniform_real_distribution<double>(-8, -1)(rng))), zp(rng)};
      QuantParams out{type, 0, 0};
      Activation a = make_activation(t.kind);
      const bool s8 = t.type == ScalarType::int8;
      if (t.kind == ActivationKind::sigmoid)
        out = {type, 0x1p-8f, s8 ? -128 : 0};
      else if (t.kind == ActivationKind::tanh)
        out = {type, 0x1p-7f, s8 ? 0 : 128};
      else {
        // elu and leaky: the output scale within 2^8 of the input's (leaky's domain), any zero point.
        out = {type, static_cast<float>(in.scale * std::exp2(std::uniform_real_distribution<double>(-3, 3)(rng))),
               zp(rng)};
        a.alpha = static_cast<float>(std::uniform_real_distribution<double>(0.01, 1.0)(rng));
      }
      if (trial == 0 && t.kind == ActivationKind::leaky_relu) {  // ties: si = so, slope 1/2
        out.scale = in.scale;
        a.alpha = 0.5f;
      }
      std::string why;
      const std::unique_ptr<ElementwiseOp> op = ElementwiseOp::Table(a, in, out, &why);
      ASSERT_TRUE(op) << why;
      Convention c;
      c.activation = a;
      c.intermediate.q = in;
      c.output.q = out;
      c = XnnpackConvention(c);
      const reference::ActivationTable table(c);
      const std::vector<int32_t> got = ReadTable(*op, in);
      for (int32_t u = type.qmin(); u <= type.qmax(); ++u) {
        ASSERT_EQ(got[static_cast<size_t>(u - type.qmin())], table.at(u).y)
            << op->name() << " code " << u << " si=" << in.scale << " zx=" << in.zero_point << " so=" << out.scale
            << " zo=" << out.zero_point << " alpha=" << a.alpha;
      }
    }
  }
}

TEST(XnnpackTables, SigmoidAndTanhTakeTheirFixedOutputOnly) {
  const QuantParams in{QuantType{ScalarType::int8, false}, 0.05f, 3};
  std::string why;
  EXPECT_FALSE(
      ElementwiseOp::Table(make_activation(ActivationKind::sigmoid), in, QuantParams{in.type, 1.0f / 255, -128}, &why));
  EXPECT_NE(why.find("1/256"), std::string::npos) << why;
  EXPECT_FALSE(ElementwiseOp::Table(make_activation(ActivationKind::leaky_relu), in, in, &why));
  EXPECT_NE(why.find("qu8 only"), std::string::npos) << why;
}

// A producer whose requantization scale XNNPACK asserts on (< 2^-32) is refused before it is created: the process
// would abort (params-init.c:394).
TEST(XnnpackProducer, TinyRequantizationScaleIsRefusedNotAborted) {
  ConvCase conv;
  conv.batch(1).input_size(2, 2).input_channels(1).output_channels(1).kernel_size(1, 1);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8, false}, 1e-6f, 0})
      .weight_scales({1e-6f})
      .weights({3})
      .bias({0});
  const std::vector<int32_t> input = {1, 2, 3, 4};
  Code8 out;
  std::string rejected;
  const ProducerOutput o{QuantParams{QuantType{ScalarType::int8, false}, 1.0f, 0}, -128, 127};
  EXPECT_FALSE(RunProducer(conv, false, input, o, out, nullptr, &rejected));
  EXPECT_NE(rejected.find("2^-32"), std::string::npos) << rejected;
}

// The declared fp32 requantization on chosen accumulators: a 1x1 conv of one channel with x - zx = 1 makes
// acc = bias + w; ties (s = 1/2) round half to even, unlike TFLite.
TEST(XnnpackProducer, RequantizationRoundsTheBinary32ProductHalfToEven) {
  for (const ScalarType scalar : {ScalarType::int8, ScalarType::uint8}) {
    const QuantType type{scalar, false};
    for (int32_t bias : {0, 2, 4, -4, 1000, -1001}) {
      ConvCase conv;
      conv.batch(1).input_size(1, 1).input_channels(1).output_channels(1).kernel_size(1, 1);
      conv.input_quant(QuantParams{type, 0.5f, type.qmin()}).weight_scales({1.0f}).weights({1}).bias({bias});
      const std::vector<int32_t> input = {type.qmin() + 1};  // x - zx = 1: acc = bias + 1
      Code8 out;
      std::string why;
      const ProducerOutput o{QuantParams{type, 1.0f, 0}, type.qmin(), type.qmax()};
      ASSERT_TRUE(RunProducer(conv, false, input, o, out, nullptr, &why)) << why;
      const double t = 0.5 * (bias + 1);  // exact; a tie for even bias
      const double want = std::clamp<double>(std::nearbyint(t), type.qmin(), type.qmax());
      EXPECT_EQ(out.get(0), static_cast<int32_t>(want)) << "bias " << bias;
    }
  }
}

// add_nd against the declared fixed_point_half_up rule on every (a, b) pair, for random scales and zero points (each
// ratio within XNNPACK's [2^-10, 2^8)), including the example of docs/xnnpack.md (sa 0.05, sb 0.07, so 0.1).
TEST(XnnpackAdd, EveryPairMatchesTheDeclaredRule) {
  std::mt19937_64 rng(4);
  for (const ScalarType scalar : {ScalarType::int8, ScalarType::uint8}) {
    const QuantType type{scalar, false};
    std::uniform_int_distribution<int32_t> zp(type.qmin(), type.qmax());
    for (int trial = 0; trial < 6; ++trial) {
      const auto log_uniform = [&](double lo, double hi) {
        return static_cast<float>(std::exp2(std::uniform_real_distribution<double>(lo, hi)(rng)));
      };
      QuantParams qa{type, log_uniform(-8, -2), zp(rng)}, qb{type, log_uniform(-8, -2), zp(rng)};
      QuantParams qo{type, static_cast<float>(std::max(qa.scale, qb.scale) * std::exp2(-3 * trial / 5.0)), zp(rng)};
      if (trial == 0) {
        qa.scale = 0.05f;
        qb.scale = 0.07f;
        qo.scale = 0.1f;
      }
      std::string why;
      const std::unique_ptr<ElementwiseOp> op = ElementwiseOp::Add(qa, qb, qo, type.qmin(), type.qmax(), &why);
      ASSERT_TRUE(op) << why;
      Code8 a, b, y;
      a.is_signed = b.is_signed = scalar == ScalarType::int8;
      a.resize(65536);
      b.resize(65536);
      for (int32_t i = 0; i < 65536; ++i) {
        a.set(static_cast<size_t>(i), type.qmin() + (i >> 8));
        b.set(static_cast<size_t>(i), type.qmin() + (i & 255));
      }
      ASSERT_TRUE(op->Run(a, b, y, &why)) << why;
      for (size_t i = 0; i < 65536; ++i) {
        const int32_t want = reference::QuantizedAdd(AddRule::fixed_point_half_up, a.get(i), qa, b.get(i), qb, qo).code;
        ASSERT_EQ(y.get(i), want) << op->name() << " a=" << a.get(i) << " b=" << b.get(i);
      }
    }
  }
}

// average_pooling2d_nhwc_qu8 on a 2x2 stride-2 window of a 4x4 image (non-global) against fixed_point_half_away, and
// the global window refused with the reason.
TEST(XnnpackPool, AverageMatchesTheDeclaredRuleAndRefusesTheGlobalPath) {
  std::mt19937_64 rng(9);
  const QuantType type{ScalarType::uint8, false};
  std::uniform_int_distribution<int32_t> code(0, 255);
  for (int trial = 0; trial < 50; ++trial) {
    const QuantParams in{type, static_cast<float>(std::exp2(std::uniform_real_distribution<double>(-8, 0)(rng))),
                         code(rng)};
    const QuantParams out{
        type, static_cast<float>(in.scale * std::exp2(std::uniform_real_distribution<double>(-4, 4)(rng))), code(rng)};
    const Shape4 shape{2, 4, 4, 3};
    Code8 x, y;
    x.is_signed = false;
    x.resize(shape.elements());
    for (size_t i = 0; i < shape.elements(); ++i) x.set(i, code(rng));
    Shape4 pooled;
    std::string why;
    ASSERT_TRUE(RunAveragePool(x, shape, 2, 2, 0, in, out, y, &pooled, &why)) << why;
    ASSERT_EQ(pooled.elements(), size_t{2 * 2 * 2 * 3});
    for (size_t n = 0; n < 2; ++n)
      for (size_t oy = 0; oy < 2; ++oy)
        for (size_t ox = 0; ox < 2; ++ox)
          for (size_t c = 0; c < 3; ++c) {
            std::vector<int32_t> taps;
            for (size_t ky = 0; ky < 2; ++ky)
              for (size_t kx = 0; kx < 2; ++kx)
                taps.push_back(x.get(((n * 4 + 2 * oy + ky) * 4 + 2 * ox + kx) * 3 + c));
            const int32_t want = reference::AveragePool(AvgPoolRule::fixed_point_half_away, taps, in, out).code;
            ASSERT_EQ(y.get(((n * 2 + oy) * 2 + ox) * 3 + c), want) << "trial " << trial;
          }
  }
  Code8 x, y;
  x.is_signed = false;
  x.resize(2 * 2 * 1);
  Shape4 pooled;
  std::string why;
  EXPECT_FALSE(RunAveragePool(x, Shape4{1, 2, 2, 1}, 2, 2, 0, QuantParams{type, 0.1f, 3}, QuantParams{type, 0.1f, 3}, y,
                              &pooled, &why));
  EXPECT_NE(why.find("global path"), std::string::npos) << why;
}

// With padding the operator counts every tap of the window, a padding tap as zx (average-pooling-nhwc.c:193, 221):
// fixed_point_half_away over the whole window, against the reference fed the window with its padding taps as zx.
TEST(XnnpackPool, PaddedAverageCountsPaddingAsTheZeroPoint) {
  std::mt19937_64 rng(10);
  const QuantType type{ScalarType::uint8, false};
  std::uniform_int_distribution<int32_t> code(0, 255);
  const int32_t H = 5, W = 4, C = 2, K = 3, S = 2, P = 1, OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  int padded_windows_that_differ_from_tflite = 0;
  for (int trial = 0; trial < 50; ++trial) {
    const QuantParams in{type, static_cast<float>(std::exp2(std::uniform_real_distribution<double>(-8, 0)(rng))),
                         code(rng)};
    Code8 x, y;
    x.is_signed = false;
    x.resize(static_cast<size_t>(H * W * C));
    for (size_t i = 0; i < x.size; ++i) x.set(i, code(rng));
    Shape4 pooled;
    std::string why;
    ASSERT_TRUE(RunAveragePool(x, Shape4{1, H, W, C}, K, S, P, in, in, y, &pooled, &why)) << why;
    ASSERT_EQ(pooled.elements(), static_cast<size_t>(OH * OW * C));
    for (int32_t oy = 0; oy < OH; ++oy)
      for (int32_t ox = 0; ox < OW; ++ox)
        for (int32_t c = 0; c < C; ++c) {
          std::vector<int32_t> window, inside;
          for (int32_t ky = 0; ky < K; ++ky)
            for (int32_t kx = 0; kx < K; ++kx) {
              const int32_t iy = oy * S - P + ky, ix = ox * S - P + kx;
              const bool in_bounds = iy >= 0 && iy < H && ix >= 0 && ix < W;
              window.push_back(in_bounds ? x.get(static_cast<size_t>((iy * W + ix) * C + c)) : in.zero_point);
              if (in_bounds) inside.push_back(window.back());
            }
          const int32_t got = y.get(static_cast<size_t>((oy * OW + ox) * C + c));
          ASSERT_EQ(got, reference::AveragePool(AvgPoolRule::fixed_point_half_away, window, in, in).code);
          if (inside.size() < window.size())
            padded_windows_that_differ_from_tflite += got != reference::AveragePool(AvgPoolRule::tflite, inside, in, in).code;
        }
  }
  EXPECT_GT(padded_windows_that_differ_from_tflite, 0);  // TFLite divides by the in-bounds taps only
}

// In the run itself every case with a table activation reads XNNPACK's table back, all 256 input codes, before its
// first draw, and it matches the declared rule; a clamp activation has no table to read.
TEST(XnnpackTables, TheRunReadsEveryTableBackBeforeItsDraws) {
  test_support::ClearShardVariables();
  const std::string json = ::testing::TempDir() + "xnnpack_readback.json";
  for (const char* activation : {"tanh", "relu"}) {
    std::ostringstream out, err;
    const int code = cli::Main({"fusediff", "run", "--fused", "xnnpack", "--activation", activation, "--samples", "500",
                                "--json", json},
                               out, err);
    ASSERT_EQ(code, cli::kExitPass) << out.str() << err.str();
    const RunResult results = reports::ReadResultsFile(json);
    ASSERT_FALSE(results.cases.empty());
    for (const CaseResult& c : results.cases) {
      if (std::string_view(activation) == "relu") {
        EXPECT_FALSE(c.table_readback) << c.spec.name;
        continue;
      }
      ASSERT_TRUE(c.table_readback) << c.spec.name;
      EXPECT_EQ(c.table_readback->codes, 256u) << c.spec.name;
      EXPECT_EQ(c.table_readback->mismatches, 0u) << c.spec.name;
    }
  }
}

// The backend's refusals name what XNNPACK cannot express.
TEST(XnnpackBackend, NamesWhatItCannotExpress) {
  const Backend& b = XnnpackBackend();
  CaseSpec spec;
  spec.backend = std::string(kFused);
  spec.convention.activation = make_activation(ActivationKind::hard_swish);
  spec.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8, false}, 0.05f, 0};
  spec.convention.output.q = spec.convention.intermediate.q;
  std::string why;
  EXPECT_FALSE(b.CreatePath(spec, &why));
  EXPECT_NE(why.find("no 8-bit operator for hard_swish"), std::string::npos) << why;
  spec.convention.activation = make_activation(ActivationKind::relu);
  spec.convention.output.q.scale = 0.1f;
  EXPECT_FALSE(b.CreatePath(spec, &why));
  EXPECT_NE(why.find("clamp keeps the quantization"), std::string::npos) << why;
  spec.convention.output.q = spec.convention.intermediate.q;
  EXPECT_TRUE(b.CreatePath(spec, &why)) << why;
  spec.mutant = Mutant::use_output_scale;
  EXPECT_FALSE(b.CreatePath(spec, &why));
}

}  // namespace
}  // namespace fusediff::fused::xnnpack

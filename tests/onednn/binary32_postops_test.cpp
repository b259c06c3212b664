// oneDNN's post-op arithmetic bit for bit against the reference's binary32 rule (PostOpArithmetic::binary32,
// docs/onednn.md "Exact binary32 post-ops"), on draws that can tell the rule from its neighbours: a fused
// multiply-add of the scaling and the zero point, the exact t = f(v)/sy + zy, and (hard_swish) the scalar
// reference order fl32(fl32(v/6) clip(fl32(v + 3))). The accumulators are exact on every ISA (u8 sources, weights
// 0 and 1: no int16 pair saturation, no halved weights), so these tests hold under every DNNL_MAX_CPU_ISA cap;
// ctest runs them under each one the CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_suite.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/tolerance.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reference/stages.h"
#include "onednn_test_util.h"

namespace fusediff {
namespace {

using test_support::OneDnnGraph;
using test_support::kInt8;
using test_support::kUint8;

using fused::onednn::OneDnnKernel;
using fused::onednn::OneDnnVariant;
using fused::onednn::VariantOf;



int32_t RoundAndSaturate(double t, const QuantType& type) {
  return static_cast<int32_t>(std::clamp(std::nearbyint(t), double(type.qmin()), double(type.qmax())));
}

// The candidate orders for one accumulator on a channel with output scale `oscale` (v = fl32(fl32(acc) oscale)).
struct Orders {
  int32_t rule = 0;       // the binary32 rule
  int32_t fma = 0;        // t = fl32(e fl32(1/sy) + zy), one rounding
  int32_t exact = 0;      // t = f(v)/sy + zy exactly (the pre-emulation reference)
  int32_t ref_order = 0;  // hard_swish only: e = fl32(fl32(v/6) clip(fl32(v + 3)))
};

Orders Predict(const Convention& c, reference::ActivationEvaluator& exact, int64_t acc, float oscale) {
  const float v = reference::Fl32Multiply(reference::Fl32FromInt64(acc), oscale);
  const float e = reference::Binary32Activation(c.activation, v);
  const float inverse = reference::Fl32Divide(1.0f, c.output.q.scale);
  const float zy = static_cast<float>(c.output.q.zero_point);
  Orders o;
  o.rule = RoundAndSaturate(reference::Binary32OutputValue(e, c.output.q.scale, c.output.q.zero_point), c.output.q.type);
  o.fma = RoundAndSaturate(reference::Fl32FusedMultiplyAdd(e, inverse, zy), c.output.q.type);
  o.exact = exact(v).y;
  o.ref_order = o.rule;
  if (c.activation.kind == ActivationKind::hard_swish) {
    const float shifted = reference::Fl32Add(v, 3.0f);
    const float clipped = std::clamp(shifted, 0.0f, 6.0f);
    const float e_ref = reference::Fl32Multiply(reference::Fl32Divide(v, 6.0f), clipped);
    o.ref_order = RoundAndSaturate(reference::Binary32OutputValue(e_ref, c.output.q.scale, c.output.q.zero_point),
                                   c.output.q.type);
  }
  return o;
}

// Channels (acc, output scale) aimed at ties of the output rounding after cancellation against the zero point:
// t* = k + 1/2 + d, |d| < 2^-14, v = t*... found by inverting the scaling in double, then kept when some
// neighbouring order disagrees with the rule (the ones that can tell the orders apart) or at random.
struct Channel {
  int64_t acc = 0;
  float oscale = 0;
  Orders orders;
};

std::vector<Channel> AimedChannels(const Convention& c, std::mt19937_64& rng, size_t count, double v_lo, double v_hi) {
  Convention exact_conv = c;
  exact_conv.intermediate.kind = IntermediateKind::f32;
  exact_conv.requant = RequantVariant::f32_half_even;
  exact_conv.post_ops = PostOpArithmetic::exact;
  reference::ActivationEvaluator exact(exact_conv);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Channel> out;
  size_t telling = 0;
  for (int attempt = 0; out.size() < count && attempt < 200000; ++attempt) {
    // v in [v_lo, v_hi] near a value whose t is a tie: t = F(v)/sy + zy with F ~ f (exact enough to aim).
    const double v_target = v_lo + (v_hi - v_lo) * unit(rng);
    const reference::FilterEvaluation fe = reference::ActivationFilter(c.activation, v_target);
    if (!fe.usable) continue;
    const double t = fe.f / c.output.q.scale + c.output.q.zero_point;
    const double tie = std::floor(t) + 0.5;
    // Move v so that t lands on the tie (Newton step with a numerical slope), then pick acc and a scale.
    const double h = 1e-4 * std::max(1.0, std::fabs(v_target));
    const double slope = (reference::ActivationFilter(c.activation, v_target + h).f - fe.f) / h / c.output.q.scale;
    if (!(std::fabs(slope) > 1e-3)) continue;
    const double v_tie = v_target + (tie - t) / slope;
    const float oscale = static_cast<float>(std::ldexp(1.0 + unit(rng), -12));
    const int64_t acc = static_cast<int64_t>(std::llround(v_tie / oscale));
    if (std::llabs(acc) >= (int64_t{1} << 23)) continue;
    const Orders o = Predict(c, exact, acc, oscale);
    const bool tells = o.fma != o.rule || o.exact != o.rule || o.ref_order != o.rule;
    if (!tells && unit(rng) > 0.05) continue;
    if (tells) ++telling;
    out.push_back(Channel{acc, oscale, o});
  }
  return out;
}

// One 1x1 input pixel per output element, x = zx = 0, weight 1 (a 3x3 kernel with only its centre set, input 4x4
// padded by 1, so that different jit kernels are chosen): acc = bias[k] exactly, on every ISA.
ConvCase ProbeConv(const std::vector<Channel>& channels, bool three_by_three) {
  ConvCase conv;
  const int32_t k = static_cast<int32_t>(channels.size());
  conv.batch(1).input_channels(1).output_channels(k);
  std::vector<float> scales;
  std::vector<int32_t> bias;
  for (const Channel& ch : channels) {
    scales.push_back(ch.oscale);
    bias.push_back(static_cast<int32_t>(ch.acc));
  }
  std::vector<int8_t> weights;
  if (three_by_three) {
    conv.input_size(4, 4).kernel_size(3, 3).padding(1, 1, 1, 1);
    weights.assign(static_cast<size_t>(k) * 9, 0);
    for (int32_t o = 0; o < k; ++o) weights[static_cast<size_t>(o) * 9 + 4] = 1;  // OHWI, centre tap
  } else {
    conv.input_size(1, 1).kernel_size(1, 1);
    weights.assign(static_cast<size_t>(k), 1);
  }
  conv.input_quant(QuantParams{kUint8, 1.0f, 0}).weight_scales(scales).weights(weights).bias(bias);
  return conv;
}

struct Tally {
  uint64_t samples = 0, agree = 0, fma_wrong = 0, exact_wrong = 0, ref_order_wrong = 0;
};

Tally RunProbe(const Activation& a, float sy, int32_t zy, double v_lo, double v_hi, uint64_t seed,
               std::map<std::string, uint64_t>* implementations) {
  const Convention c = [&] {
    Convention g = OneDnnGraph(a, {kInt8, 1.0f, 0}, {kInt8, sy, zy});
    g.post_ops = PostOpArithmetic::binary32;
    return g;
  }();
  std::mt19937_64 rng(seed);
  Tally tally;
  std::string why;
  auto kernel = OneDnnKernel::Create(OneDnnGraph(a, {kInt8, 1.0f, 0}, {kInt8, sy, zy}), OneDnnVariant::fused, &why);
  EXPECT_TRUE(kernel) << why;
  if (!kernel) return tally;
  for (int round = 0; round < 6; ++round) {
    const std::vector<Channel> channels = AimedChannels(c, rng, 48, v_lo, v_hi);
    const ConvCase conv = ProbeConv(channels, round % 2 == 1);
    std::vector<int32_t> input(conv.input_elements(), 0), y(conv.output_elements());
    EXPECT_TRUE(kernel->Run(conv, input, y, &why)) << why;
    (*implementations)[kernel->last_implementation()] += y.size();
    for (size_t j = 0; j < y.size(); ++j) {
      const Orders& o = channels[j % channels.size()].orders;
      ++tally.samples;
      tally.agree += y[j] == o.rule;
      tally.fma_wrong += y[j] != o.fma;
      tally.exact_wrong += y[j] != o.exact;
      tally.ref_order_wrong += y[j] != o.ref_order;
      EXPECT_EQ(y[j], o.rule) << to_string(a.kind) << " acc " << channels[j % channels.size()].acc << " oscale "
                              << channels[j % channels.size()].oscale << " (fma " << o.fma << ", exact " << o.exact
                              << ")";
    }
  }
  return tally;
}

// The fused kernel computes exactly the binary32 rule: a product by fl32(1/sy), then + zy, each rounded; relu,
// leaky_relu and relu6 exactly, hard_swish in the jit injector's order. The draws are aimed so that every
// neighbouring order is wrong on some of them, which the tallies check.
TEST(OneDnnBinary32PostOps, FusedKernelComputesTheRuleBitForBit) {
  std::map<std::string, uint64_t> implementations;
  Activation leaky = make_activation(ActivationKind::leaky_relu);
  leaky.alpha = 0.1f;
  struct Probe {
    Activation a;
    float sy;
    int32_t zy;
    double v_lo, v_hi;
  };
  const Probe probes[] = {
      {make_activation(ActivationKind::relu), 0.3f, -100, 20.0, 68.0},
      {make_activation(ActivationKind::relu6), 0.0471f, -120, 3.0, 5.9},
      {leaky, 0.05f, 90, -100.0, -30.0},
      {make_activation(ActivationKind::hard_swish), 0.0391f, -110, -2.9, 5.5},
  };
  for (const Probe& p : probes) {
    const Tally t = RunProbe(p.a, p.sy, p.zy, p.v_lo, p.v_hi, 11, &implementations);
    EXPECT_EQ(t.agree, t.samples) << to_string(p.a.kind);
    EXPECT_GT(t.fma_wrong, 0u) << to_string(p.a.kind) << ": no draw told the rule from a fused multiply-add";
    EXPECT_GT(t.exact_wrong, 0u) << to_string(p.a.kind) << ": no draw told the rule from the exact t";
    std::printf("[ probe    ] %s: %llu samples, rule %llu, fma would be wrong on %llu, exact t on %llu, ref order "
                "on %llu\n",
                std::string(to_string(p.a.kind)).c_str(), (unsigned long long)t.samples, (unsigned long long)t.agree,
                (unsigned long long)t.fma_wrong, (unsigned long long)t.exact_wrong,
                (unsigned long long)t.ref_order_wrong);
  }
  for (const auto& [impl, n] : implementations) std::printf("[ probe    ] %s: %llu samples\n", impl.c_str(), (unsigned long long)n);
  EXPECT_GE(implementations.size(), 1u);
}

// The fused kernel's hard_swish order. At v = 2.5 + i 2^-22 the injector's order fl32(v fl32(clip(fl32(v + 3))/6))
// and the scalar reference order fl32(fl32(v/6) clip(fl32(v + 3))) give different e on some i. For each such v an
// output scale sy (zy = 0) is searched that puts a rounding tie of t = fl32(e fl32(1/sy)) between the two e: the
// output code then says which e the kernel computed.
TEST(OneDnnBinary32PostOps, FusedHardSwishIsTheInjectorsOrder) {
  const Activation a = make_activation(ActivationKind::hard_swish);
  uint64_t told = 0;
  std::map<std::string, uint64_t> implementations;
  for (int i = 0; i < 4000 && told < 24; ++i) {
    const int64_t acc = int64_t{10485760} + 37 * i;  // v = acc 2^-22, exact
    const float v = static_cast<float>(std::ldexp(double(acc), -22));
    const float e = reference::Binary32Activation(a, v);
    const float e_ref =
        reference::Fl32Multiply(reference::Fl32Divide(v, 6.0f), std::clamp(reference::Fl32Add(v, 3.0f), 0.0f, 6.0f));
    if (e == e_ref) continue;
    // sy near e / 100.5, stepped one binary32 at a time until the two e round to different codes.
    float sy = static_cast<float>((double(e) + double(e_ref)) / 2 / 100.5);
    int32_t y_rule = 0, y_ref = 0;
    bool found = false;
    for (int step = 0; step < 4000 && !found; ++step) {
      sy = std::nextafter(sy, step % 2 ? 1.0f : 0.0f);
      y_rule = static_cast<int32_t>(std::nearbyint(reference::Binary32OutputValue(e, sy, 0)));
      y_ref = static_cast<int32_t>(std::nearbyint(reference::Binary32OutputValue(e_ref, sy, 0)));
      found = y_rule != y_ref;
    }
    if (!found) continue;
    std::string why;
    auto kernel = OneDnnKernel::Create(OneDnnGraph(a, {kInt8, 1.0f, 0}, {kInt8, sy, 0}), OneDnnVariant::fused, &why);
    ASSERT_TRUE(kernel) << why;
    const ConvCase conv = ProbeConv({Channel{acc, 0x1p-22f, {}}}, told % 2 == 1);
    std::vector<int32_t> input(conv.input_elements(), 0), y(conv.output_elements());
    ASSERT_TRUE(kernel->Run(conv, input, y, &why)) << why;
    implementations[kernel->last_implementation()] += y.size();
    for (int32_t code : y) EXPECT_EQ(code, y_rule) << "v = " << v << " sy = " << sy << " (scalar order: " << y_ref << ")";
    ++told;
  }
  EXPECT_GE(told, 8u) << "too few inputs told the two orders apart";
  for (const auto& [impl, n] : implementations) std::printf("[ probe    ] hard_swish order, %s: %llu samples\n", impl.c_str(), (unsigned long long)n);
}

// oneDNN's eltwise forward primitive (what the unfused graph runs) equals the reference's binary32 activation bit
// for bit for relu, leaky_relu, relu6 and hard_swish, on every binary32 of a grid through the knees and beyond.
TEST(OneDnnBinary32PostOps, EltwiseForwardEqualsTheBinary32Activation) {
  std::vector<float> x;
  for (int i = -40000; i <= 40000; ++i) x.push_back(static_cast<float>(i) * 0.000244140625f);  // [-9.77, 9.77] step 2^-12
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any(0, 0x7F7FFFFFu);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t b = any(rng);
    x.push_back(std::bit_cast<float>(b));
    x.push_back(-std::bit_cast<float>(b));
  }
  Activation leaky = make_activation(ActivationKind::leaky_relu);
  leaky.alpha = 0.1f;
  for (const Activation& a : {make_activation(ActivationKind::relu), make_activation(ActivationKind::relu6), leaky,
                              make_activation(ActivationKind::hard_swish)}) {
    std::vector<float> y(x.size());
    std::string impl, why;
    ASSERT_TRUE(fused::onednn::EltwiseForward(a, x, y, &impl, &why)) << why;
    uint64_t differ = 0, ref_order_differs = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float e = reference::Binary32Activation(a, x[i]);
      if (a.kind == ActivationKind::hard_swish && std::fabs(x[i]) < 1e30f) {
        const float e_ref = reference::Fl32Multiply(reference::Fl32Divide(x[i], 6.0f),
                                                    std::clamp(reference::Fl32Add(x[i], 3.0f), 0.0f, 6.0f));
        ref_order_differs += !(e_ref == e);
      }
      if (!(e == y[i]) && !(std::isinf(e) && std::isinf(y[i]))) {
        if (++differ < 5) ADD_FAILURE() << to_string(a.kind) << " x=" << x[i] << ": oneDNN " << y[i] << ", rule " << e;
      }
    }
    EXPECT_EQ(differ, 0u) << to_string(a.kind) << " (" << impl << ")";
    if (a.kind == ActivationKind::hard_swish) {
      EXPECT_GT(ref_order_differs, 0u) << "the orders never differ here";
    }
  }
}

// The default suite's oneDNN cases on generated Conv2D draws (ConvTranspose2D draws are left out: output padding
// hits the jit deconvolution defect, docs/onednn.md item 1): with the binary32 rule the fused kernel and the
// unfused graph match the reference exactly for the piecewise-linear activations, which is why their tolerance is
// 0 (model/tolerance.cpp). On VNNI kernels: without VNNI they saturate int16 pairs on these full-range draws (the
// ledger's documented behaviour, tested in pre_vnni_test.cpp).
TEST(OneDnnBinary32PostOps, PiecewiseLinearConv2DDrawsMatchExactly) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  for (ActivationKind kind : {ActivationKind::relu, ActivationKind::relu6, ActivationKind::leaky_relu,
                              ActivationKind::hard_swish}) {
    driver::SuiteOptions options;
    const std::vector<CaseSpec> specs = fused::onednn::OneDnnComparisons(options, kind);
    ASSERT_EQ(specs.size(), 3u);
    for (const CaseSpec& spec : {specs[0], specs[2]}) {
      EXPECT_EQ(default_tolerance(spec).max_abs_lsb, 0) << spec.name;
      std::string why;
      auto kernel = OneDnnKernel::Create(spec.convention, VariantOf(spec), &why);
      ASSERT_TRUE(kernel) << why;
      const Convention reference_conv = reference_convention(spec);
      ASSERT_EQ(reference_conv.post_ops, PostOpArithmetic::binary32);
      const bool f32 = reference_conv.intermediate.kind == IntermediateKind::f32;
      std::optional<reference::ActivationEvaluator> evaluator;
      std::optional<reference::ActivationTable> table;
      if (f32) evaluator.emplace(reference_conv);
      else table.emplace(reference_conv);
      uint64_t compared = 0, exact = 0;
      generators::ConvShapeLimits full_range;
      full_range.full_range_weights = true;
      for (uint32_t draw = 0; compared < 3000; ++draw) {
        const generators::TargetedDraw d =
            generators::GenerateTargetedDraw(3, case_stream_id(spec), draw, spec.convention, spec.mix, full_range);
        if (d.conv.op() != ConvOp::conv2d) continue;
        std::vector<int32_t> y(d.conv.output_elements());
        if (!kernel->Run(d.conv, d.input, y, &why)) continue;
        const std::vector<int64_t> acc = reference::Conv2DAccumulators(d.conv, d.input);
        for (size_t j = 0; j < y.size(); ++j) {
          const float sw = d.conv.weight_scales()[j % static_cast<size_t>(d.conv.output_channels())];
          const int32_t y_ref =
              f32 ? (*evaluator)(reference::F32IntermediateValue(acc[j], d.conv.input_quant().scale, sw)).y
                  : table->at(reference::Requantizer(reference_conv, d.conv.input_quant().scale, sw)(acc[j]).u).y;
          EXPECT_EQ(y[j], y_ref) << spec.name << " draw " << draw << " element " << j;
          exact += y[j] == y_ref;
          ++compared;
        }
      }
      EXPECT_EQ(exact, compared) << spec.name;
    }
  }
}

}  // namespace
}  // namespace fusediff

// The rounding-error bounds (bounds.h) against binary32 evaluated here in every order and formula a kernel may use:
// each computed value must lie within its bound of the exact one (computed in double-double), the bound must be
// nearly attained where the worst case is constructed, and the defects it exists to catch must exceed it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "fusediff/bisect/bounds.h"
#include "fusediff/model/errors.h"

namespace fusediff::bisect {
namespace {

using onnx_io::DType;
using onnx_io::ModelBuilder;
using onnx_io::Tensor;
using Attr = onnx_io::ModelBuilder::Attribute;

// An exact-enough sum: double-double (Knuth's TwoSum), error below 2^-100 relative for these sizes.
struct Exact {
  double hi = 0, lo = 0;
  void Add(double x) {
    const double s = hi + x, bb = s - hi, err = (hi - (s - bb)) + (x - bb);
    hi = s;
    lo += err;
  }
  double Value() const { return hi + lo; }
};

// The orders a float kernel may sum `terms` in (each term a product w x computed by `product`, or a plain value).
using Product = std::function<float(size_t)>;  // term k rounded to binary32 (a product or a plain term)
std::vector<float> EveryOrder(size_t n, const Product& term, const std::function<float(float, size_t)>& fma_step) {
  std::vector<float> out;
  float f = 0;
  for (size_t k = 0; k < n; ++k) f += term(k);
  out.push_back(f);
  f = 0;
  for (size_t k = n; k-- > 0;) f += term(k);
  out.push_back(f);
  std::function<float(size_t, size_t)> tree = [&](size_t lo, size_t hi) -> float {
    return hi - lo == 1 ? term(lo) : tree(lo, (lo + hi) / 2) + tree((lo + hi) / 2, hi);
  };
  out.push_back(tree(0, n));
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // SIMD lanes, then a horizontal sum
  for (size_t k = 0; k < n; ++k) lanes[k % 8] += term(k);
  out.push_back(((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7])));
  f = 0;
  for (size_t k = 0; k < n; ++k) f = fma_step(f, k);
  out.push_back(f);
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::mt19937 rng(7);
  for (int r = 0; r < 3; ++r) {
    std::shuffle(perm.begin(), perm.end(), rng);
    f = 0;
    for (size_t k : perm) f += term(k);
    out.push_back(f);
  }
  return out;
}

std::vector<float> Normal(size_t n, double sd, double mean, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

BoundedTensor EvaluateOne(const ModelBuilder& b, const std::vector<Tensor>& feeds, const std::string& name) {
  const BoundEvaluator ev(onnx_io::ParseGraph(b.Serialize(), "test"));
  return ev.Evaluate(feeds, {name}).front();
}

TEST(Bounds, GammaIsHighamsAndInfiniteBeyondOne) {
  EXPECT_DOUBLE_EQ(Gamma(3, 0x1p-24), 3 * 0x1p-24 / (1 - 3 * 0x1p-24));
  EXPECT_TRUE(std::isinf(Gamma(0x1p24, 0x1p-24)));
  EXPECT_EQ(UnitRoundoff(DType::float32), 0x1p-24);
  EXPECT_EQ(UnitRoundoff(DType::float16), 0);
}

// A Conv (8 channels, 3x3, padding, bias): every order, with and without FMA, bias first or last, within base; and
// base <= legal everywhere.
TEST(Bounds, ConvHoldsForEveryOrderAndFma) {
  const int64_t c = 8, h = 6;
  const std::vector<float> x = Normal(c * h * h, 1, 0.3, 1), w = Normal(c * c * 9, 0.3, 0, 2), bias = Normal(c, 1, 0, 3);
  ModelBuilder b("conv", 17);
  b.AddInput("x", DType::float32, {1, c, h, h});
  b.AddOutput("y", DType::float32, {1, c, h, h});
  b.AddInitializer(Tensor::FromFloats("w", {c, c, 3, 3}, w));
  b.AddInitializer(Tensor::FromFloats("b", {c}, bias));
  b.AddNode("Conv", {"x", "w", "b"}, {"y"}, {Attr::Ints("pads", {1, 1, 1, 1})});
  const BoundedTensor t = EvaluateOne(b, {Tensor::FromFloats("x", {1, c, h, h}, x)}, "y");
  ASSERT_TRUE(t.uncovered.empty()) << t.uncovered;
  double worst = 0;
  for (int64_t oc = 0; oc < c; ++oc) {
    for (int64_t p = 0; p < h * h; ++p) {
      std::vector<std::pair<float, float>> taps{{1.0f, bias[oc]}};  // (w, x) pairs; the bias as 1 * b
      for (int64_t ic = 0; ic < c; ++ic) {
        for (int64_t k = 0; k < 9; ++k) {
          const int64_t r = p / h + k / 3 - 1, q = p % h + k % 3 - 1;
          if (r >= 0 && r < h && q >= 0 && q < h) taps.push_back({w[(oc * c + ic) * 9 + k], x[(ic * h + r) * h + q]});
        }
      }
      Exact exact;
      for (const auto& [wk, xk] : taps) exact.Add(static_cast<double>(wk) * xk);
      const size_t i = static_cast<size_t>(oc * h * h + p);
      const auto orders = EveryOrder(
          taps.size(), [&](size_t k) { return taps[k].first * taps[k].second; },
          [&](float acc, size_t k) { return std::fmaf(taps[k].first, taps[k].second, acc); });
      for (float f : orders) {
        const double err = std::fabs(f - exact.Value());
        EXPECT_LE(err, t.base[i]) << "element " << i;
        worst = std::max(worst, err / t.base[i]);
      }
      EXPECT_LE(t.base[i], t.legal[i]);
      EXPECT_NEAR(t.value[i], exact.Value(), 1e-12 * (1 + std::fabs(exact.Value())));
    }
  }
  EXPECT_GT(worst, 0.002);  // random data: well inside, yet the bound is not astronomically loose
}

// The worst case of a sum is attained: 1 + e + e + ... with e just above half an ulp of 1 rounds up every time.
TEST(Bounds, TheSumBoundIsNearlyAttained) {
  const int64_t n = 16;
  std::vector<float> v(n, 0x1.000002p-24f);
  v[0] = 1;
  ModelBuilder b("sum", 17);
  b.AddInput("x", DType::float32, {1, n});
  b.AddOutput("y", DType::float32, {1, 1});
  b.AddNode("ReduceSum", {"x"}, {"y"}, {Attr::Ints("axes", {1})});
  const BoundedTensor t = EvaluateOne(b, {Tensor::FromFloats("x", {1, n}, v)}, "y");
  ASSERT_TRUE(t.uncovered.empty()) << t.uncovered;
  float f = 0;
  for (float x : v) f += x;
  Exact exact;
  for (float x : v) exact.Add(x);
  const double err = std::fabs(f - exact.Value());
  EXPECT_LE(err, t.base[0]);
  EXPECT_GT(err / t.base[0], 0.9);
}

struct BatchNormCase {
  std::vector<float> gamma, beta, mean, var;
  float eps = 1e-5f;
};

// Conv -> BatchNormalization with large gamma and small variance: ONNX Runtime's kernel (batch_norm.h) within base,
// ConvBNFusion's fold (conv_bn_fusion.cc) within legal, so their difference within base + legal; the same fold with
// a wrong epsilon beyond it.
TEST(Bounds, BatchNormKernelAndFoldHoldAndAWrongEpsilonDoesNot) {
  const int64_t c = 4, h = 5, taps = c * 9;
  const std::vector<float> x = Normal(c * h * h, 1, 0, 11), w = Normal(c * taps, 0.2, 0, 12), cb = Normal(c, 0.5, 0, 13);
  BatchNormCase bn{Normal(c, 5, 40, 14), Normal(c, 1, 0, 15), Normal(c, 0.5, 0.2, 16), {}, 1e-5f};
  for (int64_t k = 0; k < c; ++k) bn.var.push_back(static_cast<float>(1e-4 * (1 + k)));
  ModelBuilder b("conv_bn", 17);
  b.AddInput("x", DType::float32, {1, c, h, h});
  b.AddOutput("y", DType::float32, {1, c, h, h});
  b.AddInitializer(Tensor::FromFloats("w", {c, c, 3, 3}, w));
  b.AddInitializer(Tensor::FromFloats("cb", {c}, cb));
  b.AddInitializer(Tensor::FromFloats("g", {c}, bn.gamma));
  b.AddInitializer(Tensor::FromFloats("be", {c}, bn.beta));
  b.AddInitializer(Tensor::FromFloats("mu", {c}, bn.mean));
  b.AddInitializer(Tensor::FromFloats("var", {c}, bn.var));
  b.AddNode("Conv", {"x", "w", "cb"}, {"conv"}, {Attr::Ints("pads", {1, 1, 1, 1})});
  b.AddNode("BatchNormalization", {"conv", "g", "be", "mu", "var"}, {"y"}, {Attr::Float("epsilon", bn.eps)});
  const BoundedTensor t = EvaluateOne(b, {Tensor::FromFloats("x", {1, c, h, h}, x)}, "y");
  ASSERT_TRUE(t.uncovered.empty()) << t.uncovered;
  double worst_fold = 0, worst_wrong = 0;
  for (int64_t oc = 0; oc < c; ++oc) {
    // The kernel's scale and bias, and the fold's, in binary32 as ONNX Runtime computes them.
    const float inv = 1.0f / std::sqrt(bn.var[oc] + bn.eps), ns = inv * bn.gamma[oc], nb = bn.beta[oc] - bn.mean[oc] * ns;
    const float s = bn.gamma[oc] / std::sqrt(bn.var[oc] + bn.eps), fb = (cb[oc] - bn.mean[oc]) * s + bn.beta[oc];
    const float s_wrong = bn.gamma[oc] / std::sqrt(bn.var[oc] + 1e-3f);
    for (int64_t p = 0; p < h * h; ++p) {
      float conv = cb[oc], folded = fb, wrong = (cb[oc] - bn.mean[oc]) * s_wrong + bn.beta[oc];
      for (int64_t ic = 0; ic < c; ++ic) {
        for (int64_t k = 0; k < 9; ++k) {
          const int64_t r = p / h + k / 3 - 1, q = p % h + k % 3 - 1;
          if (r < 0 || r >= h || q < 0 || q >= h) continue;
          const float wk = w[(oc * c + ic) * 9 + k], xk = x[(ic * h + r) * h + q];
          conv += wk * xk;
          folded += (wk * s) * xk;
          wrong += (wk * s_wrong) * xk;
        }
      }
      const size_t i = static_cast<size_t>(oc * h * h + p);
      const float kernel = conv * ns + nb;
      EXPECT_LE(std::fabs(kernel - t.value[i]), t.base[i] * (1 + 1e-9)) << i;
      EXPECT_LE(std::fabs(std::fmaf(conv, ns, nb) - t.value[i]), t.base[i] * (1 + 1e-9)) << i;
      EXPECT_LE(std::fabs(folded - t.value[i]), t.legal[i] * (1 + 1e-9)) << i;
      worst_fold = std::max(worst_fold, std::fabs(folded - kernel) / (t.base[i] + t.legal[i]));
      worst_wrong = std::max(worst_wrong, std::fabs(wrong - kernel) / (t.base[i] + t.legal[i]));
    }
  }
  EXPECT_LE(worst_fold, 1);
  EXPECT_GT(worst_wrong, 1);  // epsilon 1e-3 instead of 1e-5 at variance 1e-4: far beyond
}

// A two-pass LayerNorm: every variant of the class (mean in float or double, divide or reciprocal) within the bound;
// the one-pass E[x^2] - mu^2 kernel beyond it. A dropped element is beyond it too, except in a long row with a large
// mean: there the mean's own allowance, gamma_(n+1) sum |x| / n (0.05 at n = 768, mean 1000), exceeds what one of 768
// elements moves the mean (7e-4): r = |delta| / (2 B) is printed per case.
struct LayerNormCase {
  int64_t n;
  double mean;
  bool dropped_detected;
};
TEST(Bounds, LayerNormTwoPassHoldsOnePassAndADroppedElementDoNot) {
  for (const LayerNormCase lc : {LayerNormCase{16, 1000, true}, LayerNormCase{64, 1000, true},
                                 LayerNormCase{768, 1000, false}, LayerNormCase{768, 0, true}}) {
    const int64_t n = lc.n;
    const std::vector<float> x = Normal(static_cast<size_t>(n), 0.5, lc.mean, static_cast<uint32_t>(n));
    const std::vector<float> g = Normal(static_cast<size_t>(n), 0.3, 1, 2), be = Normal(static_cast<size_t>(n), 0.1, 0, 3);
    const float eps = 1e-5f;
    ModelBuilder b("ln", 17);
    b.AddInput("x", DType::float32, {1, n});
    b.AddOutput("y", DType::float32, {1, n});
    b.AddInitializer(Tensor::FromFloats("g", {n}, g));
    b.AddInitializer(Tensor::FromFloats("be", {n}, be));
    b.AddNode("LayerNormalization", {"x", "g", "be"}, {"y"}, {Attr::Float("epsilon", eps), Attr::Int("axis", -1)});
    const BoundedTensor t = EvaluateOne(b, {Tensor::FromFloats("x", {1, n}, x)}, "y");
    ASSERT_TRUE(t.uncovered.empty()) << t.uncovered;
    auto two_pass = [&](bool double_mean, bool reciprocal, size_t skip) {
      double md = 0;
      float mf = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        if (j != skip) md += x[j], mf += x[j];
      }
      const float cnt = static_cast<float>(x.size() - (skip < x.size() ? 1 : 0));
      const float mu = double_mean ? static_cast<float>(md / cnt) : mf / cnt;
      float var = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        if (j != skip) var += (x[j] - mu) * (x[j] - mu);
      }
      const float sd = std::sqrt(var / cnt + eps), r = 1.0f / sd;
      std::vector<float> y(x.size());
      for (size_t j = 0; j < x.size(); ++j) y[j] = (reciprocal ? (x[j] - mu) * r : (x[j] - mu) / sd) * g[j] + be[j];
      return y;
    };
    auto one_pass = [&] {
      float m = 0, sq = 0;
      for (float v : x) m += v, sq += v * v;
      m /= static_cast<float>(n);
      const float sd = std::sqrt(std::max(sq / static_cast<float>(n) - m * m, 0.0f) + eps);
      std::vector<float> y(x.size());
      for (size_t j = 0; j < x.size(); ++j) y[j] = (x[j] - m) / sd * g[j] + be[j];
      return y;
    };
    auto r = [&](const std::vector<float>& y) {  // against the exact value: the fused side's bound once
      double worst = 0;
      for (size_t j = 0; j < y.size(); ++j) worst = std::max(worst, std::fabs(y[j] - t.value[j]) / t.base[j]);
      return worst;
    };
    for (bool dm : {false, true}) {
      for (bool rc : {false, true}) EXPECT_LE(r(two_pass(dm, rc, SIZE_MAX)), 1) << n << " " << dm << rc;
    }
    const double one = r(one_pass()), dropped = r(two_pass(true, false, 0));
    std::printf("LayerNorm n %lld mean %g: one-pass r %.3g, dropped element r %.3g\n", static_cast<long long>(n),
                lc.mean, one / 2, dropped / 2);
    if (lc.mean != 0) {
      EXPECT_GT(one, 1) << n;
    }
    EXPECT_EQ(dropped / 2 > 1, lc.dropped_detected) << n << " mean " << lc.mean;
  }
}

// Where a dropped term falls inside the bound: gamma_K grows with K, so a sum of K terms of equal magnitude t has
// B_baseline + B_step = 2 gamma_K K t, and the dropped term t is beyond it only while 2 K gamma_K < 1, i.e. K <= 2896
// (K (K + 1) < 2^23 for binary32). With normal terms a term of median magnitude does the same, between K = 2048
// (r 1.7) and 4096 (r 0.43).
TEST(Bounds, ADroppedTermFallsInsideTheBoundFromKAbout2900) {
  for (int64_t k = 256; k <= 16384; k *= 2) {
    ModelBuilder b("dot", 17);
    b.AddInput("x", DType::float32, {1, k});
    b.AddOutput("y", DType::float32, {1, 1});
    b.AddInitializer(Tensor::FromFloats("w", {k, 1}, std::vector<float>(static_cast<size_t>(k), 1.0f)));
    b.AddNode("MatMul", {"x", "w"}, {"y"});
    std::vector<float> ones(static_cast<size_t>(k));
    for (size_t i = 0; i < ones.size(); ++i) ones[i] = i % 2 == 0 ? 1.0f : -1.0f;
    const BoundedTensor equal = EvaluateOne(b, {Tensor::FromFloats("x", {1, k}, ones)}, "y");
    const double r_equal = 1.0 / (equal.base[0] + equal.legal[0]);
    std::vector<float> normal = Normal(static_cast<size_t>(k), 1, 0, static_cast<uint32_t>(k));
    const BoundedTensor nt = EvaluateOne(b, {Tensor::FromFloats("x", {1, k}, normal)}, "y");
    std::vector<float> mags(normal.size());
    for (size_t i = 0; i < mags.size(); ++i) mags[i] = std::fabs(normal[i]);
    std::nth_element(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(mags.size() / 2), mags.end());
    const double r_median = mags[mags.size() / 2] / (nt.base[0] + nt.legal[0]);
    std::printf("dropped term, K %lld: equal terms r %.3g, median normal term r %.3g\n", static_cast<long long>(k),
                r_equal, r_median);
    EXPECT_EQ(r_equal > 1, k <= 2896) << k;
  }
}

// Ops it does not cover leave their consumers without a bound, named; the rest stays bounded.
TEST(Bounds, AnUncoveredOpIsNamedAndOnlyItsConsumersLoseTheirBound) {
  ModelBuilder b("mixed", 17);
  b.AddInput("x", DType::float32, {1, 4});
  b.AddOutput("soft", DType::float32, {1, 4});
  b.AddOutput("relu", DType::float32, {1, 4});
  b.AddNode("Softmax", {"x"}, {"s"});
  b.AddNode("Relu", {"s"}, {"soft"});
  b.AddNode("Relu", {"x"}, {"relu"});
  const BoundEvaluator ev(onnx_io::ParseGraph(b.Serialize(), "test"));
  EXPECT_NE(ev.StaticallyUncovered("soft").find("Softmax"), std::string::npos);
  EXPECT_EQ(ev.StaticallyUncovered("relu"), "");
  const auto out = ev.Evaluate({Tensor::FromFloats("x", {1, 4}, {1, -2, 3, -4})}, {"soft", "relu"});
  EXPECT_NE(out[0].uncovered.find("Softmax"), std::string::npos);
  EXPECT_TRUE(out[1].uncovered.empty());
  EXPECT_EQ(out[1].base, (std::vector<double>{0, 0, 0, 0}));  // relu of exact inputs is exact
  // Within a memory budget only: beyond it the rest of the graph is named as such.
  const auto small = ev.Evaluate({Tensor::FromFloats("x", {1, 4}, {1, -2, 3, -4})}, {"relu"}, 16);
  EXPECT_NE(small[0].uncovered.find("a quarter of --max-bytes"), std::string::npos) << small[0].uncovered;
}

}  // namespace
}  // namespace fusediff::bisect

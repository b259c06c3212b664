// ONNX Runtime 1.30's f32 LayerNormalization and com.microsoft SkipLayerNormalization, run in process (one intra-op
// thread, graph optimizations disabled) against the reference's emulation of the declared order
// (docs/summation-orders.md, "ONNX Runtime 1.30"), bit for bit: Y, Mean and InvStdDev of every row. Skipped, with
// the reason, where onnxruntime-node's library is not installed (bash scripts/setup.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fusediff/fused/ort_runtime.h"
#include "fusediff/model/summation_order.h"
#include "fusediff/onnx/onnx_io.h"
#include "fusediff/reference/summation.h"
#include "../support/layer_norm_rows.h"
#include "test_util.h"

namespace fusediff::bisect {
namespace {

using onnx_io::DType;
using onnx_io::ModelBuilder;
using onnx_io::Tensor;
using Attr = ModelBuilder::Attribute;

constexpr float kEps = 1e-5f;

// The reason to skip, or empty where ONNX Runtime can run in this process.
std::string WhyNoRuntime() {
  if (!fused::ort::HaveInProcessRuntime()) return "built without ONNX Runtime's C API header";
  if (!std::filesystem::exists(fused::ort::LibraryPath())) {
    return fused::ort::LibraryPath() + " is missing (bash scripts/setup.sh)";
  }
  return "";
}

std::vector<float> Normal(std::mt19937_64& rng, int64_t n, float mean, float spread) {
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = mean + spread * normal(rng);
  return v;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.elements());
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// One model, one session, one run; the outputs as floats.
std::vector<std::vector<float>> RunOnce(const std::string& name, const std::string& bytes,
                                        const std::vector<Tensor>& feeds) {
  const std::string path = test::Write(test::Scratch("ln_order_" + name) / (name + ".onnx"), bytes);
  fused::ort::SessionSpec spec;
  spec.model = path;
  spec.level = "disabled";
  fused::ort::Runtime& ort = test::Runtime();
  const fused::ort::SessionHandle s = ort.Create(spec);
  const std::vector<Tensor> out = ort.Run(s, feeds);
  ort.Release(s);
  std::vector<std::vector<float>> floats;
  for (const Tensor& t : out) floats.push_back(Floats(t));
  return floats;
}

// ONNX LayerNormalization (opset 17, axis -1): Y, Mean, InvStdDev of rows x length.
std::vector<std::vector<float>> RunLayerNorm(const std::vector<float>& x, const std::vector<float>& gamma,
                                             const std::vector<float>& beta, int64_t rows, int64_t length) {
  ModelBuilder b("layer_norm", 17);
  b.AddInput("x", DType::float32, {rows, length});
  b.AddInput("gamma", DType::float32, {length});
  b.AddInput("beta", DType::float32, {length});
  b.AddNode("LayerNormalization", {"x", "gamma", "beta"}, {"y", "mean", "inv_std"},
            {Attr::Int("axis", -1), Attr::Float("epsilon", kEps)});
  b.AddOutput("y", DType::float32, {rows, length});
  b.AddOutput("mean", DType::float32, {rows, 1});
  b.AddOutput("inv_std", DType::float32, {rows, 1});
  return RunOnce("ln" + std::to_string(length), b.Serialize(),
                 {Tensor::FromFloats("x", {rows, length}, x), Tensor::FromFloats("gamma", {length}, gamma),
                  Tensor::FromFloats("beta", {length}, beta)});
}

// com.microsoft SkipLayerNormalization with bias: output, mean, inv_std_var, input_skip_bias_sum.
std::vector<std::vector<float>> RunSkipLayerNorm(const std::vector<float>& x, const std::vector<float>& skip,
                                                 const std::vector<float>& gamma, const std::vector<float>& beta,
                                                 const std::vector<float>& bias, int64_t rows, int64_t length) {
  ModelBuilder b("skip_layer_norm", 17);
  b.AddInput("x", DType::float32, {1, rows, length});
  b.AddInput("skip", DType::float32, {1, rows, length});
  b.AddInput("gamma", DType::float32, {length});
  b.AddInput("beta", DType::float32, {length});
  b.AddInput("bias", DType::float32, {length});
  b.AddNode("SkipLayerNormalization", {"x", "skip", "gamma", "beta", "bias"}, {"y", "mean", "inv_std", "sum"},
            {Attr::Float("epsilon", kEps)}, "com.microsoft");
  b.AddOutput("y", DType::float32, {1, rows, length});
  b.AddOutput("mean", DType::float32, {1, rows, 1});
  b.AddOutput("inv_std", DType::float32, {1, rows, 1});
  b.AddOutput("sum", DType::float32, {1, rows, length});
  return RunOnce("sln" + std::to_string(length), b.Serialize(),
                 {Tensor::FromFloats("x", {1, rows, length}, x), Tensor::FromFloats("skip", {1, rows, length}, skip),
                  Tensor::FromFloats("gamma", {length}, gamma), Tensor::FromFloats("beta", {length}, beta),
                  Tensor::FromFloats("bias", {length}, bias)});
}

// Whether ONNX Runtime's row r (y, mean, inv_std) is the reference's row under `order`, bit for bit; InvStdDev is
// fl32(1 / fl32(sqrt(fl32(var + eps)))), as every declared output form computes r.
bool RowMatches(const NormalizationOrder& order, const std::vector<float>& x, const std::vector<float>& gamma,
                const std::vector<float>& beta, const std::vector<std::vector<float>>& ort, int64_t r,
                int64_t length) {
  const std::span<const float> row(x.data() + r * length, static_cast<size_t>(length));
  const reference::LayerNormRow want = reference::LayerNormInOrder(order, row, gamma, beta, kEps);
  const float inv = 1.0f / std::sqrt(want.variance + kEps);
  if (!SameBits(want.mean, ort[1][r]) || !SameBits(inv, ort[2][r])) return false;
  for (int64_t c = 0; c < length; ++c) {
    if (!SameBits(want.y[c], ort[0][r * length + c])) return false;
  }
  return true;
}

const std::vector<int64_t> kLengths{1,   2,   3,   4,   5,   6,    7,    8,    9,    11,   12,   13,   14,
                                    15,  16,  17,  31,  63,  64,   65,   72,   100,  127,  128,  129,  255,
                                    511, 512, 513, 768, 1000, 1023, 1024, 1025, 2047, 2048, 3000, 4095, 4096};
int64_t RowsFor(int64_t length) { return length >= 1024 ? 30 : 120; }

// ONNX Runtime 1.30's LayerNormalization at every row length: ort_layernorm selects ort from 8 features and
// ort_short below (docs/summation-orders.md); the reference picks by the row's length.
NormalizationOrder Declared() { return named_normalization_order("ort_layernorm", "test"); }

// The declaration before ORT's source was read: sequential binary64 mean, the tail always fused.
NormalizationOrder Measured(int64_t length) {
  if (length < 8) return named_normalization_order("ort_short", "test");
  return parse_normalization_order(
      "mean_in_double;mean=sequential:nofma:prod64:acc64;"
      "var=blocked(8x1,halve.halve.halve,tail_after_fold):fma:prod32:acc32;centered_times_inv:fma",
      "test");
}

struct Counts {
  int64_t rows = 0, declared = 0, measured = 0;
  std::string misses;  // "length:rows missed" under the earlier declaration
};

TEST(OrtLayerNormOrder, LayerNormalizationIsBitExactUnderItsDeclaredOrder) {
  if (const std::string why = WhyNoRuntime(); !why.empty()) GTEST_SKIP() << why;
  std::mt19937_64 rng(30);
  Counts n;
  for (const int64_t length : kLengths) {
    const int64_t rows = RowsFor(length);
    const std::vector<float> x = test_support::ThreeRegimeRows(rng, rows, length);
    const std::vector<float> gamma = Normal(rng, length, 1, 0.5f), beta = Normal(rng, length, 0, 1);
    const std::vector<std::vector<float>> ort = RunLayerNorm(x, gamma, beta, rows, length);
    ASSERT_EQ(ort.size(), 3u);
    int64_t declared = 0, measured = 0;
    for (int64_t r = 0; r < rows; ++r) {
      declared += RowMatches(Declared(), x, gamma, beta, ort, r, length) ? 1 : 0;
      measured += RowMatches(Measured(length), x, gamma, beta, ort, r, length) ? 1 : 0;
    }
    EXPECT_EQ(declared, rows) << "length " << length;
    if (measured != rows) n.misses.append(" ").append(std::to_string(length)).append(":").append(std::to_string(rows - measured));
    n.rows += rows;
    n.declared += declared;
    n.measured += measured;
  }
  std::printf("ONNX Runtime LayerNormalization: %lld of %lld rows bit-exact (Y, Mean, InvStdDev) under "
              "ort_layernorm (ort / ort_short by length); %lld under the earlier measured declaration (missed, length:rows:%s)\n",
              static_cast<long long>(n.declared), static_cast<long long>(n.rows),
              static_cast<long long>(n.measured), n.misses.c_str());
  EXPECT_EQ(n.rows, 4050);
  EXPECT_EQ(n.declared, n.rows);
  // The earlier declaration (tail always fused) misses rows whose variance tail holds 4 to 7 terms.
  EXPECT_EQ(n.misses, " 12:6 13:3 14:3 15:3 63:1 100:1 255:1");
}

// com.microsoft SkipLayerNormalization with bias: ORT normalizes s = fl32(fl32(x + skip) + bias) (its
// input_skip_bias_sum output, bit for bit), and that row in `ort_short`'s order (sequential binary32 Welford,
// centered_over_sqrt) at every length, the MLAS kernel never. The other add order and `ort` are caught.
TEST(OrtLayerNormOrder, SkipLayerNormalizationIsSkipFirstThenWelfordAtEveryLength) {
  if (const std::string why = WhyNoRuntime(); !why.empty()) GTEST_SKIP() << why;
  std::mt19937_64 rng(31);
  const NormalizationOrder welford = named_normalization_order("ort_short", "test");
  int64_t total = 0, skip_first = 0, bias_first = 0, stats = 0, under_ort = 0;
  for (const int64_t length : kLengths) {
    const int64_t rows = RowsFor(length);
    const std::vector<float> x = test_support::ThreeRegimeRows(rng, rows, length);
    const std::vector<float> skip = Normal(rng, rows * length, 0, 1);
    const std::vector<float> gamma = Normal(rng, length, 1, 0.5f), beta = Normal(rng, length, 0, 1);
    const std::vector<float> bias = Normal(rng, length, 0, 1);
    const std::vector<std::vector<float>> ort = RunSkipLayerNorm(x, skip, gamma, beta, bias, rows, length);
    ASSERT_EQ(ort.size(), 4u);
    std::vector<float> sum(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      bool a = true, b = true;
      for (int64_t c = 0; c < length; ++c) {
        const size_t i = static_cast<size_t>(r * length + c);
        sum[i] = (x[i] + skip[i]) + bias[c];  // fl32 twice: -ffp-contract=off
        a = a && SameBits(sum[i], ort[3][i]);
        b = b && SameBits((x[i] + bias[c]) + skip[i], ort[3][i]);
      }
      skip_first += a ? 1 : 0;
      bias_first += b ? 1 : 0;
      const bool exact = RowMatches(welford, sum, gamma, beta, ort, r, length);
      EXPECT_TRUE(exact) << "length " << length << " row " << r;
      stats += exact ? 1 : 0;
      under_ort += RowMatches(Declared(), sum, gamma, beta, ort, r, length) ? 1 : 0;
    }
    total += rows;
  }
  std::printf("ONNX Runtime SkipLayerNormalization: sum (x + skip) + bias in %lld of %lld rows, (x + bias) + skip in "
              "%lld; Y, Mean, InvStdDev bit-exact under ort_short in %lld rows, under ort_layernorm (ort / ort_short by "
              "length) in %lld\n",
              static_cast<long long>(skip_first), static_cast<long long>(total), static_cast<long long>(bias_first),
              static_cast<long long>(stats), static_cast<long long>(under_ort));
  EXPECT_EQ(total, 4050);
  EXPECT_EQ(skip_first, total);
  EXPECT_EQ(stats, total);
  EXPECT_EQ(bias_first, 1363);  // rows where both orders round alike (length 1 and small rows, mostly)
  EXPECT_EQ(under_ort, 841);    // the 840 rows below 8 (ort_short there) and 1 row of 8
}

}  // namespace
}  // namespace fusediff::bisect

// oneDNN 2.6.3's f32 layer_normalization_forward against the reference's emulation of its declared order
// (docs/summation-orders.md), bit for bit: y, mean and variance of every row. The declared order is picked by the
// implementation that ran (impl_info_str) and the ISA oneDNN dispatches to, never by the host CPU: ctest runs this
// under each DNNL_MAX_CPU_ISA cap (tests/onednn/tests.cmake). Rows whose sums overflow binary32 follow the declared
// order too (an infinite variance gives y = beta, an infinite mean y = NaN).
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/summation_order.h"
#include "fusediff/reference/summation.h"
#include "../support/layer_norm_rows.h"

namespace fusediff {
namespace {

using dnnl::memory;

bool AtLeastAvx2(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  for (const I i : {I::avx2, I::avx2_vnni, I::avx512_core, I::avx512_core_vnni, I::avx512_core_bf16,
                    I::avx512_core_amx}) {
    if (isa == i) return true;
  }
  return false;
}

// The declared order of each implementation (docs/summation-orders.md, with oneDNN 2.6.3's file:line):
//   simple_layer_normalization, AVX2 and above: the f32 jit kernel (x64/jit_uni_layer_normalization_kernels.cpp);
//   simple_layer_normalization below AVX2: the C++ kernel's `omp simd` reductions (simple_layer_normalization_
//   kernels.cpp:45-56), the order GCC gave Debian's build;
//   lnorm_ref: sequential (ref_layer_normalization.cpp:107-126).
std::optional<NormalizationOrder> DeclaredOrder(const std::string& impl, dnnl::cpu_isa isa) {
  const auto order = [](const char* text) { return parse_normalization_order(text, "oneDNN layer norm"); };
  if (impl == "simple_layer_normalization:any" && AtLeastAvx2(isa)) {
    return order("two_pass;mean=blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32;"
                 "var=blocked(8x8,halve.adjacent.adjacent,tail_after_fold):fma:prod32:acc32;centered_times_inv:fma");
  }
  if (impl == "simple_layer_normalization:any") {
    return order("two_pass;mean=blocked(4x1,sequential,tail_into_lane0):nofma:prod32:acc32;"
                 "var=blocked(4x1,sequential,tail_into_lane0):nofma:prod32:acc32;scale_times_inv:nofma");
  }
  if (impl == "lnorm_ref:any") {
    return order("two_pass;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;scale_over_sqrt:nofma");
  }
  return std::nullopt;
}

struct LnormRun {
  std::string impl;
  std::vector<float> y, mean, variance;
  std::vector<float> beta;  // the run's shift
};

// oneDNN's forward_training (mean and variance are outputs) with use_scale | use_shift on rows x rows x length,
// row-major (`ab`, the simple implementation) or column-major (`ba`: only lnorm_ref takes it).
LnormRun RunOneDnn(const std::vector<float>& x, const std::vector<float>& gamma, const std::vector<float>& beta,
                   int64_t rows, int64_t length, float eps, bool column_major) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc data({rows, length}, memory::data_type::f32,
                          column_major ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc stat({rows}, memory::data_type::f32, memory::format_tag::a);
  const dnnl::layer_normalization_forward::desc desc(
      dnnl::prop_kind::forward_training, data, stat, eps,
      dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
  const dnnl::layer_normalization_forward::primitive_desc pd(desc, engine);
  LnormRun run{pd.impl_info_str(), std::vector<float>(x.size()), std::vector<float>(rows), std::vector<float>(rows),
               beta};
  std::vector<float> src = x;  // in memory order
  if (column_major) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < length; ++c) src[c * rows + r] = x[r * length + c];
  }
  std::vector<float> dst(x.size()), g = gamma, b = beta;
  const memory::desc channel({length}, memory::data_type::f32, memory::format_tag::a);
  dnnl::layer_normalization_forward(pd).execute(
      stream, {{DNNL_ARG_SRC, memory(data, engine, src.data())},
               {DNNL_ARG_DST, memory(data, engine, dst.data())},
               {DNNL_ARG_SCALE, memory(channel, engine, g.data())},
               {DNNL_ARG_SHIFT, memory(channel, engine, b.data())},
               {DNNL_ARG_MEAN, memory(stat, engine, run.mean.data())},
               {DNNL_ARG_VARIANCE, memory(stat, engine, run.variance.data())}});
  stream.wait();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < length; ++c) {
      run.y[r * length + c] = column_major ? dst[c * rows + r] : dst[r * length + c];
    }
  return run;
}

using test_support::LnRowRegime;
using test_support::SameValueOrBothNan;

struct Tally {
  int64_t rows = 0, exact_rows = 0;
  std::string first_mismatch;
};

// Every row of x (rows x length), emulated under the implementation's declared order, compared bit for bit (a NaN
// equal to any NaN: layer_norm_rows.h). Returns oneDNN's run, or nothing (a failure) without a declared order.
std::optional<LnormRun> CompareRows(std::mt19937_64& rng, const std::vector<float>& x, int64_t rows, int64_t length,
                                    bool column_major, Tally& tally, std::string& impl) {
  std::vector<float> gamma(static_cast<size_t>(length)), beta(static_cast<size_t>(length));
  std::normal_distribution<float> normal(0, 1);
  for (int64_t c = 0; c < length; ++c) {
    gamma[c] = 1 + 0.5f * normal(rng);
    beta[c] = normal(rng);
  }
  const float eps = 1e-5f;
  const LnormRun run = RunOneDnn(x, gamma, beta, rows, length, eps, column_major);
  impl = run.impl;
  const std::optional<NormalizationOrder> order = DeclaredOrder(run.impl, dnnl::get_effective_cpu_isa());
  if (!order.has_value()) {
    ADD_FAILURE() << "no declared order for oneDNN's " << run.impl;
    return std::nullopt;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(x.data() + r * length, static_cast<size_t>(length));
    const reference::LayerNormRow want = reference::LayerNormInOrder(*order, row, gamma, beta, eps);
    bool exact = SameValueOrBothNan(want.mean, run.mean[r]) && SameValueOrBothNan(want.variance, run.variance[r]);
    for (int64_t c = 0; c < length && exact; ++c) exact = SameValueOrBothNan(want.y[c], run.y[r * length + c]);
    ++tally.rows;
    tally.exact_rows += exact ? 1 : 0;
    if (!exact && tally.first_mismatch.empty()) {
      tally.first_mismatch = "length " + std::to_string(length) + " row " + std::to_string(r) + ": mean " +
                             std::to_string(run.mean[r]) + " vs " + std::to_string(want.mean) + ", variance " +
                             std::to_string(run.variance[r]) + " vs " + std::to_string(want.variance);
    }
  }
  return run;
}

bool CompareLength(std::mt19937_64& rng, int64_t rows, int64_t length, bool column_major, Tally& tally,
                   std::string& impl) {
  const std::vector<float> x = test_support::ThreeRegimeRows(rng, rows, length);
  return CompareRows(rng, x, rows, length, column_major, tally, impl).has_value();
}

const std::vector<int64_t> kLengths{1,   2,   3,   5,   7,   8,   9,   15,  16,   17,   31,   63,   64,   65,  72,
                                    100, 127, 128, 129, 255, 511, 512, 513, 768,  1000, 1023, 1024, 1025, 2047,
                                    2048, 3000, 4095, 4096};

void CheckEveryLength(bool column_major) {
  std::mt19937_64 rng(30);
  Tally tally;
  std::string impl;
  for (const int64_t length : kLengths) {
    if (!CompareLength(rng, length >= 1024 ? 30 : 120, length, column_major, tally, impl)) return;
  }
  std::printf("oneDNN layer norm %s at %s: %lld of %lld rows bit-exact (y, mean, variance) under its declared order\n",
              impl.c_str(), fused::onednn::EffectiveIsa().c_str(), static_cast<long long>(tally.exact_rows),
              static_cast<long long>(tally.rows));
  EXPECT_EQ(tally.exact_rows, tally.rows) << impl << ": first: " << tally.first_mismatch;
}

TEST(OneDnnLayerNormOrder, SimpleImplementationIsBitExactUnderItsDeclaredOrder) { CheckEveryLength(false); }

TEST(OneDnnLayerNormOrder, ReferenceImplementationIsBitExactUnderItsDeclaredOrder) { CheckEveryLength(true); }

// Rows whose statistics overflow binary32 (layer_norm_rows.h: |x| from 2^63 to 2^127), through the declared order
// bit for bit, and their outcome as the declaration implies it: a variance of +inf gives r = 1 / sqrt(inf) = 0 and
// y = beta (sum_of_squares_overflow: d^2 finite, their sum not); a mean of +inf gives x - mu = -inf and y = NaN
// (mean_overflow). squares_overflow and near_max_mixed are counted.
void CheckOverflowRows(bool column_major) {
  std::mt19937_64 rng(32);
  Tally tally;
  std::string impl;
  int64_t variance_inf = 0, y_beta = 0, mean_inf_or_nan = 0, y_nan = 0;
  const float inf = std::numeric_limits<float>::infinity();
  for (const int64_t length : {1, 2, 3, 7, 8, 9, 15, 16, 17, 64, 65, 127, 768, 1025, 4096}) {
    const int64_t per_regime = length >= 1024 ? 2 : 8;
    std::vector<float> x;
    std::vector<LnRowRegime> regime_of_row;
    for (const LnRowRegime regime : test_support::kLnOverflowRegimes) {
      for (int64_t k = 0; k < per_regime; ++k) {
        const std::vector<float> row = test_support::LayerNormRegimeRow(rng, regime, static_cast<size_t>(length));
        x.insert(x.end(), row.begin(), row.end());
        regime_of_row.push_back(regime);
      }
    }
    const int64_t rows = static_cast<int64_t>(regime_of_row.size());
    const std::optional<LnormRun> compared = CompareRows(rng, x, rows, length, column_major, tally, impl);
    if (!compared) return;
    const LnormRun& run = *compared;
    for (int64_t r = 0; r < rows; ++r) {
      bool all_beta = true, all_nan = true;
      for (int64_t c = 0; c < length; ++c) {
        all_beta = all_beta && run.y[r * length + c] == run.beta[c];
        all_nan = all_nan && std::isnan(run.y[r * length + c]);
      }
      variance_inf += run.variance[r] == inf ? 1 : 0;
      y_beta += run.variance[r] == inf && all_beta ? 1 : 0;
      mean_inf_or_nan += std::isfinite(run.mean[r]) ? 0 : 1;
      y_nan += all_nan ? 1 : 0;
      if (length < 2) continue;  // one value: variance 0
      if (regime_of_row[r] == LnRowRegime::sum_of_squares_overflow) {
        EXPECT_EQ(run.mean[r], 0.0f) << "length " << length;
        EXPECT_EQ(run.variance[r], inf) << "length " << length;
        EXPECT_TRUE(all_beta) << "length " << length << ": y is not beta under a variance of +inf";
      }
      if (regime_of_row[r] == LnRowRegime::mean_overflow) {
        EXPECT_EQ(run.mean[r], inf) << "length " << length;
        EXPECT_TRUE(all_nan) << "length " << length << ": y is not NaN under a mean of +inf";
      }
    }
  }
  std::printf("oneDNN layer norm %s at %s, overflow rows: %lld of %lld rows bit-exact (y, mean, variance; NaN as "
              "NaN) under its declared order; variance +inf in %lld (y = beta in %lld), mean not finite in %lld, y all "
              "NaN in %lld\n",
              impl.c_str(), fused::onednn::EffectiveIsa().c_str(), static_cast<long long>(tally.exact_rows),
              static_cast<long long>(tally.rows), static_cast<long long>(variance_inf), static_cast<long long>(y_beta),
              static_cast<long long>(mean_inf_or_nan), static_cast<long long>(y_nan));
  EXPECT_EQ(tally.exact_rows, tally.rows) << impl << ": first: " << tally.first_mismatch;
}

TEST(OneDnnLayerNormOrder, SimpleImplementationFollowsItsOrderThroughOverflow) { CheckOverflowRows(false); }

TEST(OneDnnLayerNormOrder, ReferenceImplementationFollowsItsOrderThroughOverflow) { CheckOverflowRows(true); }

}  // namespace
}  // namespace fusediff

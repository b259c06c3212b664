// oneDNN 2.6.3's bf16 layer_normalization_forward (src and dst bf16; mean, variance, gamma and beta f32) against the
// reference's emulation of its declared order on the same bf16 rows (docs/summation-orders.md, "bf16"): y as bf16
// bits, mean and variance as binary32 bits, every row. The declaration follows the implementation that ran
// (impl_info_str) and the ISA oneDNN dispatches to, never the host CPU: ctest runs this under each DNNL_MAX_CPU_ISA
// cap (tests/onednn/tests.cmake); below avx512_core oneDNN offers no bf16 layer norm, and the tests that need one
// skip saying so.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/batchnorm.h"
#include "fusediff/model/summation_order.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/summation.h"
#include "../support/layer_norm_rows.h"

namespace fusediff {
namespace {

using dnnl::memory;
using I = dnnl::cpu_isa;
using test_support::LnRowRegime;

// platform::has_data_type_support(bf16) is mayiuse(avx512_core) (src/cpu/platform.cpp:100-104): both layer norm
// implementations check it (simple_layer_normalization.cpp:59, ref_layer_normalization.hpp:47).
bool OffersBf16(I isa) {
  return isa == I::avx512_core || isa == I::avx512_core_vnni || isa == I::avx512_core_bf16 || isa == I::avx512_core_amx;
}
// vcvtneps2bf16 where mayiuse(avx512_core_bf16), else bf16_emulation_t (jit_uni_layer_normalization_kernels.cpp:78,
// 141-162; for lnorm_ref's bfloat16_t stores, cpu/bfloat16.cpp:34-48 and jit_avx512_core_bf16cvt.hpp:195-212).
bool ConvertsNatively(I isa) { return isa == I::avx512_core_bf16 || isa == I::avx512_core_amx; }

// The declared convention of oneDNN's bf16 layer norm (docs/summation-orders.md), restated from oneDNN's source:
//   order: simple_layer_normalization's jit kernel on the bf16 values, exact in binary32 (vpmovzxwd + vpslld 16,
//          jit_uni_layer_normalization_kernels.cpp:124-138), 16-lane sums (181, reduce() 414-424:
//          onednn_jit_bf16); lnorm_ref's sequential sums on the upconverted values
//          (ref_layer_normalization.cpp:107-126, onednn_ref);
//   output: y in binary32 rounded once to bf16, to nearest even: vcvtneps2bf16 flushes binary32 subnormals to +-0
//          (Intel SDM, VCVTNEPS2BF16: "input denormals are always treated as zero"); the emulation's integer
//          rounding keeps them (jit_avx512_core_bf16cvt.hpp:103-116); both quiet a NaN and keep infinities (its
//          vfixupimmps selector, 119-135);
//   shift: lnorm_ref adds sv = 0 without a shift (ref_layer_normalization.cpp:122, 126), the jit kernel adds nothing
//          (jit_uni_layer_normalization_kernels.cpp:291-296): a -0 stays -0 there.
struct Bf16Declaration {
  NormalizationOrder order;
  FloatBoundary output;
  bool adds_zero_without_shift = false;
};
std::optional<Bf16Declaration> DeclaredBf16(const std::string& impl, I isa) {
  const FloatBoundary output =
      ConvertsNatively(isa) ? flush_subnormals_float_boundary(FloatFormat::bf16) : FloatBoundary{FloatFormat::bf16};
  if (impl == "simple_layer_normalization:any") {
    return Bf16Declaration{named_normalization_order("onednn_jit_bf16", "test"), output, false};
  }
  if (impl == "lnorm_ref:any") return Bf16Declaration{named_normalization_order("onednn_ref", "test"), output, true};
  return std::nullopt;
}

// Which of gamma (use_scale) and beta (use_shift) a run has; tiny_scale: both, with gamma of about 2^-130 and beta 0,
// so that y lands in binary32's subnormal range and the output's subnormal rule shows.
struct Affine {
  const char* name;
  bool scale, shift, tiny_scale;
};
constexpr Affine kAffines[] = {{"scale+shift", true, true, false},
                               {"none", false, false, false},
                               {"scale", true, false, false},
                               {"shift", false, true, false},
                               {"tiny_scale", true, true, true}};

dnnl::normalization_flags Flags(const Affine& a) {
  auto flags = dnnl::normalization_flags::none;
  if (a.scale) flags |= dnnl::normalization_flags::use_scale;
  if (a.shift) flags |= dnnl::normalization_flags::use_shift;
  return flags;
}

// The primitive descriptor of a forward_training layer norm over rows x length values of `type`, row-major (`ab`:
// simple_layer_normalization) or column-major (`ba`: only lnorm_ref takes it); throws dnnl::error where oneDNN has
// no implementation.
dnnl::layer_normalization_forward::primitive_desc LayerNormPd(const dnnl::engine& engine, memory::data_type type,
                                                              int64_t rows, int64_t length, bool column_major,
                                                              dnnl::normalization_flags flags) {
  const memory::desc data({rows, length}, type, column_major ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc stat({rows}, memory::data_type::f32, memory::format_tag::a);
  const dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_training, data, stat, 1e-5f, flags);
  return dnnl::layer_normalization_forward::primitive_desc(desc, engine);
}

struct Bf16Run {
  std::string impl;
  std::vector<uint16_t> y;  // row-major
  std::vector<float> mean, variance;
};

// oneDNN's bf16 layer norm on x (bf16 bits, row-major), with gamma / beta where `affine` has them.
Bf16Run RunBf16(const std::vector<uint16_t>& x, int64_t rows, int64_t length, bool column_major, const Affine& affine,
                std::vector<float>& gamma, std::vector<float>& beta) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto pd = LayerNormPd(engine, memory::data_type::bf16, rows, length, column_major, Flags(affine));
  Bf16Run run{pd.impl_info_str(), std::vector<uint16_t>(x.size()), std::vector<float>(static_cast<size_t>(rows)),
              std::vector<float>(static_cast<size_t>(rows))};
  std::vector<uint16_t> src = x, dst(x.size());  // in memory order
  if (column_major) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < length; ++c) src[c * rows + r] = x[r * length + c];
  }
  const memory::desc channel({length}, memory::data_type::f32, memory::format_tag::a);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(pd.src_desc(), engine, src.data())},
                                       {DNNL_ARG_DST, memory(pd.dst_desc(), engine, dst.data())},
                                       {DNNL_ARG_MEAN, memory(pd.mean_desc(), engine, run.mean.data())},
                                       {DNNL_ARG_VARIANCE, memory(pd.variance_desc(), engine, run.variance.data())}};
  if (affine.scale) args.emplace(DNNL_ARG_SCALE, memory(channel, engine, gamma.data()));
  if (affine.shift) args.emplace(DNNL_ARG_SHIFT, memory(channel, engine, beta.data()));
  dnnl::layer_normalization_forward(pd).execute(stream, args);
  stream.wait();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < length; ++c) run.y[r * length + c] = column_major ? dst[c * rows + r] : dst[r * length + c];
  return run;
}

bool IsBf16Nan(uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x007Fu) != 0; }
// Equal bits, a NaN equal to any NaN (layer_norm_rows.h, SameValueOrBothNan).
bool SameBf16(uint16_t a, uint16_t b) { return a == b || (IsBf16Nan(a) && IsBf16Nan(b)); }

// What the overflow rows must show, whatever the order (docs/summation-orders.md, "Overflow"): a variance of +inf
// makes r = 1 / sqrt(inf) = 0, so y = (x - mu) 0 gamma + beta = beta; a mean of +inf makes x - mu = -inf and
// y = -inf 0 = NaN.
struct OverflowTally {
  int64_t variance_inf_rows = 0, y_is_beta_rows = 0, mean_inf_rows = 0, y_nan_rows = 0, nan_mean_rows = 0;
};

struct Tally {
  int64_t rows = 0, exact_rows = 0, elements = 0, exact_elements = 0, subnormal_y = 0;
  int64_t exact_under_other_output = 0;  // elements the other ISA's output rule (flush <-> keep subnormals) explains
  std::string first_mismatch;
  OverflowTally overflow;
};

const FloatBoundary kRoundNearestEven{FloatFormat::bf16};  // for the inputs and beta's expected bf16

// rows_per_regime rows of `length` bf16 values in every regime, row-major; the regime of each row.
std::vector<uint16_t> RegimeRows(std::mt19937_64& rng, int64_t length, int64_t rows_per_regime,
                                 std::vector<LnRowRegime>& regime_of_row) {
  std::vector<uint16_t> x;
  for (const LnRowRegime regime : test_support::kLnRowRegimes) {
    for (int64_t k = 0; k < rows_per_regime; ++k) {
      for (const float v : test_support::LayerNormRegimeRow(rng, regime, static_cast<size_t>(length))) {
        x.push_back(reference::F32ToBf16Bits(v, kRoundNearestEven));  // exact: the rows hold bf16 values
      }
      regime_of_row.push_back(regime);
    }
  }
  return x;
}

// One row's outcome under overflow, asserted on oneDNN's own output (length >= 2: one value has variance 0), and
// counted.
void CheckOverflowOutcome(LnRowRegime regime, int64_t length, float mean, float variance, bool y_is_beta, bool y_nan,
                          OverflowTally& o) {
  const float inf = std::numeric_limits<float>::infinity();
  if (length >= 2 && regime == LnRowRegime::sum_of_squares_overflow) {
    EXPECT_EQ(mean, 0.0f) << "length " << length;
    EXPECT_EQ(variance, inf) << "length " << length;
    EXPECT_TRUE(y_is_beta) << "length " << length << ": y is not beta (or 0) under a variance of +inf";
  }
  if (length >= 2 && regime == LnRowRegime::mean_overflow) {
    EXPECT_EQ(mean, inf) << "length " << length;
    EXPECT_TRUE(y_nan) << "length " << length << ": y is not NaN under a mean of +inf";
  }
  o.variance_inf_rows += variance == inf ? 1 : 0;
  o.y_is_beta_rows += variance == inf && std::isfinite(mean) && y_is_beta ? 1 : 0;
  o.mean_inf_rows += std::isinf(mean) ? 1 : 0;
  o.nan_mean_rows += std::isnan(mean) ? 1 : 0;
  o.y_nan_rows += y_nan ? 1 : 0;
}

// Checks one length under one affine: rows of every regime, each against its declared emulation.
void CompareLength(std::mt19937_64& rng, int64_t length, int64_t rows_per_regime, bool column_major,
                   const Affine& affine, Tally& tally, std::string& impl) {
  std::vector<LnRowRegime> regime_of_row;
  const std::vector<uint16_t> x = RegimeRows(rng, length, rows_per_regime, regime_of_row);
  const int64_t rows = static_cast<int64_t>(regime_of_row.size());
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> gamma(static_cast<size_t>(length)), beta(static_cast<size_t>(length));
  for (int64_t c = 0; c < length; ++c) {
    gamma[c] = affine.tiny_scale ? std::ldexp(1 + 0.5f * normal(rng), -130) : 1 + 0.5f * normal(rng);
    beta[c] = affine.tiny_scale ? 0.0f : normal(rng);
  }
  const Bf16Run run = RunBf16(x, rows, length, column_major, affine, gamma, beta);
  impl = run.impl;
  const std::optional<Bf16Declaration> declared = DeclaredBf16(run.impl, dnnl::get_effective_cpu_isa());
  ASSERT_TRUE(declared.has_value()) << "no declared bf16 order for oneDNN's " << run.impl;
  const FloatBoundary other_output = declared->output.subnormals == SubnormalInputs::keep
                                         ? flush_subnormals_float_boundary(FloatFormat::bf16)
                                         : FloatBoundary{FloatFormat::bf16};
  // The reference's operands: an absent gamma or beta is empty (no gamma is the same as 1s in every declared
  // output), or 0s where the kernel adds 0 without a shift.
  const std::vector<float> zeros(static_cast<size_t>(length), 0.0f);
  const std::span<const float> g = affine.scale ? std::span<const float>(gamma) : std::span<const float>();
  const std::span<const float> b = affine.shift                        ? std::span<const float>(beta)
                                   : declared->adds_zero_without_shift ? std::span<const float>(zeros)
                                                                       : std::span<const float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(static_cast<size_t>(length));
    for (int64_t c = 0; c < length; ++c) row[c] = reference::Bf16BitsToF32(x[r * length + c]);
    const reference::LayerNormRow want = reference::LayerNormInOrder(declared->order, row, g, b, 1e-5f);
    bool exact = test_support::SameValueOrBothNan(want.mean, run.mean[r]) &&
                 test_support::SameValueOrBothNan(want.variance, run.variance[r]);
    bool y_is_beta = true, y_nan = true;
    for (int64_t c = 0; c < length; ++c) {
      const uint16_t got = run.y[r * length + c];
      const bool same = SameBf16(reference::F32ToBf16Bits(want.y[c], declared->output), got);
      tally.exact_elements += same ? 1 : 0;
      tally.exact_under_other_output += SameBf16(reference::F32ToBf16Bits(want.y[c], other_output), got) ? 1 : 0;
      exact = exact && same;
      tally.subnormal_y += std::fpclassify(want.y[c]) == FP_SUBNORMAL ? 1 : 0;
      const float beta_or_zero = affine.shift ? beta[c] : 0.0f;
      y_is_beta = y_is_beta && reference::Bf16BitsToF32(got) ==
                                   reference::Bf16BitsToF32(reference::F32ToBf16Bits(beta_or_zero, declared->output));
      y_nan = y_nan && IsBf16Nan(got);
    }
    tally.elements += length;
    ++tally.rows;
    tally.exact_rows += exact ? 1 : 0;
    if (!exact && tally.first_mismatch.empty()) {
      tally.first_mismatch = std::string(test_support::to_string(regime_of_row[r])) + " row, length " +
                             std::to_string(length) + ": mean " + std::to_string(run.mean[r]) + " vs " +
                             std::to_string(want.mean) + ", variance " + std::to_string(run.variance[r]) + " vs " +
                             std::to_string(want.variance);
    }
    CheckOverflowOutcome(regime_of_row[r], length, run.mean[r], run.variance[r], y_is_beta, y_nan, tally.overflow);
  }
}

const std::vector<int64_t> kLengths{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 64, 768, 4096};

void CheckEveryLength(bool column_major) {
  const I isa = dnnl::get_effective_cpu_isa();
  if (!OffersBf16(isa)) {
    GTEST_SKIP() << "oneDNN 2.6.3 offers a bf16 layer norm from avx512_core only (platform.cpp:100-104); it dispatches "
                 << "to " << fused::onednn::EffectiveIsa() << " here";
  }
  for (const Affine& affine : kAffines) {
    std::mt19937_64 rng(30);
    Tally tally;
    std::string impl;
    std::string per_length;
    for (const int64_t length : kLengths) {
      const int64_t rows_before = tally.rows, exact_before = tally.exact_rows;
      CompareLength(rng, length, length >= 4096 ? 2 : 6, column_major, affine, tally, impl);
      if (::testing::Test::HasFatalFailure()) return;
      per_length.append(" ").append(std::to_string(length)).append(":");
      per_length.append(std::to_string(tally.exact_rows - exact_before)).append("/");
      per_length.append(std::to_string(tally.rows - rows_before));
    }
    const OverflowTally& o = tally.overflow;
    std::printf(
        "oneDNN bf16 layer norm %s at %s, %s: %lld of %lld rows, %lld of %lld elements bit-exact "
        "(%lld y subnormal in binary32; the other ISA's output rule: %lld exact); "
        "variance +inf in %lld rows (y = beta in %lld), mean +-inf in %lld, mean NaN in %lld, "
        "y all NaN in %lld\n  rows per length:%s\n",
        impl.c_str(), fused::onednn::EffectiveIsa().c_str(), affine.name, static_cast<long long>(tally.exact_rows),
        static_cast<long long>(tally.rows), static_cast<long long>(tally.exact_elements),
        static_cast<long long>(tally.elements), static_cast<long long>(tally.subnormal_y),
        static_cast<long long>(tally.exact_under_other_output), static_cast<long long>(o.variance_inf_rows),
        static_cast<long long>(o.y_is_beta_rows), static_cast<long long>(o.mean_inf_rows),
        static_cast<long long>(o.nan_mean_rows), static_cast<long long>(o.y_nan_rows), per_length.c_str());
    EXPECT_EQ(tally.exact_rows, tally.rows) << impl << " " << affine.name << ": first: " << tally.first_mismatch;
    EXPECT_EQ(tally.exact_elements, tally.elements) << impl << " " << affine.name;
    if (affine.tiny_scale) {  // the subnormal rule is what these rows test: the other one must fail them
      EXPECT_GT(tally.subnormal_y, 0) << "no subnormal y: the output's subnormal rule untested";
      EXPECT_LT(tally.exact_under_other_output, tally.elements) << "the output's subnormal rule is not discriminated";
    }
  }
}

TEST(OneDnnLayerNormBf16, SimpleImplementationIsBitExactUnderItsDeclaredOrder) { CheckEveryLength(false); }

TEST(OneDnnLayerNormBf16, ReferenceImplementationIsBitExactUnderItsDeclaredOrder) { CheckEveryLength(true); }

// The declared order is the bf16 kernel's own: the f32 kernel's (8 lanes) gives other statistics on these rows.
TEST(OneDnnLayerNormBf16, TheF32KernelsOrderIsAnother) {
  const I isa = dnnl::get_effective_cpu_isa();
  if (!OffersBf16(isa)) {
    GTEST_SKIP() << "oneDNN 2.6.3 offers a bf16 layer norm from avx512_core only; it dispatches to "
                 << fused::onednn::EffectiveIsa() << " here";
  }
  const NormalizationOrder bf16 = named_normalization_order("onednn_jit_bf16", "test");
  const NormalizationOrder f32 = named_normalization_order("onednn_jit", "test");
  std::mt19937_64 rng(31);
  int64_t rows = 0, differ = 0;
  for (const size_t length : {64u, 100u, 768u, 1000u}) {
    for (int k = 0; k < 30; ++k) {
      const std::vector<float> x = test_support::LayerNormRegimeRow(rng, LnRowRegime::normal, length);
      const reference::LayerNormRow a = reference::LayerNormInOrder(bf16, x, {}, {}, 1e-5f);
      const reference::LayerNormRow b = reference::LayerNormInOrder(f32, x, {}, {}, 1e-5f);
      differ += a.mean != b.mean || a.variance != b.variance ? 1 : 0;
      ++rows;
    }
  }
  std::printf("onednn_jit_bf16 and onednn_jit differ in mean or variance on %lld of %lld rows\n",
              static_cast<long long>(differ), static_cast<long long>(rows));
  EXPECT_GT(differ, 0);
}

// Where oneDNN offers bf16 (and f16) at all, at whatever ISA it dispatches to: bf16 exactly from avx512_core, for
// both layouts; f16 never (platform.cpp:108: has_data_type_support(f16) is false; cpu_layer_normalization_list.cpp
// :34-37 instantiates f32 and bf16 only).
TEST(OneDnnLayerNormBf16, Bf16IsOfferedFromAvx512CoreAndF16Never) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const bool offers = OffersBf16(dnnl::get_effective_cpu_isa());
  for (const bool column_major : {false, true}) {
    for (const memory::data_type type : {memory::data_type::bf16, memory::data_type::f16}) {
      const bool expected = type == memory::data_type::bf16 && offers;
      std::string outcome;
      try {
        const auto pd = LayerNormPd(engine, type, 4, 16, column_major,
                                    dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
        outcome = pd.impl_info_str();
      } catch (const dnnl::error& e) {
        EXPECT_EQ(e.status, dnnl_unimplemented) << e.what();
      }
      std::printf("%s layer norm, %s, at %s: %s\n", type == memory::data_type::bf16 ? "bf16" : "f16",
                  column_major ? "ba" : "ab", fused::onednn::EffectiveIsa().c_str(),
                  outcome.empty() ? "unimplemented" : outcome.c_str());
      EXPECT_EQ(!outcome.empty(), expected) << (column_major ? "ba" : "ab");
      if (expected) {
        EXPECT_EQ(outcome, column_major ? "lnorm_ref:any" : "simple_layer_normalization:any");
      }
    }
  }
}

}  // namespace
}  // namespace fusediff

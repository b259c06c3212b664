// The declared summation and normalization orders (model/summation_order.h): canonical text round-trips, and bad
// text is an InputError that names the field and what was expected.
#include <gtest/gtest.h>

#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/summation_order.h"

namespace fusediff {
namespace {

SummationOrder OneDnnJitMean() {
  SummationOrder order;
  order.shape = SumShape::blocked;
  order.lanes = 8;
  order.unroll = 8;
  order.lane_fold = {LaneFoldStep::halve, LaneFoldStep::adjacent, LaneFoldStep::adjacent};
  return order;
}

TEST(SummationOrder, CanonicalTextRoundTrips) {
  for (const std::string text : {"sequential:nofma:prod32:acc32", "pairwise(8):nofma:prod64:acc64",
                                 "blocked(8x8,halve.adjacent.adjacent,tail_after_fold):fma:prod32:acc32",
                                 "blocked(4x1,sequential,tail_into_lane0):nofma:prod32:accbf16"}) {
    EXPECT_EQ(format_summation_order(parse_summation_order(text, "order")), text);
  }
  EXPECT_EQ(format_summation_order(OneDnnJitMean()), "blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32");
  EXPECT_EQ(parse_summation_order("blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32", "o"), OneDnnJitMean());
}

void ExpectError(const std::string& text, const std::string& expected) {
  try {
    parse_summation_order(text, "lnorm.mean");
    FAIL() << text << " parsed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(SummationOrder, BadTextNamesTheField) {
  ExpectError("sequential:nofma:prod32", "lnorm.mean: 'sequential:nofma:prod32': expected SHAPE:");
  ExpectError("random:nofma:prod32:acc32", "lnorm.mean.shape: unknown summation shape 'random'");
  ExpectError("pairwise(0):nofma:prod32:acc32", "lnorm.mean.shape: expected a positive integer leaf size, got '0'");
  ExpectError("pairwise:nofma:prod32:acc32", "lnorm.mean.shape: 'pairwise': expected sequential, pairwise(LEAF)");
  ExpectError("blocked(6x1,sequential,tail_after_fold):nofma:prod32:acc32", "lnorm.mean: blocked lane count must be a power of two");
  ExpectError("blocked(8x1,halve.halve,tail_after_fold):nofma:prod32:acc32", "a lane fold of 8 lanes takes 3 steps, got 2");
  ExpectError("blocked(8x1,halve.twist.halve,tail_after_fold):nofma:prod32:acc32", "unknown lane fold step 'twist'");
  ExpectError("blocked(8x1,sequential):nofma:prod32:acc32", "'blocked(8x1,sequential)': expected blocked(LANESxUNROLL,FOLD,TAIL)");
  ExpectError("blocked(8x1,sequential,tail_first):nofma:prod32:acc32", "unknown blocked tail 'tail_first' (expected tail_after_fold, tail_into_lane0, tail_after_fold_mul4)");
  ExpectError("sequential:fused:prod32:acc32", "lnorm.mean.contraction: unknown contraction 'fused' (expected nofma, fma)");
  ExpectError("sequential:fma:prod32:acc64", "fma contraction is declared for binary32 accumulators only");
  ExpectError("sequential:nofma:prod16:acc32", "lnorm.mean.product_precision: unknown product precision 'prod16'");
  ExpectError("sequential:nofma:prod32:acc16", "lnorm.mean.accumulator: unknown accumulator precision 'acc16'");
}

TEST(NormalizationOrder, CanonicalTextRoundTrips) {
  NormalizationOrder order;
  order.stats = NormalizationStats::two_pass;
  order.mean = OneDnnJitMean();
  order.variance = OneDnnJitMean();
  order.variance.contraction = Contraction::fma;
  order.output = NormalizationOutput::centered_times_inv;
  order.output_contraction = Contraction::fma;
  const std::string text = format_normalization_order(order);
  EXPECT_EQ(text,
            "two_pass;mean=blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32;"
            "var=blocked(8x8,halve.adjacent.adjacent,tail_after_fold):fma:prod32:acc32;centered_times_inv:fma");
  EXPECT_EQ(parse_normalization_order(text, "lnorm"), order);
  for (const auto stats : {NormalizationStats::two_pass, NormalizationStats::mean_in_double,
                           NormalizationStats::welford, NormalizationStats::one_pass}) {
    EXPECT_EQ(parse_normalization_stats(to_string(stats), "s"), stats);
  }
  for (const auto output : {NormalizationOutput::centered_times_inv, NormalizationOutput::scale_times_inv,
                            NormalizationOutput::scale_over_sqrt, NormalizationOutput::centered_over_sqrt}) {
    EXPECT_EQ(parse_normalization_output(to_string(output), "o"), output);
  }
  EXPECT_EQ(to_string(NormalizationOutput::centered_over_sqrt), "centered_over_sqrt");
}

TEST(NormalizationOrder, BadTextNamesTheField) {
  const auto error = [](const std::string& text) {
    try {
      parse_normalization_order(text, "lnorm");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  EXPECT_NE(error("two_pass;sequential:nofma:prod32:acc32").find("lnorm: 'two_pass;sequential"), std::string::npos);
  EXPECT_NE(error("three_pass;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;scale_over_sqrt:nofma")
                .find("lnorm.stats: unknown normalization statistics 'three_pass'"),
            std::string::npos);
  EXPECT_NE(error("welford;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;rsqrt:nofma")
                .find("lnorm.output: unknown normalization output 'rsqrt'"),
            std::string::npos);
  EXPECT_NE(error("welford;mean=sequential:nofma:prod32:acc32;var=pairwise(x):nofma:prod32:acc32;scale_over_sqrt:nofma")
                .find("lnorm.var.shape: expected a positive integer leaf size, got 'x'"),
            std::string::npos);
}

// A length selector (ONNX Runtime's LayerNormalization: MLAS from 8 features, Welford below): its text round-trips,
// each length gets its order, bad selectors name the field, and the exact-rows rule and the output bound, which do
// not look at lengths, treat it as its worst part.
TEST(NormalizationOrder, LengthSelectorChoosesByRowLength) {
  const NormalizationOrder ort = named_normalization_order("ort", "t"), short_rows = named_normalization_order("ort_short", "t");
  const NormalizationOrder selector = named_normalization_order("ort_layernorm", "t");
  EXPECT_EQ(selector.short_below, 8);
  ASSERT_EQ(selector.short_rows.size(), 1u);
  EXPECT_EQ(selector.short_rows[0], short_rows);
  EXPECT_EQ(format_normalization_order(selector),
            format_normalization_order(ort) + "|below8=" + format_normalization_order(short_rows));
  EXPECT_EQ(parse_normalization_order(format_normalization_order(selector), "t"), selector);
  EXPECT_EQ(format_declared_normalization_order(selector), "ort_layernorm");
  EXPECT_EQ(order_for_length(selector, 7), short_rows);
  EXPECT_EQ(order_for_length(selector, 8).stats, NormalizationStats::two_pass);
  EXPECT_EQ(order_for_length(selector, 4096).variance, ort.variance);
  EXPECT_EQ(&order_for_length(ort, 3), &ort);  // no selector: the order itself
  const auto error = [&](const std::string& selector_text) {
    try {
      parse_normalization_order(format_normalization_order(ort) + "|" + selector_text, "lnorm");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  const std::string welford = format_normalization_order(short_rows);
  for (const std::string& bad : {"below1=" + welford, "below4097=" + welford, "belowx=" + welford, "above8=" + welford,
                                "below8" + welford, "below8=" + welford + "|below4=" + welford}) {
    EXPECT_NE(error(bad).find("lnorm.below: "), std::string::npos) << bad << ": " << error(bad);
  }
  EXPECT_NE(error("below8=welford;x").find("lnorm.below: 'welford;x'"), std::string::npos) << error("below8=welford;x");
  EXPECT_EQ(error("below12=" + welford), "parsed");
  EXPECT_NE(normalization_bound_uncovered(selector).find("ort_layernorm (rows below 8 or from it): ort_short is welford"),
            std::string::npos)
      << normalization_bound_uncovered(selector);
  EXPECT_EQ(exact_rows_difference(selector, selector), "");
  EXPECT_NE(exact_rows_difference(selector, ort).find("is welford"), std::string::npos);
  NormalizationOrder two_pass_both = selector;
  two_pass_both.short_rows[0] = named_normalization_order("sequential", "t");
  EXPECT_EQ(normalization_bound_uncovered(two_pass_both), "");
  EXPECT_NE(exact_rows_difference(two_pass_both, ort).find("selects its order by row length"), std::string::npos);
}

// Exact rows (benchdnn-style): which declared orders must agree on them. The rule's soundness is tested on rows in
// tests/reference/summation_test.cpp (ExactRows.OrdersEqualOnExactRowsGiveTheSameOutputs).
TEST(ExactRowsDifference, OrdersDifferingInSummationOrderOnlyAreEqual) {
  const auto named = [](const char* name) { return named_normalization_order(name, "test"); };
  EXPECT_EQ(exact_rows_difference(named("ort"), named("onednn_jit")), "");  // both centered_times_inv:fma
  EXPECT_EQ(exact_rows_difference(named("onednn_jit"), named("ort")), "");
  EXPECT_EQ(exact_rows_difference(named("ort_short"), named("ort_short")), "");  // identical: trivially
  NormalizationOrder in_double = named("ort");
  in_double.stats = NormalizationStats::mean_in_double;
  in_double.variance = parse_summation_order("pairwise(4):nofma:prod64:acc64", "test");
  EXPECT_EQ(exact_rows_difference(in_double, named("onednn_jit")), "");
}

TEST(ExactRowsDifference, WhatExactnessDoesNotCoverIsNamed) {
  const auto named = [](const char* name) { return named_normalization_order(name, "test"); };
  EXPECT_NE(exact_rows_difference(named("ort"), named("onednn_cpp")).find("outputs are formed differently: "
                                                                          "centered_times_inv:fma against "
                                                                          "scale_times_inv:nofma"),
            std::string::npos);
  EXPECT_NE(exact_rows_difference(named("ort"), named("sequential")).find("centered_times_inv:nofma"), std::string::npos);
  EXPECT_NE(exact_rows_difference(named("ort"), named("onednn_ref")).find("scale_over_sqrt"), std::string::npos);
  EXPECT_NE(exact_rows_difference(named("ort"), named("ort_short")).find("ort_short is welford"), std::string::npos);
  NormalizationOrder one_pass = named("ort");
  one_pass.stats = NormalizationStats::one_pass;
  EXPECT_NE(exact_rows_difference(one_pass, named("ort")).find("is one_pass"), std::string::npos);
  NormalizationOrder other_one_pass = one_pass;
  other_one_pass.mean = parse_summation_order("sequential:nofma:prod32:acc32", "test");
  EXPECT_NE(exact_rows_difference(one_pass, other_one_pass).find("is one_pass"), std::string::npos);
  NormalizationOrder bf16 = named("onednn_jit");
  bf16.variance = parse_summation_order("sequential:nofma:prod32:accbf16", "test");
  EXPECT_NE(exact_rows_difference(named("onednn_jit"), bf16).find("bf16 accumulator"), std::string::npos);
  NormalizationOrder bf16_mean = named("onednn_jit");
  bf16_mean.mean = parse_summation_order("sequential:nofma:prod32:accbf16", "test");
  EXPECT_NE(exact_rows_difference(bf16_mean, named("ort")).find("bf16 accumulator"), std::string::npos);
  bf16_mean.stats = NormalizationStats::mean_in_double;  // the mean's order is not read: the bf16 sum is unused
  EXPECT_EQ(exact_rows_difference(bf16_mean, named("ort")), "");
  NormalizationOrder nofma = named("ort");
  nofma.output_contraction = Contraction::none;
  EXPECT_NE(exact_rows_difference(named("ort"), nofma).find("outputs are formed differently"), std::string::npos);
}

}  // namespace
}  // namespace fusediff

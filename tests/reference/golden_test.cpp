// Golden values from an independent system (mpmath, scripts/golden/make_golden.py): ActivationDecimal must
// agree to >= 40 significant digits at every point, and the double filter must stay within its claimed bound.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/model/quant.h"
#include "fusediff/reference/reference.h"
#include "test_util.h"

namespace fusediff::reference {
namespace {

using testing::cpp_int;
using testing::cpp_rational;

struct GoldenRow {
  std::string activation, alpha, x, f;
  int line = 0;
};

std::vector<GoldenRow> read_golden() {
  const std::string path = std::string(FUSEDIFF_TEST_DATA_DIR) + "/golden_activations.csv";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<GoldenRow> rows;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      EXPECT_EQ(line, "activation,alpha,x,f");
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> fields;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, ',');) fields.push_back(field);
    EXPECT_EQ(fields.size(), 4u) << path << ":" << number;
    if (fields.size() != 4) continue;
    rows.push_back(GoldenRow{fields[0], fields[1], fields[2], fields[3], number});
  }
  return rows;
}

Activation activation_of(const GoldenRow& row) {
  return Activation{parse_activation_kind(row.activation, "activation"), parse_float32(row.alpha, "alpha")};
}


// The comparator itself can fail: one digit off at the 30th place is a disagreement at 40 digits.
TEST(Golden, ComparatorDetectsDisagreement) {
  const std::string g = "-1.0043045892935330913030365544590743839478780814892e-30989693";
  EXPECT_TRUE(testing::decimals_agree("-1.00430458929353309130303655445907438394787808e-30989693", g, 40));
  EXPECT_FALSE(testing::decimals_agree("-1.00430458929353309130303655445917438394787808e-30989693", g, 40));
  EXPECT_FALSE(testing::decimals_agree("1.0043045892935330913030365544590743839478780814892e-30989693", g, 40));
  EXPECT_FALSE(testing::decimals_agree("-1.0043045892935330913030365544590743839478780814892e-30989692", g, 40));
  EXPECT_TRUE(testing::decimals_agree("0.99999999999999999999999999999999999999999999", "1.0", 40));
  EXPECT_TRUE(testing::decimals_agree("0", "0.0", 40));
  EXPECT_FALSE(testing::decimals_agree("0", "1e-300", 40));
}

TEST(Golden, EveryActivationHasAtLeastFiftyPoints) {
  const auto rows = read_golden();
  std::map<std::string, int> count;
  for (const auto& r : rows) ++count[r.activation];
  for (ActivationKind k : kAllActivations) EXPECT_GE(count[std::string(to_string(k))], 50) << to_string(k);
}

TEST(Golden, ActivationDecimalAgreesToFortyDigits) {
  const auto rows = read_golden();
  ASSERT_GT(rows.size(), 650u);
  for (const auto& row : rows) {
    const std::string got = ActivationDecimal(activation_of(row), row.x, 45);
    EXPECT_TRUE(testing::decimals_agree(got, row.f, 40))
        << "line " << row.line << ": " << row.activation << "(" << row.x << ") = " << got << ", mpmath " << row.f;
  }
}

// At the double nearest each golden x, the filter's f_d must be within its bound of the exact f(x_d)
// (computed by ActivationDecimal at the exact decimal expansion of x_d).
TEST(Golden, DoubleFilterStaysWithinItsMargin) {
  const auto rows = read_golden();
  int checked = 0;
  for (const auto& row : rows) {
    const Activation act = activation_of(row);
    const double x = std::stod(row.x);  // nearest double
    const FilterEvaluation fe = ActivationFilter(act, x);
    ASSERT_TRUE(fe.usable) << row.line;
    // Values below 10^-1100 (e.g. gelu_tanh(-1000) ~ 1e-30989693) are taken as 0 with that much slack: far
    // below the filter's absolute term 2^-1000 ~ 9e-302, and never expanded into a huge rational.
    const std::string text = ActivationDecimal(act, testing::exact_decimal(x), 40);
    const testing::DecimalParts parts = testing::split_decimal(text);
    const bool tiny = !parts.digits.empty() && parts.exponent < -1100;
    const cpp_rational exact_f = tiny ? cpp_rational(0) : testing::parse_decimal(text);
    const cpp_rational slack = tiny ? cpp_rational(1, boost::multiprecision::pow(cpp_int(10), 1100u)) : cpp_rational(0);
    const cpp_rational err = abs(testing::exact(fe.f) - exact_f);
    EXPECT_LE(err, testing::exact(fe.bound) + slack) << "line " << row.line << ": " << row.activation << "(" << row.x
                                             << ") filter " << fe.f << " bound " << fe.bound;
    // The bound is also not vacuous: relative 2^-36 (plus the tiny absolute term).
    EXPECT_LE(fe.bound, std::fabs(fe.f) * 0x1p-36 + 0x1p-1000 * std::max(1.0, std::fabs(x)) * 1.0000001);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(rows.size()));
}

}  // namespace
}  // namespace fusediff::reference

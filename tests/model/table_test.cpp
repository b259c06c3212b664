#include <gtest/gtest.h>

#include <memory>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/table.h"
#include "fusediff/model/tolerance.h"

namespace fusediff {
namespace {

TEST(TableModel, CanonicalKeyIsUnchangedWithoutATableAndNamesOneWhenGiven) {
  CaseSpec spec;
  spec.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8, false}, 0.0625f, 0};
  spec.convention.output.q = QuantParams{QuantType{ScalarType::int8, false}, 0.00390625f, -128};
  const std::string without = canonical_key(spec);
  EXPECT_EQ(without.find("table="), std::string::npos);
  auto table = std::make_shared<TableData>();
  table->lut.assign(256, 3);
  spec.table = table;
  EXPECT_EQ(canonical_key(spec), without + ";table=" + table_fingerprint_hex(*table));
  auto other = std::make_shared<TableData>(*table);
  other->lut[17] = 4;  // one entry differs: another fingerprint, another stream
  EXPECT_NE(table_fingerprint(*table), table_fingerprint(*other));
  // A replay string of a table case cannot be replayed without the file, and says so.
  const std::string replay = format_replay(ReplayKey{1, 0, spec, std::nullopt});
  try {
    parse_replay(replay);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("replay.table"), std::string::npos) << e.what();
  }
}

TEST(TableModel, KindFitsTheTypes) {
  Convention c;
  c.intermediate.q = QuantParams{QuantType{ScalarType::int16, false}, 0.001f, 0};
  c.output.q = QuantParams{QuantType{ScalarType::int16, false}, 0.001f, 0};
  EXPECT_EQ(table_kind_mismatch(TableKind::lut_interp, c), "");
  EXPECT_EQ(table_kind_mismatch(TableKind::pwl, c), "");
  EXPECT_NE(table_kind_mismatch(TableKind::lut, c).find("8-bit"), std::string::npos);
  c.output.q.zero_point = 1;
  EXPECT_NE(table_kind_mismatch(TableKind::lut_interp, c).find("output zero point 0"), std::string::npos);
  EXPECT_EQ(parse_table_kind("pwl", "f"), TableKind::pwl);
  EXPECT_THROW(parse_table_kind("builtin", "f"), InputError);  // a backend, not a table kind
  EXPECT_EQ(to_string(TableKind::pwl), "pwl");
}

TEST(TableModel, PwlDefaultToleranceByWidthAndSegmentCount) {
  EXPECT_EQ(default_pwl_tolerance(8, 16)->max_abs_lsb, 1);
  EXPECT_EQ(default_pwl_tolerance(8, 20)->max_abs_lsb, 1);    // between rows: the next smaller count's bound
  EXPECT_EQ(default_pwl_tolerance(16, 64)->max_abs_lsb, 6);
  EXPECT_EQ(default_pwl_tolerance(16, 100)->max_abs_lsb, 6);
  EXPECT_FALSE(default_pwl_tolerance(16, 8).has_value());     // fewer than measured: no default
}

}  // namespace
}  // namespace fusediff

// The oneDNN backend module (model/backend.h): its paths' words, shared sample key and declared conventions.
#include <gtest/gtest.h>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "../support/example_case.h"

namespace fusediff {
namespace {

using test_support::ExampleCase;

// Both oneDNN comparisons of one graph draw the same samples (fused=onednn in the sample key); the replay string
// keeps each one's own word.
TEST(CaseStream, OneDnnBackendsShareTheSampleKey) {
  CaseSpec fused = ExampleCase(), unfused = ExampleCase();
  fused.mutant = unfused.mutant = Mutant::none;
  fused.backend = "onednn";
  unfused.backend = "onednn_unfused";
  EXPECT_EQ(case_stream_id(fused), case_stream_id(unfused));
  EXPECT_NE(canonical_key(fused), canonical_key(unfused));
  EXPECT_NE(format_replay(ReplayKey{1, 2, unfused, std::nullopt}).find(";fused=onednn_unfused;"), std::string::npos);
  EXPECT_NE(case_stream_id(fused), case_stream_id(ExampleCase()));
}

// Both oneDNN paths declare binary32 post-ops; the built-in ones and every case's own convention stay exact, so
// sample keys hold, while the per-code table key tells the two arithmetics apart.
TEST(CaseSpec, OneDnnPathsDeclareBinary32PostOps) {
  CaseSpec builtin = ExampleCase(), fused = ExampleCase(), unfused = ExampleCase();
  builtin.mutant = fused.mutant = unfused.mutant = Mutant::none;
  for (CaseSpec* s : {&builtin, &fused, &unfused}) {
    s->convention.output.rounding = RoundingMode::half_to_even;
    s->convention.output.zero_point_order = ZeroPointOrder::before_rounding;
  }
  fused.backend = "onednn";
  unfused.backend = "onednn_unfused";
  EXPECT_EQ(declared_convention(builtin).post_ops, PostOpArithmetic::exact);
  EXPECT_EQ(declared_convention(fused).post_ops, PostOpArithmetic::binary32);
  EXPECT_EQ(declared_convention(unfused).post_ops, PostOpArithmetic::binary32);
  EXPECT_EQ(fused.convention.post_ops, PostOpArithmetic::exact);
  EXPECT_NE(describe(declared_convention(unfused)).find("post_ops binary32"), std::string::npos);
  EXPECT_EQ(describe(unfused.convention).find("post_ops"), std::string::npos);
  EXPECT_NE(activation_table_key(declared_convention(unfused)), activation_table_key(unfused.convention));
  Convention bad = declared_convention(unfused);
  bad.output.zero_point_order = ZeroPointOrder::after_rounding;
  EXPECT_THROW(validate(bad), InputError);
}

TEST(OneDnnBackend, OwnsBothPathsAndCapsItsDispatch) {
  CaseSpec s;
  parse_fused_path("onednn_unfused", "f", s);
  EXPECT_EQ(s.backend, "onednn_unfused");
  EXPECT_EQ(s.table_kind, TableKind::lut);
  EXPECT_FALSE(uses_table(s, TableKind::lut));
  EXPECT_EQ(&BackendOf(s), &fused::onednn::OneDnnBackend());
  EXPECT_EQ(fused::onednn::VariantOf(s), fused::onednn::OneDnnVariant::unfused);
  const DispatchControl control = fused::onednn::OneDnnBackend().dispatch();
  EXPECT_EQ(control.env_var, "ONEDNN_MAX_CPU_ISA");
  EXPECT_EQ(control.caps.front(), "SSE41");
  EXPECT_FALSE(fused::onednn::OneDnnBackend().KnownDefectsJson().empty());
}

}  // namespace
}  // namespace fusediff

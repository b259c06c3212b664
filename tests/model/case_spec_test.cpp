#include <gtest/gtest.h>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"

namespace fusediff {
namespace {

CaseSpec Example() {
  CaseSpec s;
  s.name = "gelu_erf.int8.lut.conv";
  s.convention.activation = make_activation(ActivationKind::gelu_erf);
  s.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.0470588244f, -1};
  s.convention.output.q = QuantParams{QuantType{ScalarType::int8, true}, 0.0242352933f, -121};
  s.convention.output.zero_point_order = ZeroPointOrder::before_rounding;
  s.mutant = Mutant::use_output_scale;
  return s;
}

TEST(Replay, FormatThenParseIsIdentity) {
  const ReplayKey key{42, 123456, Example(), std::nullopt};
  const std::string text = format_replay(key);
  const ReplayKey back = parse_replay(text);
  EXPECT_EQ(back.seed, 42u);
  EXPECT_EQ(back.sample, 123456u);
  EXPECT_EQ(back.spec.name, key.spec.name);
  EXPECT_EQ(back.spec.convention, key.spec.convention);
  EXPECT_EQ(back.spec.mutant, Mutant::use_output_scale);
  EXPECT_EQ(format_replay(back), text);
}

TEST(Replay, BadStringsNameTheField) {
  EXPECT_THROW(parse_replay("hello"), InputError);
  const std::string good = format_replay(ReplayKey{1, 2, Example(), std::nullopt});
  try {
    std::string bad = good;
    bad.replace(bad.find("act=gelu_erf"), 12, "act=gelu_xx");
    parse_replay(bad);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("replay.act"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_replay(good + ";extra=1"), InputError);
  EXPECT_THROW(parse_replay(good.substr(0, good.find(";mutant"))), InputError);
}

// One word names a fused path in every text: a table kind names the built-in backend, onednn* a oneDNN one.
TEST(FusedPath, NameAndParseRoundTrip) {
  for (const char* word : {"lut", "lut_interp", "pwl", "onednn", "onednn_unfused"}) {
    CaseSpec s;
    s.table_kind = TableKind::pwl;  // parse resets it: a oneDNN backend keeps the default lut
    parse_fused_path(word, "f", s);
    EXPECT_EQ(fused_path_name(s), word);
    EXPECT_EQ(is_onednn(s), std::string_view(word).starts_with("onednn")) << word;
  }
  CaseSpec s;
  parse_fused_path("onednn_unfused", "f", s);
  EXPECT_EQ(s.backend, Backend::onednn_unfused);
  EXPECT_EQ(s.table_kind, TableKind::lut);
  EXPECT_FALSE(uses_table(s, TableKind::lut));
  parse_fused_path("lut_interp", "f", s);
  EXPECT_EQ(s.backend, Backend::builtin);
  EXPECT_TRUE(uses_table(s, TableKind::lut_interp));
  try {
    parse_fused_path("builtin", "replay.fused", s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("replay.fused: unknown fused path 'builtin'"), std::string::npos) << e.what();
  }
}

// Both oneDNN comparisons of one graph draw the same samples (fused=onednn in the sample key); the replay string
// keeps each one's own word.
TEST(CaseStream, OneDnnBackendsShareTheSampleKey) {
  CaseSpec fused = Example(), unfused = Example();
  fused.mutant = unfused.mutant = Mutant::none;
  fused.backend = Backend::onednn;
  unfused.backend = Backend::onednn_unfused;
  EXPECT_EQ(case_stream_id(fused), case_stream_id(unfused));
  EXPECT_NE(canonical_key(fused), canonical_key(unfused));
  EXPECT_NE(format_replay(ReplayKey{1, 2, unfused, std::nullopt}).find(";fused=onednn_unfused;"), std::string::npos);
  EXPECT_NE(case_stream_id(fused), case_stream_id(Example()));
}

TEST(CaseStream, DependsOnConventionNotOnNameOrMutant) {
  CaseSpec a = Example(), b = Example();
  b.name = "other";
  b.mutant = Mutant::none;
  b.samples = 5;
  EXPECT_EQ(case_stream_id(a), case_stream_id(b));
  b.convention.output.q.zero_point = -120;
  EXPECT_NE(case_stream_id(a), case_stream_id(b));
}

// Both oneDNN paths declare binary32 post-ops; the built-in ones and every case's own convention stay exact, so
// sample keys hold, while the per-code table key tells the two arithmetics apart.
TEST(CaseSpec, OneDnnPathsDeclareBinary32PostOps) {
  CaseSpec builtin = Example(), fused = Example(), unfused = Example();
  builtin.mutant = fused.mutant = unfused.mutant = Mutant::none;
  for (CaseSpec* s : {&builtin, &fused, &unfused}) {
    s->convention.output.rounding = RoundingMode::half_to_even;
    s->convention.output.zero_point_order = ZeroPointOrder::before_rounding;
  }
  fused.backend = Backend::onednn;
  unfused.backend = Backend::onednn_unfused;
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

}  // namespace
}  // namespace fusediff

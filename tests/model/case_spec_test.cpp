#include <gtest/gtest.h>

#include "../support/example_case.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"

namespace fusediff {
namespace {

using test_support::ExampleCase;

TEST(Replay, FormatThenParseIsIdentity) {
  const ReplayKey key{42, 123456, ExampleCase(), std::nullopt};
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
  const std::string good = format_replay(ReplayKey{1, 2, ExampleCase(), std::nullopt});
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

// One word names a fused path in every text: each registered backend's words (the built-in backend's are its table
// kinds) parse to its path and print back; a word no backend claims is refused naming the known ones, and kept as
// it is when results are read back.
TEST(FusedPath, NameAndParseRoundTrip) {
  for (const Backend* backend : RegisteredBackends()) {
    for (const std::string& word : backend->words()) {
      CaseSpec s;
      s.table_kind = TableKind::pwl;  // parse resets it: another backend keeps the default lut
      parse_fused_path(word, "f", s);
      EXPECT_EQ(fused_path_name(s), word);
      EXPECT_EQ(&BackendOf(s), backend) << word;
    }
  }
  CaseSpec s;
  parse_fused_path("lut_interp", "f", s);
  EXPECT_EQ(s.backend, kBuiltInPath);
  EXPECT_TRUE(uses_table(s, TableKind::lut_interp));
  try {
    parse_fused_path("builtin", "replay.fused", s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("replay.fused: unknown fused path 'builtin' (expected lut, lut_interp, pwl"),
              std::string::npos)
        << e.what();
  }
  read_fused_path("elsewhere", s);
  EXPECT_EQ(fused_path_name(s), "elsewhere");
  EXPECT_FALSE(uses_table(s, TableKind::lut));
  EXPECT_THROW(BackendOf(s), InputError);
  EXPECT_EQ(declared_convention(s), s.convention) << "a path no backend offers declares the graph's convention";
}

TEST(CaseStream, DependsOnConventionNotOnNameOrMutant) {
  CaseSpec a = ExampleCase(), b = ExampleCase();
  b.name = "other";
  b.mutant = Mutant::none;
  b.samples = 5;
  EXPECT_EQ(case_stream_id(a), case_stream_id(b));
  b.convention.output.q.zero_point = -120;
  EXPECT_NE(case_stream_id(a), case_stream_id(b));
}

}  // namespace
}  // namespace fusediff

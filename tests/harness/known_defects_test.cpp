// The known-defect ledger end to end without a library: the file's strict reading (exit 2 naming the field), the
// repository's own ledger, and how results carry the tallies (text, JSON round trip, merge, compare, JUnit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"
#include "fusediff/tables/known_defects_file.h"
#include "shard_env.h"

namespace fusediff {
namespace {

const char* kGood = R"({
  "format": "fusediff-known-defects/1",
  "defects": [{
    "id": "x",
    "library": "oneDNN",
    "versions": {"min": "2.6.0", "max": "2.6.3"},
    "implementations": ["conv: jit_deconvolution:avx512_core_vnni*"],
    "draw": {"rule": "jit_deconv_single_block_output_padding", "registers": 30},
    "model": "drop_last_input_column",
    "explanation": "why",
    "replay": "fusediff-replay/1;seed=1;sample=3;name=relu.int8.onednn.conv;source=conv;act=relu;alpha=0;requant=f32_zero_point_first;u=int8:0.05:3;u_round=half_to_even;y=int8:0.03:-100;y_round=half_to_even;zp_order=before_rounding;fused=onednn;mix=knee:1/saturation:1/quant_boundary:2/bulk:1;mutant=none",
    "test": "onednn_tests: OneDnnKernel.JitDeconvolutionWithOutputPaddingDropsTaps"
  }]
})";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string ParseError(const std::string& text) {
  try {
    tables::ParseKnownDefects(text, "ledger.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(KnownDefectsFile, ReadsAGoodLedger) {
  const KnownDefectLedger ledger = tables::ParseKnownDefects(kGood, "ledger.json");
  ASSERT_EQ(ledger.entries.size(), 1u);
  const KnownDefect& d = ledger.entries[0];
  EXPECT_EQ(d.id, "x");
  EXPECT_EQ(d.version_max, "2.6.3");
  EXPECT_EQ(d.implementations, std::vector<std::string>{"conv: jit_deconvolution:avx512_core_vnni*"});
  EXPECT_EQ(d.registers, 30);
  EXPECT_EQ(d.rule, DefectRule::jit_deconv_single_block_output_padding);
  EXPECT_EQ(d.model, DefectModel::drop_last_input_column);
  EXPECT_EQ(ledger.source, "ledger.json");
}

TEST(KnownDefectsFile, TheRepositorysLedgerParses) {
  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  ASSERT_GE(ledger.entries.size(), 1u);
  for (const KnownDefect& d : ledger.entries) {
    EXPECT_EQ(d.library, "oneDNN");
    EXPECT_FALSE(d.test.empty());
    EXPECT_EQ(parse_replay(d.replay).explicit_conv.has_value(), true) << d.replay;
  }
}

TEST(KnownDefectsFile, MalformedLedgersNameTheFieldAndWhatWasExpected) {
  struct Bad {
    std::string text;
    std::string fragment;
  };
  const std::string good = kGood;
  const std::vector<Bad> cases = {
      {"[]", "ledger.json: top level: expected a known-defect ledger"},
      {Replace(good, "fusediff-known-defects/1", "fusediff-known-defects/9"), "format: 'fusediff-known-defects/9' (expected fusediff-known-defects/1)"},
      {Replace(good, "\"id\": \"x\",", ""), "defects[0].id: missing"},
      {Replace(good, "\"id\": \"x\"", "\"id\": 7"), "defects[0].id: expected a string"},
      {Replace(good, "\"library\"", "\"libary\""), "defects[0].libary: unknown field"},
      {Replace(good, "\"max\": \"2.6.3\"", "\"max\": \"two\""), "defects[0].versions.max: 'two' (expected a dotted version"},
      {Replace(good, "\"min\": \"2.6.0\"", "\"min\": \"2.7\""), "defects[0].versions.min: '2.7' (expected a version <= max"},
      {Replace(good, "[\"conv: jit_deconvolution:avx512_core_vnni*\"]", "[]"), "defects[0].implementations: expected a non-empty array"},
      {Replace(good, "jit_deconv_single_block_output_padding", "bogus"), "defects[0].draw.rule: 'bogus' (expected jit_deconv_single_block_output_padding)"},
      {Replace(good, "\"registers\": 30", "\"registers\": 0"), "defects[0].draw.registers: 0 (expected a register budget"},
      {Replace(good, "\"registers\": 30", "\"registers\": \"30\""), "defects[0].draw.registers: expected an integer"},
      {Replace(good, "drop_last_input_column", "drop_everything"), "defects[0].model: 'drop_everything' (expected drop_last_input_column)"},
      {Replace(good, "\"replay\": \"fusediff-replay/1;", "\"replay\": \"fusediff-replay/7;"), "defects[0].replay: expected a replay string"},
      {Replace(good, "\"test\": \"onednn_tests: OneDnnKernel.JitDeconvolutionWithOutputPaddingDropsTaps\"", "\"test\": \"\""), "defects[0].test: expected a non-empty string"},
      {Replace(good, "\"id\": \"x\",", "\"id\": \"x\", \"id\": \"y\","), "ledger.json"},  // a repeated key (strict parse)
      {Replace(good, "}]\n}", "}, " + good.substr(good.find("{\n    \"id\""), good.find("}]") - good.find("{\n    \"id\"") + 1) + "]\n}"),
       "defects[1].id: 'x' (expected an id no other entry has)"},
  };
  for (const Bad& b : cases) {
    const std::string message = ParseError(b.text);
    EXPECT_NE(message.find(b.fragment), std::string::npos) << "got: " << message << "\nexpected: " << b.fragment;
  }
}

TEST(KnownDefectsFile, TheCliExitsTwoOnABadLedger) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "fusediff_bad_ledger.json";
  {
    std::ofstream out(file);
    out << Replace(kGood, "drop_last_input_column", "drop_everything");
  }
  test_support::ClearShardVariables();
  std::ostringstream out, err;
  const int code = cli::Main({"fusediff", "run", "--activation", "relu", "--fused", "lut", "--samples", "200",
                              "--known-defects", file.string()},
                             out, err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.str().find("defects[0].model: 'drop_everything'"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::Main({"fusediff", "run", "--known-defects", file.string(), "--no-known-defects"}, out2, err2), 2);
  std::filesystem::remove(file);
}

// A case with one ledger tally: `explained` samples of error -30 (and one judged sample of error 0).
CaseResult CaseWithKnownDefect(uint64_t explained, uint64_t first_sample) {
  CaseResult c;
  c.spec.name = "relu.int8.onednn.conv";
  c.spec.backend = Backend::onednn;
  c.spec.convention.activation = make_activation(ActivationKind::relu);
  c.spec.convention.requant = RequantVariant::f32_zero_point_first;
  c.spec.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8, false}, 0.05f, 3};
  c.spec.convention.intermediate.rounding = RoundingMode::half_to_even;
  c.spec.convention.output.q = QuantParams{QuantType{ScalarType::int8, false}, 0.03f, -100};
  c.spec.convention.output.rounding = RoundingMode::half_to_even;
  c.spec.convention.output.zero_point_order = ZeroPointOrder::before_rounding;
  c.spec.samples = 1000;
  c.tolerance.max_abs_lsb = 1;
  c.stats.add(WorstCase{first_sample + 100, 0, 0, 0, 5, 5, 0});
  KnownDefectTally t;
  t.id = "onednn-x";
  t.draws = 2;
  t.samples = 40;
  t.predicted_samples = explained + 1;
  for (uint64_t i = 0; i < explained; ++i) t.stats.add(WorstCase{first_sample + i, -30, 0, 0, 31, 1, 0});
  c.known_defects.push_back(t);
  finish_case_result(c, 1);
  return c;
}

RunResult RunOf(std::vector<CaseResult> cases) {
  RunResult run;
  run.seed = 1;
  run.cases = std::move(cases);
  return run;
}

TEST(KnownDefectResults, VerdictCountsAndText) {
  const CaseResult c = CaseWithKnownDefect(5, 0);
  EXPECT_EQ(c.verdict, Verdict::known_defect);
  EXPECT_NE(c.reason.find("onednn-x (5 samples)"), std::string::npos) << c.reason;
  EXPECT_EQ(compared_samples(c), 6u);
  ASSERT_EQ(c.known_defects[0].worst.size(), 5u);
  EXPECT_FALSE(c.known_defects[0].worst[0].replay.empty());
  const RunResult run = RunOf({c});
  EXPECT_FALSE(run.any_failure());
  const std::string text = reports::RenderTable(run, false);
  EXPECT_NE(text.find("known defect onednn-x: 5 samples in 1 cases (max |e| 30), not failing"), std::string::npos) << text;
  EXPECT_NE(text.find("1 known defect (not failing)"), std::string::npos) << text;
  const std::string junit = reports::ToJUnit(run);
  EXPECT_EQ(junit.find("<failure"), std::string::npos) << junit;
  EXPECT_NE(junit.find("property name=\"known_defect.onednn-x\" value=\"5 samples explained"), std::string::npos) << junit;
  EXPECT_NE(reports::ToHtml(run).find("Known defects (ledger)"), std::string::npos);
  EXPECT_NE(reports::ToMarkdown(run).find("Known defect onednn-x: reproduces"), std::string::npos);

  // A judged sample beyond tolerance still fails the case, known defect or not.
  CaseResult failing = CaseWithKnownDefect(5, 0);
  failing.stats.add(WorstCase{999, 2, 0, 0, 5, 7, 0});
  finish_case_result(failing, 1);
  EXPECT_EQ(failing.verdict, Verdict::fail);
  EXPECT_TRUE(RunOf({failing}).any_failure());
}

TEST(KnownDefectResults, NoLongerReproducesIsReported) {
  const CaseResult c = CaseWithKnownDefect(0, 0);
  EXPECT_TRUE(c.known_defects[0].no_longer_reproduces());
  EXPECT_EQ(c.verdict, Verdict::pass);
  const std::string text = reports::RenderTable(RunOf({c}), false);
  EXPECT_NE(text.find("known defect onednn-x: NO LONGER REPRODUCES: 2 draws"), std::string::npos) << text;
  const nlohmann::ordered_json j = reports::ToJson(RunOf({c}));
  EXPECT_EQ(j["cases"][0]["known_defects"][0]["status"], "no_longer_reproduces");
}

TEST(KnownDefectResults, JsonRoundTripAndExactMerge) {
  RunResult run = RunOf({CaseWithKnownDefect(5, 0)});
  const std::string text = reports::ToJson(run).dump(2);
  const RunResult back = reports::FromJson(nlohmann::json::parse(text), "results.json");
  ASSERT_EQ(back.cases.size(), 1u);
  const CaseResult& c = back.cases[0];
  EXPECT_EQ(c.verdict, Verdict::known_defect);
  ASSERT_EQ(c.known_defects.size(), 1u);
  EXPECT_EQ(c.known_defects[0].stats.overall, run.cases[0].known_defects[0].stats.overall);
  EXPECT_EQ(c.known_defects[0].draws, 2u);
  EXPECT_EQ(c.known_defects[0].predicted_samples, 6u);
  EXPECT_EQ(reports::ToJson(back).dump(2), text);  // what it reads back writes the same bytes

  // Two shards of one case: the tallies add exactly.
  CaseResult a = CaseWithKnownDefect(5, 0), b = CaseWithKnownDefect(3, 1000);
  b.known_defects[0].id = "onednn-x";
  merge_case_result(a, b, 1);
  ASSERT_EQ(a.known_defects.size(), 1u);
  EXPECT_EQ(a.known_defects[0].stats.overall.count(), 8u);
  EXPECT_EQ(a.known_defects[0].draws, 4u);
  EXPECT_EQ(a.known_defects[0].samples, 80u);
  EXPECT_EQ(a.known_defects[0].predicted_samples, 10u);
  EXPECT_EQ(a.verdict, Verdict::known_defect);
  EXPECT_NE(a.reason.find("(8 samples)"), std::string::npos) << a.reason;

  // A tampered status is refused.
  nlohmann::json edited = nlohmann::json::parse(text);
  edited["cases"][0]["known_defects"][0]["status"] = "no_longer_reproduces";
  EXPECT_THROW(reports::FromJson(edited, "results.json"), InputError);
}

TEST(KnownDefectResults, CompareReportsADefectThatDisappearsOrAppears) {
  const RunResult with = RunOf({CaseWithKnownDefect(5, 0)});
  const RunResult fixed = RunOf({CaseWithKnownDefect(0, 0)});
  const reports::CompareRules rules;
  const reports::RunComparison gone = reports::Compare(with, fixed, rules);
  EXPECT_TRUE(gone.any_regression());
  ASSERT_EQ(gone.cases.size(), 1u);
  ASSERT_FALSE(gone.cases[0].findings.empty());
  EXPECT_NE(gone.cases[0].findings[0].find("known defect onednn-x disappeared (5 -> 0 samples)"), std::string::npos)
      << gone.cases[0].findings[0];
  const reports::RunComparison appeared = reports::Compare(fixed, with, rules);
  EXPECT_TRUE(appeared.any_regression());
  EXPECT_NE(appeared.cases[0].findings.back().find("known defect onednn-x appeared (0 -> 5 samples)"), std::string::npos);
  EXPECT_FALSE(reports::Compare(with, with, rules).any_regression());
}

}  // namespace
}  // namespace fusediff

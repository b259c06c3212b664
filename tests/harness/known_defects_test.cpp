// The known-defect ledger end to end without a library: the file's strict reading (exit 2 naming the field) with
// draw rules and models registered here, as a backend registers its own, and how results carry the tallies (text,
// JSON round trip, merge, compare, JUnit). A library's own ledger is tested with its backend (tests/onednn).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
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

// Rules as a backend registers its own (DefectRules, model/backend.h): one per parameter shape the file reader checks.
const bool kRulesRegistered = [] {
  const auto any = [](const KnownDefect&, const ConvCase&, const DefectCallAttributes&) { return true; };
  RegisterDefectRule({"test_registers_rule", {"registers"}, false, any});
  RegisterDefectRule({"test_block_rule", {"block"}, false, any});
  RegisterDefectRule({"test_withheld_rule", {}, true, any});
  return true;
}();

const char* kGood = R"({
  "format": "fusediff-known-defects/1",
  "defects": [{
    "id": "x",
    "library": "SomeLib",
    "versions": {"min": "2.6.0", "max": "2.6.3"},
    "implementations": ["conv: jit_kernel:avx512_core_vnni*"],
    "draw": {"rule": "test_registers_rule", "registers": 30},
    "model": "drop_last_input_column",
    "explanation": "why",
    "replay": "fusediff-replay/1;seed=1;sample=3;name=relu.int8.lut.conv;source=conv;act=relu;alpha=0;requant=f32_zero_point_first;u=int8:0.05:3;u_round=half_to_even;y=int8:0.03:-100;y_round=half_to_even;zp_order=before_rounding;fused=lut;mix=knee:1/saturation:1/quant_boundary:2/bulk:1;mutant=none",
    "test": "somelib_tests: Kernel.DropsTaps"
  }]
})";

// Format 2: a documented behaviour with an ISA condition and the source_as_passed rule.
const char* kGood2 = R"({
  "format": "fusediff-known-defects/2",
  "defects": [{
    "id": "d",
    "kind": "documented_behaviour",
    "library": "SomeLib",
    "versions": {"min": "2.6.0", "max": "2.6.3"},
    "isas": ["avx2", "sse41"],
    "implementations": ["ip: x64:gemm_s8u8s32:jit"],
    "draw": {"rule": "source_as_passed", "source": "u8", "op": "conv2d", "weights_vector": false},
    "model": "int16_pairs_per_tap",
    "explanation": "why",
    "replay": "fusediff-replay/1;seed=1;sample=3;name=relu.int8.lut.conv;source=conv;act=relu;alpha=0;requant=f32_zero_point_first;u=int8:0.05:3;u_round=half_to_even;y=int8:0.03:-100;y_round=half_to_even;zp_order=before_rounding;fused=lut;mix=knee:1/saturation:1/quant_boundary:2/bulk:1;mutant=none",
    "test": "somelib_tests: PreVnni.*"
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
  EXPECT_EQ(d.implementations, std::vector<std::string>{"conv: jit_kernel:avx512_core_vnni*"});
  EXPECT_EQ(d.registers, 30);
  EXPECT_EQ(d.rule, "test_registers_rule");
  EXPECT_EQ(d.model, "drop_last_input_column");
  EXPECT_EQ(ledger.source, "ledger.json");
}

TEST(KnownDefectsFile, FormatTwoReadsKindsIsasAndTheSourceRule) {
  const KnownDefectLedger ledger = tables::ParseKnownDefects(kGood2, "ledger.json");
  ASSERT_EQ(ledger.entries.size(), 1u);
  const KnownDefect& d = ledger.entries[0];
  EXPECT_EQ(d.kind, LedgerKind::documented_behaviour);
  EXPECT_EQ(d.isas, (std::vector<std::string>{"avx2", "sse41"}));
  EXPECT_EQ(d.rule, "source_as_passed");
  EXPECT_EQ(d.source, ScalarType::uint8);
  EXPECT_EQ(d.op, ConvOp::conv2d);
  EXPECT_EQ(d.weights_vector, false);
  EXPECT_EQ(d.model, "int16_pairs_per_tap");
  // Format 1 has no kind: every entry a known defect.
  EXPECT_EQ(tables::ParseKnownDefects(kGood, "ledger.json").entries[0].kind, LedgerKind::known_defect);
  const std::string good = kGood2;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {Replace(good, "\"kind\": \"documented_behaviour\",", ""), "defects[0].kind: missing"},
      {Replace(good, "documented_behaviour", "feature"), "defects[0].kind: unknown ledger entry kind 'feature' (expected known_defect, documented_behaviour)"},
      {Replace(good, "\"source\": \"u8\"", "\"source\": \"u16\""), "defects[0].draw.source: 'u16' (expected u8 or s8)"},
      {Replace(good, "\"op\": \"conv2d\"", "\"op\": \"pool\""), "defects[0].draw.op: unknown op 'pool'"},
      {Replace(good, "\"weights_vector\": false", "\"weights_vector\": 0"), "defects[0].draw.weights_vector: expected true or false"},
      {Replace(good, "\"source\": \"u8\"", "\"registers\": 12"), "defects[0].draw.registers: unknown field for rule source_as_passed"},
      {Replace(good, "[\"avx2\", \"sse41\"]", "[]"), "defects[0].isas: expected a non-empty array of ISA globs"},
      {Replace(Replace(good, "fusediff-known-defects/2", "fusediff-known-defects/1"), "\"kind\": \"documented_behaviour\",", ""),
       "defects[0].isas: unknown field"},  // format 1 has neither kind nor isas
  };
  for (const auto& [text, fragment] : bad) {
    const std::string message = ParseError(text);
    EXPECT_NE(message.find(fragment), std::string::npos) << "got: " << message << "\nexpected: " << fragment;
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
      {Replace(good, "fusediff-known-defects/1", "fusediff-known-defects/9"), "format: 'fusediff-known-defects/9' (expected fusediff-known-defects/2 or fusediff-known-defects/1)"},
      {Replace(good, "\"id\": \"x\",", ""), "defects[0].id: missing"},
      {Replace(good, "\"id\": \"x\"", "\"id\": 7"), "defects[0].id: expected a string"},
      {Replace(good, "\"library\"", "\"libary\""), "defects[0].libary: unknown field"},
      {Replace(good, "\"max\": \"2.6.3\"", "\"max\": \"two\""), "defects[0].versions.max: 'two' (expected a dotted version"},
      {Replace(good, "\"min\": \"2.6.0\"", "\"min\": \"2.7\""), "defects[0].versions.min: '2.7' (expected a version <= max"},
      {Replace(good, "[\"conv: jit_kernel:avx512_core_vnni*\"]", "[]"), "defects[0].implementations: expected a non-empty array"},
      {Replace(good, "test_registers_rule", "bogus"), "defects[0].draw.rule: unknown draw rule 'bogus' (expected source_as_passed, "},
      {Replace(good, "\"registers\": 30", "\"registers\": 0"), "defects[0].draw.registers: 0 (expected a register budget"},
      {Replace(good, "\"registers\": 30", "\"registers\": \"30\""), "defects[0].draw.registers: expected an integer"},
      {Replace(good, "\"registers\": 30", "\"registers\": 30, \"block\": 16"), "defects[0].draw.block: unknown field for rule test_registers_rule"},
      {Replace(good, "\"rule\": \"test_registers_rule\", \"registers\": 30", "\"rule\": \"test_block_rule\", \"registers\": 30"), "defects[0].draw.registers: unknown field for rule test_block_rule"},
      {Replace(good, "\"rule\": \"test_registers_rule\", \"registers\": 30", "\"rule\": \"test_block_rule\""), "defects[0].draw.block: missing (required)"},
      {Replace(good, "\"rule\": \"test_registers_rule\", \"registers\": 30", "\"rule\": \"test_block_rule\", \"block\": 12"), "defects[0].draw.block: 12 (expected an ic/oc block of 4, 8 or 16)"},
      {Replace(good, "drop_last_input_column", "drop_everything"), "defects[0].model: unknown model 'drop_everything' (expected drop_last_input_column, halved_weights"},
      {Replace(good, "drop_last_input_column", "not_executed"), "defects[0].model: not_executed goes with a draw rule whose draws the path withholds (test_registers_rule is not one)"},
      {Replace(good, "\"rule\": \"test_registers_rule\", \"registers\": 30", "\"rule\": \"test_withheld_rule\""),
       "defects[0].model: not_executed goes with a draw rule whose draws the path withholds (test_withheld_rule is one)"},
      {Replace(good, "\"replay\": \"fusediff-replay/1;", "\"replay\": \"fusediff-replay/7;"), "defects[0].replay: expected a replay string"},
      {Replace(good, "\"test\": \"somelib_tests: Kernel.DropsTaps\"", "\"test\": \"\""), "defects[0].test: expected a non-empty string"},
      {Replace(good, "\"id\": \"x\",", "\"id\": \"x\", \"id\": \"y\","), "ledger.json"},  // a repeated key (strict parse)
      {Replace(good, "}]\n}", "}, " + good.substr(good.find("{\n    \"id\""), good.find("}]") - good.find("{\n    \"id\"") + 1) + "]\n}"),
       "defects[1].id: 'x' (expected an id no other entry has)"},
  };
  for (const Bad& b : cases) {
    const std::string message = ParseError(b.text);
    EXPECT_NE(message.find(b.fragment), std::string::npos) << "got: " << message << "\nexpected: " << b.fragment;
  }
  // The pair that belongs together parses.
  EXPECT_EQ(ParseError(Replace(Replace(good, "\"rule\": \"test_registers_rule\", \"registers\": 30",
                                       "\"rule\": \"test_withheld_rule\""),
                               "drop_last_input_column", "not_executed")),
            "");
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
  EXPECT_NE(err.str().find("defects[0].model: unknown model 'drop_everything'"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::Main({"fusediff", "run", "--known-defects", file.string(), "--no-known-defects"}, out2, err2), 2);
  std::filesystem::remove(file);
}

// A case with one ledger tally: `explained` samples of error -30 (and one judged sample of error 0).
CaseResult CaseWithKnownDefect(uint64_t explained, uint64_t first_sample) {
  CaseResult c;
  c.spec.name = "relu.int8.lut.conv";
  c.spec.backend = "builtin";
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
  t.id = "lib-x";
  t.stats.worst = WorstCases(kLedgerTallyWorst);  // as the driver keeps it
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
  EXPECT_NE(c.reason.find("lib-x (5 samples)"), std::string::npos) << c.reason;
  EXPECT_EQ(compared_samples(c), 6u);
  ASSERT_EQ(c.known_defects[0].worst.size(), kLedgerTallyWorst);
  EXPECT_FALSE(c.known_defects[0].worst[0].replay.empty());
  const RunResult run = RunOf({c});
  EXPECT_FALSE(run.any_failure());
  const std::string text = reports::RenderTable(run, {});
  EXPECT_NE(text.find("known defect lib-x: 5 samples in 1 cases (max |e| 30), not failing"), std::string::npos) << text;
  EXPECT_NE(text.find("1 known defect (not failing)"), std::string::npos) << text;
  const std::string junit = reports::ToJUnit(run);
  EXPECT_EQ(junit.find("<failure"), std::string::npos) << junit;
  EXPECT_NE(junit.find("property name=\"known_defect.lib-x\" value=\"5 samples explained"), std::string::npos) << junit;
  const std::string html = reports::ToHtml(run);
  EXPECT_NE(html.find("Known defects and documented behaviour (ledger)"), std::string::npos);
  // Every judged sample exact: one sentence instead of the statistics table, plots and worst samples.
  EXPECT_NE(html.find("Every one of the 1 judged samples is exact (e = 0): no statistics table"), std::string::npos);
  EXPECT_EQ(html.find("p99.9 |e|"), std::string::npos);
  EXPECT_NE(reports::ToMarkdown(run).find("Known defect lib-x in relu.int8.lut.conv: reproduces"), std::string::npos);

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
  const std::string text = reports::RenderTable(RunOf({c}), {});
  EXPECT_NE(text.find("known defect lib-x: NO LONGER REPRODUCES: 2 draws"), std::string::npos) << text;
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
  b.known_defects[0].id = "lib-x";
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

// Results /8 write one replay line per case and derive every worst sample's from it: a tally's, a plugin's with the
// facts behind its word, and a /7 file's lines as written. A line that is not the case's is refused.
TEST(KnownDefectResults, ReplayLinesAreDerivedFromTheCase) {
  RunResult run = RunOf({CaseWithKnownDefect(5, 0)});
  CaseResult& written = run.cases[0];
  written.spec.backend_facts = {{"plugin_name", "acme;int8"}, {"plugin_version", "2"}};
  written.stats.add(WorstCase{500, 1, 0, 0, 5, 6, 0});  // a judged sample within tolerance: the case's worst
  finish_case_result(written, run.seed);
  const auto lines = [](const CaseResult& c) {
    std::vector<std::string> out;
    for (const WorstCaseReport& w : c.worst) out.push_back(w.replay);
    for (const KnownDefectTally& t : c.known_defects) {
      for (const WorstCaseReport& w : t.worst) out.push_back(w.replay);
    }
    return out;
  };
  const std::vector<std::string> expected = lines(written);
  ASSERT_EQ(expected.size(), 1 + kLedgerTallyWorst);
  EXPECT_NE(expected[0].find(";sample=500;"), std::string::npos) << expected[0];
  EXPECT_NE(expected[1].find(";plugin_name=acme%3Bint8;plugin_version=2"), std::string::npos) << expected[1];

  nlohmann::json j = nlohmann::json::parse(reports::ResultsText(run));
  EXPECT_EQ(j["format"], "fusediff-results/8");
  EXPECT_FALSE(j["cases"][0]["worst"][0].contains("replay"));
  EXPECT_FALSE(j["cases"][0]["known_defects"][0].contains("regions"));
  EXPECT_EQ(j["cases"][0]["known_defects"][0]["worst"].size(), kLedgerTallyWorst);
  const RunResult back = reports::FromJson(j, "now.json");
  EXPECT_EQ(lines(back.cases[0]), expected);
  EXPECT_EQ(back.cases[0].spec.backend_facts, written.spec.backend_facts);

  // A /7 file carries its lines in the entries (and a tally's regions): read as written, whatever the case's spec.
  nlohmann::json old = j;
  old["format"] = "fusediff-results/7";
  nlohmann::json& c = old["cases"][0];
  c.erase("replay");
  c.erase("backend_facts");
  c["worst"][0]["replay"] = "fusediff-replay/1;seed=1;sample=100;written";
  for (size_t i = 0; i < kLedgerTallyWorst; ++i) c["known_defects"][0]["worst"][i]["replay"] = "tally " + std::to_string(i);
  c["known_defects"][0]["regions"] = nlohmann::json::object();
  const RunResult read_old = reports::FromJson(old, "old.json");
  EXPECT_EQ(read_old.cases[0].worst[0].replay, "fusediff-replay/1;seed=1;sample=100;written");
  EXPECT_EQ(read_old.cases[0].known_defects[0].worst.back().replay, "tally 2");

  // /8: a line that is not the case's (another seed, a fact dropped) is refused, naming the field.
  for (const auto& edit : std::vector<std::function<void(nlohmann::json&)>>{
           [](nlohmann::json& e) { e["replay"] = std::string(e["replay"]).replace(0, 25, "fusediff-replay/1;seed=2;"); },
           [](nlohmann::json& e) { e["backend_facts"].erase(1); }}) {
    nlohmann::json edited = j;
    edit(edited["cases"][0]);
    try {
      reports::FromJson(edited, "edited.json");
      ADD_FAILURE() << "an edited replay line was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("edited.json: cases[0].replay"), std::string::npos) << e.what();
    }
  }
}

// A draw the path withheld because the library would crash on it (model not_executed): with a ledger entry the
// case is a known defect, counted and listed, not failing; without one it fails. Both round-trip through JSON and
// merge exactly.
TEST(KnownDefectResults, WithheldDrawsAreAKnownDefectOrAFailure) {
  CaseResult c = CaseWithKnownDefect(0, 0);
  c.known_defects[0].id = "lib-crash";
  c.known_defects[0].predicted_samples = 0;
  c.known_defects[0].samples = 16;
  c.known_defects[0].draws = 1;
  c.known_defects[0].withheld_samples = 16;
  finish_case_result(c, 1);
  EXPECT_EQ(c.verdict, Verdict::known_defect);
  EXPECT_NE(c.reason.find("lib-crash (16 samples not executed: the library crashes on their draws)"), std::string::npos)
      << c.reason;
  EXPECT_EQ(withheld_samples(c, LedgerKind::known_defect), 16u);
  EXPECT_EQ(compared_samples(c), 1u);  // withheld samples are never compared
  const RunResult run = RunOf({c});
  EXPECT_FALSE(run.any_failure());
  const std::string text = reports::RenderTable(run, {});
  EXPECT_NE(text.find("known defect lib-crash: 16 samples in 1 cases not executed (the library crashes on their "
                      "draws), not failing; 1 draws met its conditions"), std::string::npos) << text;
  EXPECT_NE(reports::ToJUnit(run).find("16 samples not executed"), std::string::npos);
  const std::string json = reports::ToJson(run).dump(2);
  const RunResult back = reports::FromJson(nlohmann::json::parse(json), "results.json");
  ASSERT_EQ(back.cases.size(), 1u);
  EXPECT_EQ(back.cases[0].known_defects[0].withheld_samples, 16u);
  EXPECT_EQ(back.cases[0].verdict, Verdict::known_defect);
  EXPECT_EQ(reports::ToJson(back).dump(2), json);
  CaseResult merged = c;
  merge_case_result(merged, c, 1);
  EXPECT_EQ(merged.known_defects[0].withheld_samples, 32u);
  EXPECT_EQ(merged.verdict, Verdict::known_defect);

  // No ledger entry: the same draw fails the case, naming the crash and the first sample.
  CaseResult unexplained = CaseWithKnownDefect(0, 0);
  unexplained.known_defects.clear();
  unexplained.withheld_samples = 16;
  unexplained.first_withheld_sample = 48;
  unexplained.withheld_reason = "the library would crash";
  finish_case_result(unexplained, 1);
  EXPECT_EQ(unexplained.verdict, Verdict::fail);
  EXPECT_NE(unexplained.reason.find("16 samples not executed: the library would crash (first: sample 48"), std::string::npos)
      << unexplained.reason;
  EXPECT_TRUE(RunOf({unexplained}).any_failure());
  const std::string failing_json = reports::ToJson(RunOf({unexplained})).dump(2);
  const RunResult failing_back = reports::FromJson(nlohmann::json::parse(failing_json), "results.json");
  EXPECT_EQ(failing_back.cases[0].withheld_samples, 16u);
  EXPECT_EQ(failing_back.cases[0].first_withheld_sample, 48u);
  EXPECT_EQ(failing_back.cases[0].verdict, Verdict::fail);
}

// The same case whose tally is a documented behaviour (e.g. a library's int8 arithmetic without VNNI).
CaseResult CaseWithDocumentedBehaviour(uint64_t explained, bool strict) {
  CaseResult c = CaseWithKnownDefect(explained, 0);
  c.known_defects[0].id = "lib-documented";
  c.known_defects[0].kind = LedgerKind::documented_behaviour;
  c.tolerance.documented_behaviour_fails = strict;
  finish_case_result(c, 1);
  return c;
}

TEST(KnownDefectResults, DocumentedBehaviourIsCountedListedAndNotFailing) {
  const CaseResult c = CaseWithDocumentedBehaviour(5, false);
  EXPECT_EQ(c.verdict, Verdict::documented_behaviour);
  EXPECT_NE(c.reason.find("documented behaviour: lib-documented (5 samples)"), std::string::npos) << c.reason;
  EXPECT_EQ(explained_samples(c, LedgerKind::documented_behaviour), 5u);
  EXPECT_EQ(explained_samples(c, LedgerKind::known_defect), 0u);
  const RunResult run = RunOf({c});
  EXPECT_FALSE(run.any_failure());
  const std::string text = reports::RenderTable(run, {});
  EXPECT_NE(text.find("documented behaviour lib-documented: 5 samples in 1 cases (max |e| 30), not failing"),
            std::string::npos) << text;
  EXPECT_NE(text.find("1 documented behaviour (not failing)"), std::string::npos) << text;
  const std::string junit = reports::ToJUnit(run);
  EXPECT_EQ(junit.find("<failure"), std::string::npos) << junit;
  EXPECT_NE(junit.find("property name=\"documented_behaviour.lib-documented\""), std::string::npos) << junit;
  EXPECT_NE(reports::ToMarkdown(run).find("Documented behaviour lib-documented in relu.int8.lut.conv: reproduces"), std::string::npos);
  // A known defect in the same case takes the verdict; both are named.
  CaseResult both = c;
  KnownDefectTally defect = CaseWithKnownDefect(2, 500).known_defects[0];
  both.known_defects.push_back(defect);
  finish_case_result(both, 1);
  EXPECT_EQ(both.verdict, Verdict::known_defect);
  EXPECT_NE(both.reason.find("lib-x (2 samples); documented behaviour: lib-documented (5 samples)"), std::string::npos)
      << both.reason;
}

TEST(KnownDefectResults, StrictFailsDocumentedBehaviour) {
  const CaseResult c = CaseWithDocumentedBehaviour(5, true);
  EXPECT_EQ(c.verdict, Verdict::fail);
  EXPECT_NE(c.reason.find("failing under --strict"), std::string::npos) << c.reason;
  EXPECT_TRUE(RunOf({c}).any_failure());
  EXPECT_NE(reports::RenderTable(RunOf({c}), {}).find("FAILING (--strict)"), std::string::npos);
  // Strict does not touch known defects.
  CaseResult defect = CaseWithKnownDefect(5, 0);
  defect.tolerance.documented_behaviour_fails = true;
  finish_case_result(defect, 1);
  EXPECT_EQ(defect.verdict, Verdict::known_defect);
}

TEST(KnownDefectResults, DocumentedBehaviourRoundTripsThroughJson) {
  for (bool strict : {false, true}) {
    const RunResult run = RunOf({CaseWithDocumentedBehaviour(5, strict)});
    const nlohmann::ordered_json j = reports::ToJson(run);
    EXPECT_EQ(j["format"], reports::kResultsFormat);
    EXPECT_FALSE(j["cases"][0].contains("known_defects"));
    ASSERT_EQ(j["cases"][0]["documented_behaviours"].size(), 1u);
    EXPECT_EQ(j["cases"][0]["tolerance"].contains("documented_behaviour"), strict);
    const RunResult back = reports::FromJson(nlohmann::json::parse(j.dump()), "results.json");
    ASSERT_EQ(back.cases[0].known_defects.size(), 1u);
    EXPECT_EQ(back.cases[0].known_defects[0].kind, LedgerKind::documented_behaviour);
    EXPECT_EQ(back.cases[0].verdict, strict ? Verdict::fail : Verdict::documented_behaviour);
    EXPECT_EQ(back.cases[0].tolerance.documented_behaviour_fails, strict);
    EXPECT_EQ(reports::ToJson(back).dump(), j.dump());
  }
}

// /5 judges a tally's status by its model's predicted samples; a /4 file by its draws: both read back.
TEST(KnownDefectResults, StatusRuleFollowsTheFilesFormat) {
  CaseResult c = CaseWithKnownDefect(0, 0);
  c.known_defects[0].predicted_samples = 0;  // conditions met, the model changed nothing: nothing to conclude
  finish_case_result(c, 1);
  EXPECT_FALSE(c.known_defects[0].no_longer_reproduces());
  nlohmann::json j = nlohmann::json::parse(reports::ToJson(RunOf({c})).dump());
  EXPECT_EQ(j["cases"][0]["known_defects"][0]["status"], "reproduces");
  EXPECT_NO_THROW(reports::FromJson(j, "now.json"));
  j["format"] = "fusediff-results/4";
  EXPECT_THROW(reports::FromJson(j, "old.json"), InputError);  // /4 wrote no_longer_reproduces for these draws
  j["cases"][0]["known_defects"][0]["status"] = "no_longer_reproduces";
  EXPECT_NO_THROW(reports::FromJson(j, "old.json"));
}

// The ledger's counts are their own category: at the same samples an entry that disappears or appears is a ledger
// change (exit 1, apart from the regressions); at different samples only where its conditions were met on both sides.
TEST(KnownDefectResults, CompareReportsADefectThatDisappearsOrAppears) {
  const RunResult with = RunOf({CaseWithKnownDefect(5, 0)});
  const RunResult fixed = RunOf({CaseWithKnownDefect(0, 0)});
  const reports::CompareRules rules;
  const reports::RunComparison gone = reports::Compare(with, fixed, rules);
  EXPECT_TRUE(gone.any_regression());
  ASSERT_EQ(gone.cases.size(), 1u);
  EXPECT_FALSE(gone.cases[0].regression);
  ASSERT_FALSE(gone.cases[0].ledger.empty());
  EXPECT_NE(gone.cases[0].ledger[0].find("known defect lib-x disappeared (5 -> 0 samples)"), std::string::npos)
      << gone.cases[0].ledger[0];
  EXPECT_NE(reports::RenderComparison(gone, with, fixed).find(": LEDGER: known defect lib-x disappeared"), std::string::npos);
  const reports::RunComparison appeared = reports::Compare(fixed, with, rules);
  EXPECT_TRUE(appeared.any_regression());
  EXPECT_NE(appeared.cases[0].ledger.back().find("known defect lib-x appeared (0 -> 5 samples)"), std::string::npos);
  EXPECT_FALSE(reports::Compare(with, with, rules).any_regression());
  // Another seed: the entry's conditions were met in the fixed run's draws and its model predicted changes, so its
  // disappearance is still a ledger change; an entry whose conditions no draw of one side met has only moved.
  RunResult reseeded = fixed;
  reseeded.seed = 2;
  EXPECT_TRUE(reports::Compare(with, reseeded, rules).any_regression());
  RunResult unmet = reseeded;
  unmet.cases[0].known_defects.clear();
  const reports::RunComparison moved = reports::Compare(with, unmet, rules);
  EXPECT_FALSE(moved.any_regression());
  ASSERT_EQ(moved.cases[0].ledger_moved.size(), 1u);
  EXPECT_EQ(moved.cases[0].ledger_moved[0], "known defect lib-x");
}

}  // namespace
}  // namespace fusediff

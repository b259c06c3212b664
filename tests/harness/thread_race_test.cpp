// A library race in the driver (model thread_race, docs/onednn.md): a backend of this file whose element 0 of every
// draw is clobbered, differently in each repetition (racy_differ) or alike in both (racy_alike). On the draws a
// thread_race entry's rule meets, those samples are the entry's: counted, shown, not failing. Without the entry, or
// where its rule does not meet the draw, the case fails as it would without a ledger.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/known_defects.h"
#include "wrapping_backend.h"

namespace fusediff {
namespace {

// The built-in kernels with element 0 of each draw flipped in its low bits (a code stays in its type's range).
class RacyPath final : public FusedPath {
 public:
  RacyPath(std::unique_ptr<FusedPath> inner, bool differ) : inner_(std::move(inner)), differ_(differ) {}
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    if (!inner_->Run(draw, y, rejected)) return false;
    y[0] ^= differ_ ? static_cast<int32_t>(repetition_ + 1) : 4;
    return true;
  }
  bool repeatable() const override { return true; }
  void set_repetition(uint32_t r) override { repetition_ = r; }
  RunInfo last_run() const override {
    RunInfo info;
    info.implementation = "racy: conv";
    return info;
  }

 private:
  std::unique_ptr<FusedPath> inner_;
  bool differ_;
  uint32_t repetition_ = 0;
};

class RacyBackend final : public test_support::WrappingBackend {
 public:
  std::string_view name() const override { return "racy"; }
  std::vector<std::string> paths() const override { return {"racy_differ", "racy_alike"}; }
  KeyValues provenance() const override { return {{"library", "racylib"}, {"version", "1.0.0"}}; }

 protected:
  std::unique_ptr<FusedPath> Wrap(std::unique_ptr<FusedPath> inner, const CaseSpec& spec) const override {
    return std::make_unique<RacyPath>(std::move(inner), spec.backend == "racy_differ");
  }
};

const RacyBackend kRacyBackend;
const bool kRegistered = [] {
  RegisterBackend(kRacyBackend);
  RegisterDefectRule({"test_race_every_draw", {}, false, [](const KnownDefect&, const ConvCase&, const DefectCallAttributes&) { return true; }});
  RegisterDefectRule({"test_race_no_draw", {}, false, [](const KnownDefect&, const ConvCase&, const DefectCallAttributes&) { return false; }});
  return true;
}();

KnownDefectLedger RaceLedger(const std::string& rule) {
  KnownDefect d;
  d.id = "racylib-1.0-element-0-race";
  d.kind = LedgerKind::known_defect;
  d.library = "racylib";
  d.version_min = "1.0.0";
  d.version_max = "1.0.0";
  d.implementations = {"racy:*"};
  d.rule = rule;
  d.model = std::string(kThreadRace);
  return KnownDefectLedger{"thread_race_test.cpp", {d}};
}

CaseResult RunRacy(const std::string& word, const KnownDefectLedger* ledger) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::relu;
  suite.samples = 3000;
  for (CaseSpec spec : driver::BuildSuite(suite)) {
    if (spec.source != SampleSource::conv || spec.table_kind != TableKind::lut || spec.backend != kBuiltInPath ||
        !is_conv_act(spec.pattern)) {
      continue;
    }
    parse_fused_path(word, "--fused", spec);
    driver::ReferenceCache cache;
    driver::RunOptions options;
    options.known_defects = ledger;
    return driver::RunCase(spec, options, cache);
  }
  ADD_FAILURE() << "no relu int8 lut conv case";
  return {};
}

TEST(ThreadRace, WithoutAnEntryTheRaceFails) {
  ASSERT_TRUE(kRegistered);
  const CaseResult differ = RunRacy("racy_differ", nullptr);
  EXPECT_EQ(differ.verdict, Verdict::nondeterministic) << differ.reason;
  EXPECT_GT(differ.stats.nondeterministic, 0u);
  const CaseResult alike = RunRacy("racy_alike", nullptr);
  EXPECT_EQ(alike.verdict, Verdict::fail) << alike.reason;
  EXPECT_EQ(alike.stats.overall.max_abs(), 4);
}

TEST(ThreadRace, AnEntryWhoseRuleMeetsTheDrawCountsItsSamplesAndNothingElse) {
  const KnownDefectLedger ledger = RaceLedger("test_race_every_draw");
  for (const char* word : {"racy_differ", "racy_alike"}) {
    const CaseResult c = RunRacy(word, &ledger);
    EXPECT_EQ(c.verdict, Verdict::known_defect) << word << ": " << c.reason;
    ASSERT_EQ(c.known_defects.size(), 1u) << word;
    const KnownDefectTally& t = c.known_defects[0];
    EXPECT_GT(t.draws, 0u) << word;
    // Element 0 of each draw, and no other sample: the judged ones are exact and deterministic.
    EXPECT_EQ(t.stats.overall.count(), t.draws) << word;
    EXPECT_EQ(c.stats.overall.max_abs(), 0) << word;
    EXPECT_EQ(c.stats.nondeterministic, 0u) << word;
    ASSERT_FALSE(t.worst.empty()) << word;
    // A sample whose repetitions differ shows them all; one clobbered alike has none to show.
    EXPECT_EQ(t.worst[0].sample.repetitions.size(), std::string(word) == "racy_differ" ? 2u : 0u) << word;
    EXPECT_NE(c.reason.find("racylib-1.0-element-0-race"), std::string::npos) << c.reason;
  }
}

TEST(ThreadRace, AnEntryWhoseRuleDoesNotMeetTheDrawHidesNothing) {
  const KnownDefectLedger ledger = RaceLedger("test_race_no_draw");
  EXPECT_EQ(RunRacy("racy_differ", &ledger).verdict, Verdict::nondeterministic);
  const CaseResult alike = RunRacy("racy_alike", &ledger);
  EXPECT_EQ(alike.verdict, Verdict::fail);
  EXPECT_TRUE(alike.known_defects.empty());
}

}  // namespace
}  // namespace fusediff

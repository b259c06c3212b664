// Draws a path's process lost (a plugin child that crashed or hung, docs/plugins.md): counted per case with the
// first lost sample's replay line, a verdict of their own that fails the run, and every output whole: the table,
// JSON (and back, and merged), JUnit, HTML, Markdown and compare.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "fusediff/model/results.h"
#include "fusediff/reports/reports.h"

namespace fusediff {
namespace {

CaseResult Case(const std::string& name) {
  CaseResult c;
  c.spec.name = name;
  c.spec.backend = "builtin";
  c.spec.convention.activation = make_activation(ActivationKind::relu);
  c.spec.samples = 1000;
  c.tolerance.max_abs_lsb = 0;
  for (uint64_t i = 0; i < 10; ++i) c.stats.add(WorstCase{i, 0, 0, 0, 5, 5, 0});
  finish_case_result(c, 1);
  return c;
}

RunResult RunOf(std::vector<CaseResult> cases) {
  RunResult run;
  run.seed = 1;
  run.cases = std::move(cases);
  return run;
}

TEST(LostDraws, CrashedAndTimeoutVerdictsFailTheRunWithReplayLines) {
  CaseResult crashed = Case("relu.int8.lut.conv");
  crashed.crashed.add(300, 40, "the child killed by SIGSEGV (signal 11)");
  crashed.crashed.add(120, 20, "the child killed by SIGABRT (signal 6)");
  crashed.timed_out.add(500, 10, "no answer in time");
  finish_case_result(crashed, 1);
  EXPECT_EQ(crashed.verdict, Verdict::crashed);
  EXPECT_EQ(crashed.crashed.samples, 60u);
  EXPECT_EQ(crashed.crashed.first_sample, 120u);
  EXPECT_EQ(crashed.crashed.reason, "the child killed by SIGABRT (signal 6)");
  EXPECT_NE(crashed.crashed.replay.find(";sample=120;"), std::string::npos) << crashed.crashed.replay;
  EXPECT_NE(crashed.timed_out.replay.find(";sample=500;"), std::string::npos);
  EXPECT_EQ(crashed.reason,
            "60 samples crashed: the child killed by SIGABRT (signal 6) (first: sample 120); 10 samples timed out "
            "(first: sample 500)");
  CaseResult hung = Case("relu.int8.lut.conv2");
  hung.timed_out.add(7, 3, "no answer in time; the child was killed (SIGKILL)");
  finish_case_result(hung, 1);
  EXPECT_EQ(hung.verdict, Verdict::timeout);
  EXPECT_TRUE(fails_run(Verdict::crashed));
  EXPECT_TRUE(fails_run(Verdict::timeout));
  const CaseResult passing = Case("relu.int8.lut.conv3");
  EXPECT_EQ(passing.verdict, Verdict::pass);

  const RunResult run = RunOf({crashed, hung, passing});
  EXPECT_TRUE(run.any_failure());
  const std::string table = reports::RenderTable(run, {});
  EXPECT_NE(table.find("relu.int8.lut.conv: CRASHED: 60 samples crashed"), std::string::npos) << table;
  EXPECT_NE(table.find("fusediff replay '" + crashed.crashed.replay + "'"), std::string::npos) << table;
  EXPECT_NE(table.find("relu.int8.lut.conv2: TIMEOUT"), std::string::npos) << table;
  EXPECT_NE(table.find("1 passed, 2 failed"), std::string::npos) << table;
  const std::string junit = reports::ToJUnit(run);
  EXPECT_NE(junit.find("failures=\"2\""), std::string::npos);
  EXPECT_NE(junit.find("type=\"crashed\""), std::string::npos);
  EXPECT_NE(junit.find("type=\"timeout\""), std::string::npos);
  const std::string html = reports::ToHtml(run);
  EXPECT_NE(html.find("samples crashed"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_NE(reports::ToMarkdown(run).find("**crashed**"), std::string::npos);

  // JSON: written, read back the same, merged exactly.
  const std::string json = reports::ToJson(run).dump(2);
  EXPECT_NE(json.find("\"first_crashed_sample\": 120"), std::string::npos);
  const RunResult back = reports::FromJson(nlohmann::json::parse(json), "results.json");
  EXPECT_EQ(back.cases[0].crashed, crashed.crashed);
  EXPECT_EQ(back.cases[0].timed_out, crashed.timed_out);
  EXPECT_EQ(back.cases[1].verdict, Verdict::timeout);
  EXPECT_EQ(reports::ToJson(back).dump(2), json);
  CaseResult merged = crashed;
  CaseResult part = Case("relu.int8.lut.conv");
  part.crashed.add(50, 5, "the child exited with status 3");
  finish_case_result(part, 1);
  merge_case_result(merged, part, 1);
  EXPECT_EQ(merged.crashed.samples, 65u);
  EXPECT_EQ(merged.crashed.first_sample, 50u);
  EXPECT_EQ(merged.crashed.reason, "the child exited with status 3");
  EXPECT_EQ(merged.verdict, Verdict::crashed);

  // A file without the fields (every file before them) reads as none lost.
  nlohmann::json old = nlohmann::json::parse(reports::ToJson(RunOf({passing})).dump());
  EXPECT_FALSE(old["cases"][0].contains("crashed_samples"));
  EXPECT_EQ(reports::FromJson(old, "old.json").cases[0].crashed.samples, 0u);

  // compare: a case that now crashes is a regression.
  const reports::RunComparison cmp = reports::Compare(RunOf({passing}), RunOf({[&] {
                                                          CaseResult c = crashed;
                                                          c.spec.name = passing.spec.name;
                                                          return c;
                                                        }()}),
                                                      {});
  ASSERT_EQ(cmp.cases.size(), 1u);
  EXPECT_TRUE(cmp.cases[0].regression);
}

}  // namespace
}  // namespace fusediff

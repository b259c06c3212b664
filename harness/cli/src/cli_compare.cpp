#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {
struct CompareArgs {
  std::string baseline, current, rules;
  bool all = false;
  bool only_regressions = false;
};
}  // namespace

Command AddCompareCommand(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* compare = app.add_subcommand(
      "compare", "Nightly regression: compare CURRENT to BASELINE case by case (exit 0 none, 1 regression, 2 bad input)");
  compare->add_option("baseline", a->baseline, "Stored baseline results JSON")->required();
  compare->add_option("current", a->current, "Results JSON of this run")->required();
  compare->add_option("--rules", a->rules, "JSON thresholds overriding the defaults (docs/reports.md)");
  compare->add_flag("--all", a->all, "Also print the side-by-side table of every case");
  compare->add_flag("--only-regressions", a->only_regressions, "Print the regression lines and nothing else");
  return Command{compare, [a](const CommandContext& ctx) {
                   const reports::CompareRules rules =
                       a->rules.empty() ? reports::CompareRules{} : reports::ReadCompareRules(a->rules);
                   const RunResult baseline = reports::ReadResultsFile(a->baseline);
                   const RunResult current = reports::ReadResultsFile(a->current);
                   const reports::RunComparison comparison = reports::Compare(baseline, current, rules);
                   if (a->all && a->only_regressions) throw InputError("--all and --only-regressions: expected one of them");
                   const reports::CompareView view = a->only_regressions ? reports::CompareView::only_regressions
                                                     : a->all             ? reports::CompareView::all
                                                                          : reports::CompareView::summary;
                   ctx.out << reports::RenderComparison(comparison, baseline, current, view);
                   return comparison.any_regression() ? kExitFail : kExitPass;
                 }};
}

}  // namespace fusediff::cli

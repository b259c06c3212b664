#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {
struct CompareArgs {
  std::string baseline, current, rules;
};
}  // namespace

Command AddCompareCommand(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* compare = app.add_subcommand(
      "compare", "Nightly regression: compare CURRENT to BASELINE case by case (exit 0 none, 1 regression, 2 bad input)");
  compare->add_option("baseline", a->baseline, "Stored baseline results JSON")->required();
  compare->add_option("current", a->current, "Results JSON of this run")->required();
  compare->add_option("--rules", a->rules, "JSON thresholds overriding the defaults (docs/reports.md)");
  return Command{compare, [a](const CommandContext& ctx) {
                   const reports::CompareRules rules =
                       a->rules.empty() ? reports::CompareRules{} : reports::ReadCompareRules(a->rules);
                   const RunResult baseline = reports::ReadResultsFile(a->baseline);
                   const RunResult current = reports::ReadResultsFile(a->current);
                   const reports::RunComparison comparison = reports::Compare(baseline, current, rules);
                   ctx.out << reports::RenderComparison(comparison, baseline, current);
                   return comparison.any_regression() ? kExitFail : kExitPass;
                 }};
}

}  // namespace fusediff::cli

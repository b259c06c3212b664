#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {
struct MergeArgs {
  std::vector<std::string> inputs;
  std::string out, junit;
};
}  // namespace

Command AddMergeCommand(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* merge = app.add_subcommand(
      "merge", "Merge the shards of one run: histograms add exactly, percentiles and verdicts are recomputed");
  merge->add_option("inputs", a->inputs, "Results JSON of every shard (--shard I/N for I = 0..N-1)")->required();
  merge->add_option("--out", a->out, "Write the merged results JSON")->required();
  merge->add_option("--junit", a->junit, "Also write JUnit XML of the merged run");
  return Command{merge, [a](const CommandContext& ctx) {
                   CheckOutputPath(a->out, "--out");
                   if (!a->junit.empty()) CheckOutputPath(a->junit, "--junit");
                   std::vector<RunResult> parts;
                   for (const std::string& path : a->inputs) parts.push_back(reports::ReadResultsFile(path));
                   RunResult merged = reports::MergeRuns(parts, a->inputs);
                   const Provenance now = driver::CurrentProvenance(JoinCommandLine(ctx.args));
                   merged.provenance.command_line = now.command_line;
                   merged.provenance.created = now.created;
                   reports::WriteFileAtomically(a->out, reports::ToJson(merged).dump(2) + "\n");
                   if (!a->junit.empty()) reports::WriteFileAtomically(a->junit, reports::ToJUnit(merged));
                   ctx.out << reports::RenderTable(merged, false);
                   return merged.any_failure() ? kExitFail : kExitPass;
                 }};
}

}  // namespace fusediff::cli

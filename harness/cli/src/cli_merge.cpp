#include <fmt/format.h>
#include <fmt/ranges.h>

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
  bool allow_partial = false;
};
}  // namespace

Command AddMergeCommand(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* merge = app.add_subcommand(
      "merge", "Merge the shards of one run: histograms add exactly, percentiles and verdicts are recomputed");
  merge->add_option("inputs", a->inputs, "Results JSON of every shard (--shard I/N for I = 0..N-1)")->required();
  merge->add_option("--out", a->out, "Write the merged results JSON")->required();
  merge->add_option("--junit", a->junit, "Also write JUnit XML of the merged run");
  merge->add_flag("--allow-partial", a->allow_partial,
                  "Merge even when shards are missing; the result is marked \"complete\": false");
  return Command{merge, [a](const CommandContext& ctx) {
                   CheckOutputPath(a->out, "--out");
                   if (!a->junit.empty()) CheckOutputPath(a->junit, "--junit");
                   std::vector<RunResult> parts;
                   for (const std::string& path : a->inputs) parts.push_back(reports::ReadResultsFile(path));
                   RunResult merged = reports::MergeRuns(parts, a->inputs, a->allow_partial);
                   if (const std::vector<uint32_t> missing = reports::MissingShards(parts); !missing.empty()) {
                     ctx.err << fmt::format("fusediff: merge: partial: {} of {} shards missing ({}); marked \"complete\": "
                                            "false\n",
                                            missing.size(), parts.front().shard_count, fmt::join(missing, ", "));
                   }
                   const Provenance now = driver::CurrentProvenance(JoinCommandLine(ctx.args));
                   merged.provenance.command_line = now.command_line;
                   merged.provenance.created = now.created;
                   reports::WriteFileAtomically(a->out, reports::ResultsText(merged));
                   if (!a->junit.empty()) reports::WriteFileAtomically(a->junit, reports::ToJUnit(merged));
                   ctx.out << reports::RenderTable(merged, {});
                   return merged.any_failure() ? kExitFail : kExitPass;
                 }};
}

}  // namespace fusediff::cli

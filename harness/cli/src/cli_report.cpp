#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {
struct ReportArgs {
  std::string results, html, md;
};
}  // namespace

Command AddReportCommand(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* report = app.add_subcommand("report", "Sign-off report of a results file: self-contained HTML and/or Markdown");
  report->add_option("results", a->results, "Results JSON written by `fusediff run --json` or `fusediff merge`")->required();
  report->add_option("--html", a->html, "Write the HTML report (inline SVG plots, no external assets)");
  report->add_option("--md", a->md, "Write the same tables as Markdown (without either option: Markdown to stdout)");
  return Command{report, [a](const CommandContext& ctx) {
                   if (!a->html.empty()) CheckOutputPath(a->html, "--html");
                   if (!a->md.empty()) CheckOutputPath(a->md, "--md");
                   const RunResult run = reports::ReadResultsFile(a->results);
                   if (!a->html.empty()) reports::WriteFileAtomically(a->html, reports::ToHtml(run));
                   if (!a->md.empty()) reports::WriteFileAtomically(a->md, reports::ToMarkdown(run));
                   if (a->html.empty() && a->md.empty()) ctx.out << reports::ToMarkdown(run);
                   return kExitPass;
                 }};
}

}  // namespace fusediff::cli

// `fusediff gate DESCRIPTOR.json`: accept (0) or reject (1) a table file before it merges; 2 for invalid input.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/canonical.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"
#include "fusediff/reports/sha256.h"
#include "fusediff/tables/tables.h"

namespace fusediff::cli {

namespace {

struct GateArgs {
  std::string descriptor, tolerance, json, html, threads;
  int64_t max_abs_lsb = -1;
  int64_t slack = -1;
  uint64_t samples = 20000;
  uint64_t seed = 1;
  bool allow_table_outside = false;
};

int DoGate(const GateArgs& a, const std::vector<std::string>& args, std::ostream& out) {
  if (!a.json.empty()) CheckOutputPath(a.json, "--json");
  if (!a.html.empty()) CheckOutputPath(a.html, "--html");
  const unsigned threads = ResolveThreads(a.threads, "--threads");
  const tables::LoadedFusedOp op =
      tables::LoadFusedOp(a.descriptor, a.allow_table_outside ? tables::TablePlacement::anywhere
                                                              : tables::TablePlacement::inside_descriptor_folder);
  const Convention& c = op.descriptor.convention;
  const TableKind kind = op.descriptor.table_kind;
  // An illegal fusion is refused by the rule it breaks before any sample: no table makes it right.
  if (const std::string illegal = driver::GateFusionIllegality(op.descriptor, op.table); !illegal.empty()) {
    RunResult refused;
    refused.provenance = driver::CurrentProvenance(JoinCommandLine(args));
    refused.seed = a.seed;
    refused.gate = GateProvenance{op.descriptor_path, op.table_path, reports::Sha256Hex(op.table_bytes),
                                  std::string(to_string(kind)), "none: illegal fusion", std::nullopt, illegal};
    out << reports::RenderGate(refused);
    if (!a.json.empty()) reports::WriteFileAtomically(a.json, reports::ResultsText(refused));
    return kExitFail;
  }
  const size_t segments = op.table->segments.size();

  // Relative mode (the default) judges the table against the canonical one of its kind; --tolerance and
  // --max-abs-lsb switch to the absolute bounds, and the canonical table is then shown, not judged.
  const bool absolute = !a.tolerance.empty() || a.max_abs_lsb >= 0;
  if (absolute && a.slack >= 0) {
    throw InputError("--slack: applies to the relative mode, not with --tolerance or --max-abs-lsb");
  }
  driver::ReferenceCache cache;
  const driver::CanonicalTable canonical = driver::BuildCanonicalTable(op.descriptor, *op.table, cache);
  int64_t canonical_max = 0;
  for (int32_t e : canonical.errors) canonical_max = std::max<int64_t>(canonical_max, std::abs(e));
  int64_t slack = 1;
  std::string slack_source = "default";
  if (a.slack >= 0) {
    slack = a.slack;
    slack_source = "--slack";
  } else if (canonical_max == 0) {
    slack = 0;
    slack_source = "default: the canonical table is exact";
  }

  std::optional<Tolerance> tolerance;
  std::string source = "default";
  if (!absolute) {
    tolerance = Tolerance{canonical_max + slack, std::nullopt, std::nullopt};
    source = "canonical max |e| + k";
  }
  if (!a.tolerance.empty()) {
    const tables::ToleranceSpec spec = tables::ParseToleranceSpec(tables::ReadFileBytes(a.tolerance), a.tolerance);
    tolerance = tables::FindTolerance(spec, c.activation.kind, kind, segments);
    if (tolerance) source = a.tolerance;
  }
  if (!tolerance) {
    if (kind == TableKind::pwl) {
      tolerance = default_pwl_tolerance(c.intermediate.q.type.bits(), segments);
      if (!tolerance && a.max_abs_lsb < 0) {
        throw InputError(a.descriptor + ": no default tolerance for a pwl table with " + std::to_string(segments) +
                         " segments (give --tolerance or --max-abs-lsb)");
      }
      if (!tolerance) tolerance = Tolerance{};
    } else {
      tolerance = builtin_table_tolerance(kind, c.activation.kind);
    }
  }
  if (a.max_abs_lsb >= 0) {
    tolerance->max_abs_lsb = a.max_abs_lsb;
    source = source == "default" ? "--max-abs-lsb" : source + " + --max-abs-lsb";
  }

  driver::RunOptions options;
  options.seed = a.seed;
  options.worst_count = driver::kGateWorstPool;
  options.threads = threads;
  options.tolerance = tolerance;
  RunResult run;
  run.provenance = driver::CurrentProvenance(JoinCommandLine(args));
  run.seed = a.seed;
  run.gate = GateProvenance{op.descriptor_path, op.table_path, reports::Sha256Hex(op.table_bytes),
                            std::string(to_string(kind)), source, std::nullopt, {}};
  for (const CaseSpec& spec :
       driver::BuildGateCases(op.descriptor, op.table, a.samples, op.table_path, run.gate->table_sha256)) {
    run.cases.push_back(driver::RunCase(spec, options, cache));
  }
  run.gate->canonical = driver::CompareWithCanonical(run.cases, canonical, *op.table, slack, slack_source, !absolute, a.seed);
  out << reports::RenderGate(run);
  if (!a.json.empty()) reports::WriteFileAtomically(a.json, reports::ResultsText(run));
  if (!a.html.empty()) reports::WriteFileAtomically(a.html, reports::ToHtml(run));
  return run.any_failure() ? kExitFail : kExitPass;
}

}  // namespace

Command AddGateCommand(CLI::App& app) {
  auto a = std::make_shared<GateArgs>();
  CLI::App* gate = app.add_subcommand(
      "gate", "Accept (exit 0) or reject (exit 1) a table file: exhaustive over every intermediate code plus conv cases");
  gate->add_option("descriptor", a->descriptor, "Fused-op descriptor (fusediff-fused-op/2 JSON; /1 still read)")->required();
  gate->add_option("--tolerance", a->tolerance, "Absolute mode: tolerance spec (fusediff-tolerance/1 JSON)");
  gate->add_option("--max-abs-lsb", a->max_abs_lsb, "Absolute mode: max |e| in output LSBs")->check(CLI::NonNegativeNumber);
  gate->add_option("--slack", a->slack,
                   "Relative mode: k, the LSBs a code may exceed the canonical table's |e| by (default 1; 0 where the "
                   "canonical table is exact)")
      ->check(CLI::NonNegativeNumber);
  gate->add_option("--samples", a->samples, "Conv samples through the whole fused op (0: sweep only)");
  gate->add_option("--seed", a->seed, "Seed of the conv cases");
  gate->add_option("--threads", a->threads, "Worker threads (default: every hardware thread)");
  gate->add_option("--json", a->json, "Write results JSON (fusediff-results/1, with gate provenance)");
  gate->add_option("--html", a->html, "Write the sign-off HTML report (candidate and canonical table side by side)");
  gate->add_flag("--allow-table-outside", a->allow_table_outside,
                 "Let table.file leave the descriptor's folder (absolute, ../ or through a symlink); only for trusted "
                 "descriptors, never for files from pull requests");
  return Command{gate, [a](const CommandContext& ctx) { return DoGate(*a, ctx.args, ctx.out); }};
}

}  // namespace fusediff::cli

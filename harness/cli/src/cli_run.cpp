#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/model/mutants.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {

struct RunArgs {
  std::string activation, alpha, intermediate, output, requant, intermediate_rounding, output_rounding,
      zero_point_order, fused, mutant = "none", json, csv, mix;
  bool exhaustive = false;
  uint64_t samples = 20000;
  uint64_t seed = 1;
  int64_t max_abs_lsb = -1;
  size_t worst = 10;
  bool timing = false;
};

int DoRun(const RunArgs& a, const std::vector<std::string>& args, std::ostream& out) {
  driver::SuiteOptions suite;
  if (!a.activation.empty()) suite.activation = parse_activation_kind(a.activation, "--activation");
  if (!a.alpha.empty()) suite.alpha = parse_float32(a.alpha, "--alpha");
  if (!a.intermediate.empty()) suite.intermediate = a.intermediate;
  if (!a.output.empty()) suite.output = a.output;
  if (!a.requant.empty()) suite.requant = parse_requant_variant(a.requant, "--requant");
  if (!a.intermediate_rounding.empty()) {
    suite.intermediate_rounding = parse_rounding_mode(a.intermediate_rounding, "--intermediate-rounding");
  }
  if (!a.output_rounding.empty()) suite.output_rounding = parse_rounding_mode(a.output_rounding, "--output-rounding");
  if (!a.zero_point_order.empty()) {
    suite.zero_point_order = parse_zero_point_order(a.zero_point_order, "--zero-point-order");
  }
  if (!a.fused.empty()) suite.fused = parse_fused_kind(a.fused, "--fused");
  suite.mutant = parse_mutant(a.mutant, "--mutant");
  suite.samples = a.samples;
  if (!a.mix.empty()) suite.mix = parse_region_mix(a.mix, "--mix");
  suite.exhaustive = a.exhaustive;
  if (!a.json.empty()) CheckOutputPath(a.json, "--json");
  if (!a.csv.empty()) CheckOutputPath(a.csv, "--csv");
  const std::vector<CaseSpec> specs = driver::BuildSuite(suite);

  driver::RunOptions options;
  options.seed = a.seed;
  options.worst_count = a.worst;
  if (a.max_abs_lsb >= 0) options.max_abs_lsb = a.max_abs_lsb;

  const auto start = std::chrono::steady_clock::now();
  RunResult run;
  run.provenance = driver::CurrentProvenance(JoinCommandLine(args));
  run.seed = a.seed;
  driver::ReferenceCache cache;
  uint64_t samples = 0;
  for (const CaseSpec& spec : specs) {
    run.cases.push_back(driver::RunCase(spec, options, cache));
    samples += run.cases.back().stats.overall.count();
  }
  run.complete = true;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  out << reports::RenderTable(run, a.timing);
  out << fmt::format("{} samples in {:.2f} s ({:.0f} samples/s)\n", samples, seconds, samples / std::max(seconds, 1e-9));
  if (!a.json.empty()) reports::WriteFileAtomically(a.json, reports::ToJson(run).dump(2) + "\n");
  if (!a.csv.empty()) reports::WriteFileAtomically(a.csv, reports::ToCsv(run));
  return run.any_failure() ? kExitFail : kExitPass;
}

}  // namespace

Command AddRunCommand(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Run the embedded default suite (reshaped by the options) and report");
  run->add_option("--activation", a->activation, "Only this activation (snake_case, e.g. gelu_erf)");
  run->add_option("--alpha", a->alpha, "alpha of leaky_relu / elu");
  run->add_option("--intermediate", a->intermediate, "Intermediate u: TYPE[:SCALE:ZP] (int8, uint8, int16, *_narrow)");
  run->add_option("--output", a->output, "Output y: TYPE[:SCALE:ZP]");
  run->add_option("--requant", a->requant, "exact | double_rounding | single_rounding | f32_half_even");
  run->add_option("--intermediate-rounding", a->intermediate_rounding,
                  "half_away_from_zero | half_to_even | half_up (exact requant only)");
  run->add_option("--output-rounding", a->output_rounding, "half_away_from_zero | half_to_even | half_up");
  run->add_option("--zero-point-order", a->zero_point_order, "after_rounding | before_rounding");
  run->add_option("--fused", a->fused, "lut | lut_interp");
  run->add_option("--samples", a->samples, "Samples per conv case")->check(CLI::PositiveNumber);
  run->add_option("--seed", a->seed, "Seed of the counter-based generator");
  run->add_option("--max-abs-lsb", a->max_abs_lsb, "Tolerance override: max |e| in output LSBs")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--mutant", a->mutant, "Inject a known fused-path bug: use-output-scale");
  run->add_option("--worst", a->worst, "Worst samples kept per case")->check(CLI::Range(0, 1000));
  run->add_option("--json", a->json, "Write results JSON (fusediff-results/1)");
  run->add_option("--csv", a->csv, "Write one CSV row per case");
  run->add_flag("--timing", a->timing, "Show per-case wall time in the table");
  run->add_option("--mix", a->mix,
                  "Regions conv draws aim at, relative weights: knee=W,saturation=W,quant_boundary=W,bulk=W "
                  "(default knee=1,saturation=1,quant_boundary=2,bulk=1; bulk=1 alone is uniform)");
  run->add_flag("--exhaustive", a->exhaustive,
                "Add a thresholds case per convention: every requantization tie +-1 for each channel multiplier");
  return Command{run, [a](const CommandContext& ctx) { return DoRun(*a, ctx.args, ctx.out); }};
}

}  // namespace fusediff::cli

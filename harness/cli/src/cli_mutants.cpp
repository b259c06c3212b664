#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/mutant_search.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/mutants.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {

struct MutantsArgs {
  bool list = false;
  bool all = false;
  std::string mutant, mix, json, fused;
  uint64_t budget = 50000;
  uint32_t seeds = 20;
  uint64_t seed = 1;
};

std::string ShapeSummary(const ConvCase& c) {
  return fmt::format("C{} K{} {}x{}", c.input_channels(), c.output_channels(), c.kernel_height(), c.kernel_width());
}

// The detected mutants in two lines: those uniform sampling finds too, and those that need the targeted draws.
std::string DetectedSummary(const std::vector<driver::MutantReport>& reports) {
  std::string out;
  for (bool targeting : {false, true}) {
    size_t n = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    double ratio_lo = 1e300, ratio_hi = 0;
    for (const driver::MutantReport& r : reports) {
      if (!r.detected || mutant_info(r.mutant).needs_targeting != targeting) continue;
      ++n;
      lo = std::min(lo, r.median_targeted);
      hi = std::max(hi, r.median_targeted);
      ratio_lo = std::min(ratio_lo, r.ratio);
      ratio_hi = std::max(ratio_hi, r.ratio);
    }
    if (n == 0) continue;
    out += fmt::format("{} detected {}: median samples to detection {}..{} targeted, {:.1f}x..{:.1f}x fewer than "
                       "uniform (--all: each, with its shrunk replay)\n",
                       n, targeting ? "that need targeting (ties, edges, single codes)" : "that uniform sampling finds too",
                       lo, hi, ratio_lo, ratio_hi);
  }
  return out;
}

int DoMutants(const MutantsArgs& a, std::ostream& out) {
  if (a.list) {
    for (const MutantInfo& info : mutant_catalog()) {
      out << fmt::format("{}\n  does:      {}\n  differs:   {}\n", info.name, info.definition, info.space);
    }
    return kExitPass;
  }
  if (!a.json.empty()) CheckOutputPath(a.json, "--json");
  driver::MutantSearchOptions options;
  options.budget = a.budget;
  options.seeds = a.seeds;
  options.first_seed = a.seed;
  if (!a.mix.empty()) options.mix = parse_region_mix(a.mix, "--mix");
  if (!a.fused.empty()) {
    CaseSpec path;
    parse_fused_path(a.fused, "--fused", path);
    // The catalog's mutants are injected by a backend into its own paths; a path whose word carries an argument (a
    // plugin) runs as built, so there is nothing to inject into.
    if (!path.backend_arg.empty()) {
      throw InputError("--fused " + a.fused + ": fusediff injects its mutants into the paths it builds; this one runs "
                       "as built (a plugin: show its bugs as examples/plugins/wrong_scale_plugin.c does, docs/plugins.md)");
    }
    options.backend = path.backend;
  }
  std::vector<Mutant> mutants;
  if (!a.mutant.empty()) {
    mutants.push_back(parse_mutant(a.mutant, "--mutant"));
  } else {
    for (const MutantInfo& info : mutant_catalog()) mutants.push_back(info.mutant);
  }

  out << fmt::format("budget {} samples per search, {} seeds per mode, mix {}\n", options.budget, options.seeds,
                     format_region_mix(options.mix));
  if (a.all) {
    out << fmt::format("\n{:<32} {:>8} {:>10} {:>10} {:>9}  {}\n", "mutant", "detected", "targeted", "uniform", "ratio",
                       "shrunk counterexample");
    out << std::string(100, '-') << "\n";
  }
  nlohmann::ordered_json json_mutants = nlohmann::ordered_json::array();
  bool all_detected = true;
  std::vector<driver::MutantReport> reports;
  for (Mutant m : mutants) {
    const driver::MutantReport r = driver::EvaluateMutant(m, options);
    all_detected = all_detected && r.detected;
    const std::string ratio = fmt::format("{}{:.1f}x", r.ratio_is_lower_bound ? ">" : "", r.ratio);
    const std::string shrunk = r.shrunk ? fmt::format("{} e={:+d} ({} y_ref={} y_fused={})", ShapeSummary(r.shrunk->sample.conv),
                                                      int64_t{r.shrunk->y_fused} - r.shrunk->y_reference,
                                                      describe(r.shrunk->spec.convention), r.shrunk->y_reference,
                                                      r.shrunk->y_fused)
                                        : "-";
    if (a.all) {
      out << fmt::format("{:<32} {:>8} {:>10} {:>10} {:>9}  {}\n", to_string(m), r.detected ? "yes" : "NO",
                         r.median_targeted, fmt::format("{}{}", r.ratio_is_lower_bound ? ">=" : "", r.median_uniform),
                         ratio, shrunk);
    } else if (!r.detected) {
      out << fmt::format("{}: NOT DETECTED: {} of {} targeted searches reached the budget of {} samples\n", to_string(m),
                         r.missed_targeted, r.seeds, r.budget);
    }
    nlohmann::ordered_json j;
    j["name"] = std::string(to_string(m));
    j["detected"] = r.detected;
    j["samples_targeted"] = r.median_targeted;
    j["samples_uniform"] = r.median_uniform;
    j["ratio_is_lower_bound"] = r.ratio_is_lower_bound;
    j["missed_targeted"] = r.missed_targeted;
    j["missed_uniform"] = r.missed_uniform;
    j["replay"] = r.replay.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.replay);
    json_mutants.push_back(std::move(j));
    reports.push_back(r);
  }
  if (a.all) {
    out << "\nreplay lines of the shrunk counterexamples:\n";
    for (const driver::MutantReport& r : reports) {
      if (!r.replay.empty()) out << fmt::format("  {}: fusediff replay '{}'\n", to_string(r.mutant), r.replay);
    }
  } else {
    out << DetectedSummary(reports);
  }
  if (!a.json.empty()) {
    nlohmann::ordered_json j;
    j["format"] = "fusediff-mutants/1";
    j["budget"] = options.budget;
    j["seeds"] = options.seeds;
    j["mix"] = format_region_mix(options.mix);
    j["mutants"] = std::move(json_mutants);
    reports::WriteFileAtomically(a.json, j.dump(2) + "\n");
  }
  size_t detected = 0;
  for (const driver::MutantReport& r : reports) detected += r.detected;
  out << fmt::format("{} passed, {} failed (mutants detected, missed); {} mutants, seed {}\n", detected,
                     reports.size() - detected, reports.size(), options.first_seed);
  return all_detected ? kExitPass : kExitFail;
}

}  // namespace

Command AddMutantsCommand(CLI::App& app) {
  auto a = std::make_shared<MutantsArgs>();
  CLI::App* cmd = app.add_subcommand("mutants", "Run the mutant catalog: does the harness find each injected bug?");
  cmd->add_flag("--list", a->list, "Print each mutant with its definition and non-equivalent case space");
  cmd->add_option("--mutant", a->mutant, "Only this mutant (kebab-case)");
  cmd->add_option("--budget", a->budget, "Samples per search before it counts as a miss")->check(CLI::PositiveNumber);
  cmd->add_option("--seeds", a->seeds, "Searches per mode (targeted and uniform)")->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", a->seed, "First seed");
  cmd->add_option("--mix", a->mix, "Regions targeted draws aim at: knee=W,saturation=W,quant_boundary=W,bulk=W");
  cmd->add_option("--json", a->json, "Write {\"mutants\": [...]} as JSON");
  cmd->add_option("--fused", a->fused, "Inject into this backend's path (a --fused word; default: the built-in kernels)");
  cmd->add_flag("--all", a->all, "Print every mutant's row and the replay lines of the shrunk counterexamples");
  return Command{cmd, [a](const CommandContext& ctx) { return DoMutants(*a, ctx.out); }};
}

}  // namespace fusediff::cli

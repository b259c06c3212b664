#include <fmt/format.h>

#include <iterator>
#include <cmath>
#include <string>

#include "fusediff/model/mutants.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reports/reports.h"
#include "packed_text.h"

namespace fusediff::reports {

using nlohmann::ordered_json;

ordered_json StatsToJson(const ErrorStats& stats, bool derived) {
  ordered_json histogram = ordered_json::object();
  for (const auto& [error, count] : stats.histogram()) histogram[std::to_string(error)] = count;
  ordered_json j;
  j["count"] = stats.count();
  j["histogram"] = std::move(histogram);
  if (!derived) return j;
  j["mean"] = stats.mean();
  j["std"] = stats.stddev();
  j["min"] = stats.min();
  j["max"] = stats.max();
  j["max_abs"] = stats.max_abs();
  j["p50"] = stats.p50();
  j["p90"] = stats.p90();
  j["p99"] = stats.p99();
  j["p999"] = stats.p999();
  j["exact_fraction"] = stats.exact_fraction();
  return j;
}

namespace {
ordered_json QuantToJson(const QuantParams& q) {
  ordered_json j;
  j["type"] = std::string(to_string(q.type.scalar));
  j["scale"] = static_cast<double>(q.scale);  // exact value of the float32; parses back to the same float
  j["zero_point"] = q.zero_point;
  j["narrow"] = q.type.narrow;
  return j;
}

ordered_json ConventionToJson(const Convention& c) {
  ordered_json j;
  j["requant"] = std::string(to_string(c.requant));
  ordered_json intermediate = QuantToJson(c.intermediate.q);
  intermediate["rounding"] = std::string(to_string(c.intermediate.rounding));
  // As in the replay string: absent where they hold their defaults, so that older cases read as before.
  if (!(c.intermediate.stored == FloatBoundary{})) intermediate["stored"] = format_float_boundary(c.intermediate.stored);
  j["intermediate"] = std::move(intermediate);
  ordered_json output = QuantToJson(c.output.q);
  output["rounding"] = std::string(to_string(c.output.rounding));
  output["zero_point_order"] = std::string(to_string(c.output.zero_point_order));
  if (c.output.float_value) output["float_value"] = format_float_boundary(*c.output.float_value);
  j["output"] = std::move(output);
  if (c.post_ops != PostOpArithmetic::exact) j["post_ops"] = std::string(to_string(c.post_ops));
  if (c.float_conv.enabled) j["float_conv"] = format_float_conv(c.float_conv);
  return j;
}

// A stage parameter as PatternToJson has always written it (a quantization as QuantToJson, a window as an object).
ordered_json StageFieldToJson(const StageFieldValue& v) {
  if (const auto* q = std::get_if<QuantParams>(&v)) return QuantToJson(*q);
  if (const auto* w = std::get_if<PoolWindow>(&v)) return {{"kernel", w->kernel}, {"stride", w->stride}, {"padding", w->padding}};
  if (const auto* t = std::get_if<std::string>(&v)) return *t;
  if (const auto* i = std::get_if<int32_t>(&v)) return *i;
  return std::get<float>(v);
}

ordered_json PatternToJson(const Pattern& p, Fusion fusion) {
  ordered_json j;
  j["name"] = pattern_name(p);
  j["fusion"] = std::string(to_string(fusion));
  if (p.producer == Producer::fully_connected) j["multiplier"] = std::string(to_string(p.multiplier));
  ordered_json stages = ordered_json::array();
  for (const Stage& s : p.stages) {
    ordered_json stage;
    stage["kind"] = std::string(to_string(s.kind));
    for (const StageField& field : stage_module(s.kind).results_fields(s)) stage[field.key] = StageFieldToJson(field.value);
    stages.push_back(std::move(stage));
  }
  j["stages"] = std::move(stages);
  return j;
}

// [[key, value], ...] in order (json_read.cpp ReadPairs).
ordered_json PairsToJson(const std::vector<std::pair<std::string, std::string>>& pairs) {
  ordered_json out = ordered_json::array();
  for (const auto& [key, value] : pairs) out.push_back({key, value});
  return out;
}

ordered_json RegionsToJson(RegionSet regions) {
  ordered_json list = ordered_json::array();
  for (Region r : kAllRegions) {
    if (regions & region_bit(r)) list.push_back(std::string(to_string(r)));
  }
  if (list.empty()) list.push_back(std::string(to_string(Region::bulk)));
  return list;
}

// Coverage as a bitmap (16 hex digits per 64 codes, word i bit j = code qmin + 64 i + j) and the error range of
// every code whose range is not [0, 0], as runs of consecutive codes sharing a range, "gap,length,min,max;" with gap
// the codes since the previous run (since qmin for the first): tables err in runs. Both texts packed (packed_text.h):
// a default run's 170 cases hold about 90,000 runs.
ordered_json PerCodeToJson(const CodeErrors& codes) {
  ordered_json j;
  j["qmin"] = codes.qmin();
  j["code_count"] = codes.code_count();
  std::string bitmap;
  bitmap.reserve(codes.covered_words().size() * 16);
  for (uint64_t word : codes.covered_words()) bitmap += fmt::format("{:016x}", word);
  j["covered_bitmap"] = PackText(bitmap);
  std::string ranges;
  int64_t next = codes.qmin();  // the code after the previous run
  const auto& nonzero = codes.nonzero();
  for (auto it = nonzero.begin(); it != nonzero.end();) {
    auto last = it;
    for (auto n = std::next(it); n != nonzero.end() && n->first == last->first + 1 && n->second == it->second; ++n) last = n;
    ranges += fmt::format("{},{},{},{};", it->first - next, last->first - it->first + 1, it->second.min, it->second.max);
    next = int64_t{last->first} + 1;
    it = std::next(last);
  }
  j["error_ranges"] = PackText(ranges);
  return j;
}

// A conv case's draws (model/draw_tallies.h), "gap,b0,b1,b2,b3,b4,sum,max_abs;" per draw, gap the draws since the
// previous one (since 0 for the first), packed.
ordered_json DrawsToJson(const DrawTallies& draws) {
  std::string text;
  uint64_t next = 0;
  for (const DrawTally& d : draws.draws()) {
    text += fmt::format("{},{},{},{},{},{},{},{};", d.draw - next, d.bins[0], d.bins[1], d.bins[2], d.bins[3], d.bins[4],
                        d.sum, d.max_abs);
    next = d.draw + 1;
  }
  ordered_json j;
  j["count"] = draws.draws().size();
  j["bins"] = "e<=-2,e=-1,e=0,e=+1,e>=+2";
  j["tallies"] = PackText(text);
  return j;
}

ordered_json RunsToJson(const std::vector<CodeRun>& runs) {
  ordered_json out = ordered_json::array();
  for (const CodeRun& r : runs) {
    out.push_back({{"u_lo", r.u_lo}, {"u_hi", r.u_hi}, {"codes", r.codes}, {"delta", r.delta}, {"row_lo", r.row_lo},
                   {"row_hi", r.row_hi}});
  }
  return out;
}

// The gate's comparison with the canonical table: mode, slack, the canonical table's statistics and per-code
// errors (for the plot), and the runs where the candidate is worse or better.
ordered_json CanonicalToJson(const CanonicalComparison& k) {
  ordered_json j;
  j["mode"] = k.mode;
  j["construction"] = k.construction;
  j["rows"] = k.rows;
  j["slack"] = k.slack;
  j["slack_source"] = k.slack_source;
  j["error_lsb"] = StatsToJson(k.canonical);
  j["per_code"] = PerCodeToJson(k.canonical_per_code);
  j["worse_codes"] = k.worse_codes;
  j["better_codes"] = k.better_codes;
  j["worse"] = RunsToJson(k.worse);
  j["better"] = RunsToJson(k.better);
  ordered_json rows = ordered_json::array();
  for (const WorseRow& r : k.worse_rows) {
    rows.push_back({{"index", r.index}, {"value", r.value}, {"canonical_value", r.canonical_value}, {"u_lo", r.u_lo},
                    {"u_hi", r.u_hi}, {"worse_codes", r.worse_codes}, {"worst_u", r.worst_u}, {"error", r.error},
                    {"canonical_error", r.canonical_error}});
  }
  j["worse_rows"] = std::move(rows);
  return j;
}

// A worst sample without its replay line: /8 writes the case's `replay` once, and the reader derives each sample's
// line from the case (model/results.h fill_replays), as the run did.
ordered_json WorstToJson(const std::vector<WorstCaseReport>& list) {
  ordered_json worst = ordered_json::array();
  for (const WorstCaseReport& w : list) {
    ordered_json item;
    item["sample"] = w.sample.sample;
    item["acc"] = w.sample.acc;
    item["u"] = w.sample.u;
    item["y_ref"] = w.sample.y_ref;
    item["y_fused"] = w.sample.y_fused;
    item["error"] = w.sample.error;
    item["regions"] = RegionsToJson(w.sample.regions);
    if (!w.sample.implementation.empty()) item["implementation"] = w.sample.implementation;
    if (!w.sample.formulation.empty()) item["formulation"] = w.sample.formulation;
    if (!w.sample.repetitions.empty()) item["repetitions"] = w.sample.repetitions;
    worst.push_back(std::move(item));
  }
  return worst;
}

// One ledger entry's tally in a case (known_defects / documented_behaviours): its counts, the distribution of the
// errors it explains and its worst samples (kLedgerTallyWorst); /7 and earlier also had its per-region histograms.
ordered_json LedgerTallyToJson(const KnownDefectTally& t) {
  ordered_json item;
  item["id"] = t.id;
  item["draws"] = t.draws;
  item["samples"] = t.samples;
  item["predicted_samples"] = t.predicted_samples;
  if (t.withheld_samples > 0) item["withheld_samples"] = t.withheld_samples;  // model not_executed: never compared
  item["explained"] = StatsToJson(t.stats.overall);
  item["worst"] = WorstToJson(t.worst);
  item["status"] = t.no_longer_reproduces() ? "no_longer_reproduces" : "reproduces";
  return item;
}

// ErrorBins as [{bin, count, sum_abs, max_abs}], ascending by bin.
ordered_json ErrorBinsToJson(const ErrorBins& bins) {
  ordered_json out = ordered_json::array();
  for (const auto& [key, b] : bins.bins) {
    ordered_json item;
    item["bin"] = key;
    item["count"] = b.count;
    item["sum_abs"] = b.sum_abs;
    item["max_abs"] = b.max_abs;
    out.push_back(std::move(item));
  }
  return out;
}

ordered_json ActivationToJson(const Activation& a) {
  ordered_json activation;
  activation["kind"] = std::string(to_string(a.kind));
  activation["params"] = ordered_json::object();
  if (takes_alpha(a.kind)) activation["params"]["alpha"] = static_cast<double>(a.alpha);
  return activation;
}

ordered_json CaseToJson(const CaseResult& c, uint64_t seed) {
  ordered_json j;
  j["name"] = c.spec.name;
  j["source"] = std::string(to_string(c.spec.source));
  j["mix"] = format_region_mix(c.spec.mix);
  j["activation"] = ActivationToJson(c.spec.convention.activation);
  j["convention"] = ConventionToJson(c.spec.convention);
  j["pattern"] = PatternToJson(c.spec.pattern, c.spec.fusion);
  j["fused"] = std::string(fused_path_name(c.spec));
  j["comparison"] = std::string(to_string(c.spec.comparison));
  // What stood behind the path's word (a plugin's name, version, options, limits: model/backend.h ReplayFactKeys),
  // then sample 0's line: every worst sample's is this one with its own sample, formulation and repetitions.
  if (!c.spec.backend_facts.empty()) j["backend_facts"] = PairsToJson(c.spec.backend_facts);
  j["replay"] = format_replay(ReplayKey{seed, 0, c.spec, std::nullopt, std::nullopt, 0});
  j["reference_convention"] = c.reference_convention;
  j["fused_convention"] = c.fused_convention;
  if (!c.implementation.empty()) j["implementation"] = c.implementation;
  if (c.unsupported_samples > 0) {
    j["unsupported_samples"] = c.unsupported_samples;
    j["first_unsupported_sample"] = c.first_unsupported_sample;
    j["unsupported_sample_reason"] = c.unsupported_sample_reason;
  }
  if (c.withheld_samples > 0) {  // not executed: the library would crash on them, no ledger entry explains it
    j["withheld_samples"] = c.withheld_samples;
    j["first_withheld_sample"] = c.first_withheld_sample;
    j["withheld_reason"] = c.withheld_reason;
  }
  // Draws the path's process lost: it died on them, or gave no answer in time (docs/plugins.md).
  for (auto [lost, word] : {std::pair{&c.crashed, "crashed"}, std::pair{&c.timed_out, "timeout"}}) {
    if (lost->samples == 0) continue;
    const std::string name = word;
    j[name + "_samples"] = lost->samples;
    j["first_" + name + "_sample"] = lost->first_sample;
    j[name + "_reason"] = lost->reason;
    j[name + "_replay"] = lost->replay;
  }
  j["mutant"] = c.spec.mutant == Mutant::none ? ordered_json(nullptr) : ordered_json(std::string(to_string(c.spec.mutant)));
  if (!c.spec.table_fingerprint.empty()) {  // an external table (fusediff gate): part of the case's identity
    j["table"] = {{"fingerprint", c.spec.table_fingerprint}, {"file", c.spec.table_file}, {"sha256", c.spec.table_sha256}};
  }
  j["samples"] = c.stats.overall.count();
  j["requested_samples"] = c.spec.samples;
  j["sample_set"] = CaseSampleSetId(seed, c.spec);
  j["complete"] = c.complete;
  j["error_lsb"] = StatsToJson(c.stats.overall);
  ordered_json regions = ordered_json::object();
  for (Region r : kAllRegions) regions[std::string(to_string(r))] = StatsToJson(c.stats.by_region[static_cast<size_t>(r)], false);
  j["regions"] = std::move(regions);
  ordered_json coverage;
  coverage["intermediate_codes"] = c.intermediate_codes_covered;
  // An f32 reference intermediate has no codes: its per_code is empty.
  const bool f32_reference = reference_convention(c.spec).intermediate.kind == IntermediateKind::f32;
  coverage["intermediate_code_count"] =
      f32_reference ? 0u : keyed_boundary(c.spec.pattern, reference_convention(c.spec)).type.code_count();
  coverage["reference_escalations"] = c.reference_escalations;
  coverage["hard_codes"] = c.hard_codes;
  coverage["hard_codes_covered"] = c.hard_codes_covered;
  j["coverage"] = std::move(coverage);
  j["per_code"] = PerCodeToJson(c.per_code);
  if (!c.stats.draws.empty()) j["draws"] = DrawsToJson(c.stats.draws);
  j["worst_capacity"] = c.stats.worst.capacity();
  j["worst"] = WorstToJson(c.worst);
  for (LedgerKind kind : {LedgerKind::known_defect, LedgerKind::documented_behaviour}) {
    ordered_json tallies = ordered_json::array();
    for (const KnownDefectTally& t : c.known_defects) {
      if (t.kind == kind) tallies.push_back(LedgerTallyToJson(t));
    }
    if (!tallies.empty()) j[kind == LedgerKind::known_defect ? "known_defects" : "documented_behaviours"] = std::move(tallies);
  }
  if (c.table_readback) {  // the path's own table, read back and checked before any draw (model/results.h)
    const TableReadback& t = *c.table_readback;
    ordered_json readback{{"codes", t.codes}, {"mismatches", t.mismatches}};
    if (t.mismatches > 0) {
      readback["first"] = {{"code", t.first_code}, {"library", t.first_library}, {"declared", t.first_declared}};
    }
    j["table_readback"] = std::move(readback);
  }
  if (c.bound_ratio) {  // a float output's r (model/results.h BoundRatio); an infinite r is written "inf"
    const BoundRatio& b = *c.bound_ratio;
    ordered_json r{{"samples", b.samples}, {"unbounded", b.unbounded}, {"over", b.over}};
    if (!b.unbounded_reason.empty()) r["unbounded_reason"] = b.unbounded_reason;
    if (b.samples > 0) {
      const auto number = [](double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json("inf"); };
      r["max"] = {{"r", number(b.max_r)}, {"sample", b.max_sample}, {"delta", number(b.max_delta)},
                  {"bound", b.max_bound}};
    }
    j["bound_ratio"] = std::move(r);
  }
  if (c.batchnorm_bins) {
    // bit_width(|u - zu|) and floor(log2 |gamma| / sqrt(var + eps)) bins (model/error_bins.h).
    ordered_json bins;
    bins["by_u_magnitude"] = ErrorBinsToJson(c.batchnorm_bins->by_u);
    bins["by_gain_log2"] = ErrorBinsToJson(c.batchnorm_bins->by_gain);
    j["batchnorm_error_bins"] = std::move(bins);
  }
  // A library path's attribution, determinism and paired formulations; absent for the built-in paths, so their
  // results stay as they were.
  if (c.repeat > 1) {
    j["repeat"] = c.repeat;
    j["nondeterministic_samples"] = c.stats.nondeterministic;
    j["nondeterministic"] = WorstToJson(c.nondeterministic);
  }
  if (!c.stats.by_implementation.empty()) {
    ordered_json by = ordered_json::object();
    for (const auto& [name, stats] : c.stats.by_implementation) by[name] = StatsToJson(stats, false);
    j["by_implementation"] = std::move(by);
  }
  if (!c.stats.by_formulation.empty()) {
    ordered_json by = ordered_json::object();
    for (const auto& [name, stats] : c.stats.by_formulation) by[name] = StatsToJson(stats, false);
    j["by_formulation"] = std::move(by);
  }
  if (!c.stats.paired.dimension.empty()) {
    const PairedFormulations& p = c.stats.paired;
    ordered_json paired;
    paired["dimension"] = p.dimension;
    paired["draws"] = p.draws;
    paired["both_samples"] = p.both_samples;
    paired["differing_samples"] = p.differing_samples;
    paired["max_abs_difference"] = p.max_abs_difference;
    ordered_json values = ordered_json::array();
    for (size_t i = 0; i < p.values.size(); ++i) {
      values.push_back({{"value", p.values[i]}, {"rejected_samples", p.rejected[i]}, {"error_lsb", StatsToJson(p.errors[i], false)}});
    }
    paired["values"] = std::move(values);
    j["paired_formulations"] = std::move(paired);
  }
  ordered_json tolerance;
  tolerance["max_abs_lsb"] = c.tolerance.max_abs_lsb;
  if (c.tolerance.min_exact_fraction) tolerance["min_exact_fraction"] = *c.tolerance.min_exact_fraction;
  if (c.tolerance.max_abs_mean_lsb) tolerance["max_abs_mean_lsb"] = *c.tolerance.max_abs_mean_lsb;
  if (c.tolerance.documented_behaviour_fails) tolerance["documented_behaviour"] = "fails";
  j["tolerance"] = std::move(tolerance);
  j["verdict"] = std::string(to_string(c.verdict));
  if (!c.reason.empty()) j["reason"] = c.reason;
  return j;
}
}  // namespace

ordered_json CaseDefinitionToJson(const CaseSpec& spec) {
  ordered_json j;
  j["source"] = std::string(to_string(spec.source));
  j["mix"] = format_region_mix(spec.mix);
  j["activation"] = ActivationToJson(spec.convention.activation);
  j["convention"] = ConventionToJson(spec.convention);
  j["pattern"] = PatternToJson(spec.pattern, spec.fusion);
  j["fused"] = std::string(fused_path_name(spec));
  j["comparison"] = std::string(to_string(spec.comparison));
  j["mutant"] = std::string(to_string(spec.mutant));
  j["table"] = spec.table_fingerprint.empty() ? std::string("built in") : spec.table_fingerprint;
  j["requested_samples"] = spec.samples;
  return j;
}

ordered_json ToJson(const RunResult& run) {
  ordered_json j;
  j["format"] = kResultsFormat;
  j["tool"] = {{"name", run.provenance.tool_name},
               {"version", run.provenance.tool_version},
               {"git_commit", run.provenance.git_commit}};
  j["platform"] = {{"compiler", run.provenance.compiler}, {"libc", run.provenance.libc}, {"isa", run.provenance.isa}};
  if (!run.provenance.backends.empty()) {
    ordered_json backends = ordered_json::array();
    for (const BackendProvenance& b : run.provenance.backends) {
      backends.push_back({{"name", b.backend}, {"provenance", PairsToJson(b.fields)}});
    }
    j["platform"]["backends"] = backends;
  }
  j["command_line"] = run.provenance.command_line;
  j["created"] = run.provenance.created;
  if (run.gate) {
    j["gate"] = {{"descriptor", run.gate->descriptor_path},
                 {"table_file", run.gate->table_path},
                 {"table_sha256", run.gate->table_sha256},
                 {"table_kind", run.gate->table_kind},
                 {"tolerance_source", run.gate->tolerance_source},
                 {"verdict", run.any_failure() ? "reject" : "accept"}};
    if (run.gate->canonical) j["gate"]["canonical"] = CanonicalToJson(*run.gate->canonical);
    if (!run.gate->illegal_fusion.empty()) j["gate"]["illegal_fusion"] = run.gate->illegal_fusion;
  }
  j["seed"] = run.seed;
  j["sample_set"] = SampleSetId(run);
  j["shard"] = {{"index", run.shard_index}, {"count", run.shard_count}, {"source", run.shard_source}};
  j["complete"] = run.complete;
  ordered_json cases = ordered_json::array();
  for (const CaseResult& c : run.cases) cases.push_back(CaseToJson(c, run.seed));
  j["cases"] = std::move(cases);
  return j;
}

std::string ResultsText(const RunResult& run) { return DumpJson(ToJson(run)); }

}  // namespace fusediff::reports

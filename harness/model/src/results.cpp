#include "fusediff/model/results.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
constexpr detail::Names<Verdict, 9> kVerdicts{{{"pass", Verdict::pass},
                                               {"fail", Verdict::fail},
                                               {"unsupported", Verdict::unsupported},
                                               {"cross_convention", Verdict::cross_convention},
                                               {"known_defect", Verdict::known_defect},
                                               {"nondeterministic", Verdict::nondeterministic},
                                               {"documented_behaviour", Verdict::documented_behaviour},
                                               {"crashed", Verdict::crashed},
                                               {"timeout", Verdict::timeout}}};
}  // namespace

std::string_view to_string(Verdict v) { return detail::NameOf(v, kVerdicts); }

bool fails_run(Verdict v) {
  return v == Verdict::fail || v == Verdict::nondeterministic || v == Verdict::crashed || v == Verdict::timeout;
}

bool RunResult::any_failure() const {
  if (gate && !gate->illegal_fusion.empty()) return true;
  for (const CaseResult& c : cases) {
    if (fails_run(c.verdict)) return true;
  }
  return false;
}

void LostSamples::add(uint64_t first, uint64_t count, const std::string& why) {
  if (count == 0) return;
  if (samples == 0 || first < first_sample) {
    first_sample = first;
    reason = why;
  }
  samples += count;
}

void LostSamples::merge(const LostSamples& part) {
  if (part.samples == 0) return;
  if (samples == 0 || part.first_sample < first_sample) {
    first_sample = part.first_sample;
    reason = part.reason;
    replay = part.replay;
  }
  samples += part.samples;
}

void BoundRatio::add(uint64_t sample, double delta, double bound) {
  if (!std::isfinite(bound) || !(bound > 0)) {
    ++unbounded;
    return;
  }
  ++samples;
  // A NaN against a number, or an infinity, is beyond every bound.
  const double r = std::isnan(delta) ? std::numeric_limits<double>::infinity() : delta / bound;
  if (r > 1) ++over;
  if (samples == 1 || r > max_r || (r == max_r && sample < max_sample)) {
    max_r = r;
    max_sample = sample;
    max_delta = delta;
    max_bound = bound;
  }
}

void BoundRatio::merge(const BoundRatio& part) {
  if (unbounded_reason.empty()) unbounded_reason = part.unbounded_reason;
  unbounded += part.unbounded;
  over += part.over;
  if (part.samples > 0 && (samples == 0 || part.max_r > max_r || (part.max_r == max_r && part.max_sample < max_sample))) {
    max_r = part.max_r;
    max_sample = part.max_sample;
    max_delta = part.max_delta;
    max_bound = part.max_bound;
  }
  samples += part.samples;
}

uint64_t compared_samples(const CaseResult& c) {
  return c.stats.overall.count() + explained_samples(c, LedgerKind::known_defect) +
         explained_samples(c, LedgerKind::documented_behaviour);
}

uint64_t explained_samples(const CaseResult& c, LedgerKind kind) {
  uint64_t n = 0;
  for (const KnownDefectTally& t : c.known_defects) n += t.kind == kind ? t.stats.overall.count() : 0;
  return n;
}

uint64_t withheld_samples(const CaseResult& c, LedgerKind kind) {
  uint64_t n = 0;
  for (const KnownDefectTally& t : c.known_defects) n += t.kind == kind ? t.withheld_samples : 0;
  return n;
}

}  // namespace fusediff

namespace fusediff {

std::string join_implementations(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : " | ") + name;
  return out;
}

std::vector<std::string> split_implementations(const std::string& joined) {
  std::vector<std::string> names;
  for (size_t begin = 0; begin < joined.size();) {
    const size_t end = joined.find(" | ", begin);
    names.push_back(joined.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 3;
  }
  return names;
}

void fill_replays(CaseResult& result, uint64_t seed) {
  // A library path's sample replays under the formulation it ran (and, where repetitions differ, all of them).
  const auto replay = [&](const WorstCase& w, uint32_t repeat) {
    ReplayKey key{seed, w.sample, result.spec, std::nullopt, std::nullopt, 0};
    if (!w.formulation.empty()) key.formulation = parse_formulation(w.formulation, "worst.formulation");
    key.repeat = repeat;
    return format_replay(key);
  };
  result.worst.clear();
  for (const WorstCase& w : result.stats.worst.sorted()) result.worst.push_back(WorstCaseReport{w, replay(w, 0)});
  result.nondeterministic.clear();
  for (const WorstCase& w : result.stats.nondeterministic_worst.sorted()) {
    result.nondeterministic.push_back(WorstCaseReport{w, replay(w, result.repeat)});
  }
  for (KnownDefectTally& t : result.known_defects) {
    t.worst.clear();
    for (const WorstCase& w : t.stats.worst.sorted()) t.worst.push_back(WorstCaseReport{w, replay(w, 0)});
  }
  for (LostSamples* lost : {&result.crashed, &result.timed_out}) {
    lost->replay = lost->samples > 0 ? replay(WorstCase{.sample = lost->first_sample}, 0) : std::string();
  }
}

void finish_case_result(CaseResult& result, uint64_t seed) {
  result.intermediate_codes_covered = result.per_code.covered_count();
  result.hard_codes_covered = 0;
  for (int32_t u : result.hard_codes) result.hard_codes_covered += result.per_code.covered(u) ? 1 : 0;
  fill_replays(result, seed);
  // "ID (N samples)" of each entry of a kind that explains something.
  const auto explained_ids = [&](LedgerKind kind) {
    std::string ids;
    for (const KnownDefectTally& t : result.known_defects) {
      if (t.kind != kind || t.stats.overall.count() + t.withheld_samples == 0) continue;
      ids += (ids.empty() ? "" : ", ") + t.id + " (" + std::to_string(t.stats.overall.count() + t.withheld_samples) +
             (t.withheld_samples > 0 ? " samples not executed: the library crashes on their draws)" : " samples)");
    }
    return ids;
  };
  const uint64_t known =
      explained_samples(result, LedgerKind::known_defect) + withheld_samples(result, LedgerKind::known_defect);
  const uint64_t documented = explained_samples(result, LedgerKind::documented_behaviour) +
                              withheld_samples(result, LedgerKind::documented_behaviour);
  if (result.verdict == Verdict::unsupported) return;
  if (result.table_readback && result.table_readback->mismatches > 0) {  // checked before any draw ran
    const TableReadback& t = *result.table_readback;
    result.verdict = Verdict::fail;
    result.reason = "the library's table differs from the declared one on " + std::to_string(t.mismatches) + " of " +
                    std::to_string(t.codes) + " input codes (first: input code " + std::to_string(t.first_code) +
                    ": library " + std::to_string(t.first_library) + ", declared " +
                    std::to_string(t.first_declared) + "); no draw ran";
    return;
  }
  // A lost draw fails the case whatever else was compared: the path's process died or hung on it.
  if (result.crashed.samples > 0 || result.timed_out.samples > 0) {
    const bool crashed = result.crashed.samples > 0;
    const LostSamples& lost = crashed ? result.crashed : result.timed_out;
    result.verdict = crashed ? Verdict::crashed : Verdict::timeout;
    result.reason = std::to_string(lost.samples) + (crashed ? " samples crashed: " : " samples timed out: ") +
                    lost.reason + " (first: sample " + std::to_string(lost.first_sample) + ")";
    if (crashed && result.timed_out.samples > 0) {
      result.reason += "; " + std::to_string(result.timed_out.samples) + " samples timed out (first: sample " +
                       std::to_string(result.timed_out.first_sample) + ")";
    }
    return;
  }
  if (result.stats.nondeterministic > 0) {
    // Checked before the value comparison and whatever the comparison: the path disagrees with itself.
    result.verdict = Verdict::nondeterministic;
    result.reason = std::to_string(result.stats.nondeterministic) + " samples differ between " +
                    std::to_string(result.repeat) + " repetitions of their draw (first: sample " +
                    std::to_string(result.stats.nondeterministic_worst.sorted().front().sample) + ")";
    if (result.spec.comparison == Comparison::same_convention) {
      const std::string values = check_tolerance(result.stats.overall, result.tolerance);
      if (!values.empty()) result.reason += "; values: " + values;
    }
    return;
  }
  if (result.withheld_samples > 0) {  // a crash no ledger entry explains fails, whatever the comparison
    result.verdict = Verdict::fail;
    result.reason = std::to_string(result.withheld_samples) + " samples not executed: " + result.withheld_reason +
                    " (first: sample " + std::to_string(result.first_withheld_sample) +
                    "; no ledger entry explains it)";
    return;
  }
  if (result.stats.overall.count() + known + documented == 0 &&
      result.unsupported_samples > 0) {  // the library rejected every draw
    result.verdict = Verdict::unsupported;
    result.reason = result.unsupported_sample_reason;
    return;
  }
  if (result.spec.comparison == Comparison::cross_convention) {
    result.verdict = Verdict::cross_convention;
    result.reason = "cross-convention measurement, no verdict: the fused path declares " +
                    describe(declared_convention(result.spec)) + ", the reference runs " +
                    describe(reference_convention(result.spec));
    return;
  }
  result.reason = check_tolerance(result.stats.overall, result.tolerance);
  result.verdict = result.reason.empty() ? Verdict::pass : Verdict::fail;
  if (result.verdict != Verdict::pass) return;
  const std::string behaviour =
      documented > 0 ? "documented behaviour: " + explained_ids(LedgerKind::documented_behaviour) : "";
  if (documented > 0 && result.tolerance.documented_behaviour_fails) {
    result.verdict = Verdict::fail;
    result.reason = behaviour + ", failing under --strict";
  } else if (known > 0) {
    result.verdict = Verdict::known_defect;
    result.reason = "known defect: " + explained_ids(LedgerKind::known_defect) +
                    (documented > 0 ? "; " + behaviour : "") + "; every other sample within tolerance";
  } else if (documented > 0) {
    result.verdict = Verdict::documented_behaviour;
    result.reason = behaviour + "; every other sample within tolerance";
  }
}

void merge_known_defects(std::vector<KnownDefectTally>& into, const std::vector<KnownDefectTally>& part) {
  for (const KnownDefectTally& p : part) {
    auto it = std::find_if(into.begin(), into.end(), [&](const KnownDefectTally& t) { return t.id == p.id; });
    if (it == into.end()) {
      into.push_back(p);
      continue;
    }
    it->draws += p.draws;
    it->samples += p.samples;
    it->predicted_samples += p.predicted_samples;
    it->withheld_samples += p.withheld_samples;
    it->stats.merge(p.stats);
  }
  std::sort(into.begin(), into.end(), [](const KnownDefectTally& a, const KnownDefectTally& b) { return a.id < b.id; });
}

void merge_case_result(CaseResult& into, const CaseResult& part, uint64_t seed) {
  if (canonical_key(into.spec) != canonical_key(part.spec) || into.spec.mutant != part.spec.mutant ||
      into.spec.samples != part.spec.samples) {
    throw InputError("case '" + into.spec.name + "': the parts describe different cases");
  }
  if (into.repeat != part.repeat) {
    throw InputError("case '" + into.spec.name + "': the parts ran " + std::to_string(into.repeat) + " and " +
                     std::to_string(part.repeat) + " repetitions");
  }
  if (!(into.tolerance == part.tolerance)) {
    throw InputError("case '" + into.spec.name + "': the parts were judged against different tolerances");
  }
  // Unsupported as a whole (the path cannot express the case) must hold for every part; a part whose draws the
  // library happened to reject all is an ordinary part with nothing compared.
  const auto unsupported_as_a_whole = [](const CaseResult& r) {
    return r.verdict == Verdict::unsupported && r.unsupported_samples == 0;
  };
  if (unsupported_as_a_whole(into) != unsupported_as_a_whole(part)) {
    throw InputError("case '" + into.spec.name + "': unsupported in one part only");
  }
  if (!unsupported_as_a_whole(into) && into.verdict == Verdict::unsupported)
    into.verdict = Verdict::pass;                                               // recomputed
  if (into.verdict == Verdict::nondeterministic || into.verdict == Verdict::crashed || into.verdict == Verdict::timeout)
    into.verdict = Verdict::pass;  // recomputed from the merged counts
  into.stats.merge(part.stats);
  into.per_code.merge(part.per_code);
  // A per-code table is the same in every part (its escalations too); an f32 intermediate counts per sample.
  if (reference_convention(into.spec).intermediate.kind == IntermediateKind::f32) {
    into.reference_escalations += part.reference_escalations;
  } else {
    into.reference_escalations = std::max(into.reference_escalations, part.reference_escalations);
  }
  into.complete = into.complete && part.complete;
  if (part.unsupported_samples > 0 &&
      (into.unsupported_samples == 0 || part.first_unsupported_sample < into.first_unsupported_sample)) {
    into.first_unsupported_sample = part.first_unsupported_sample;
    into.unsupported_sample_reason = part.unsupported_sample_reason;
  }
  into.unsupported_samples += part.unsupported_samples;
  if (part.withheld_samples > 0 &&
      (into.withheld_samples == 0 || part.first_withheld_sample < into.first_withheld_sample)) {
    into.first_withheld_sample = part.first_withheld_sample;
    into.withheld_reason = part.withheld_reason;
  }
  into.withheld_samples += part.withheld_samples;
  into.crashed.merge(part.crashed);
  into.timed_out.merge(part.timed_out);
  merge_known_defects(into.known_defects, part.known_defects);
  if (into.table_readback != part.table_readback) {  // one table per case: every part reads the same back
    throw InputError("case '" + into.spec.name + "': the parts read back different tables");
  }
  if (part.bound_ratio) {
    if (!into.bound_ratio) into.bound_ratio.emplace();
    into.bound_ratio->merge(*part.bound_ratio);
  }
  if (part.batchnorm_bins) {
    if (!into.batchnorm_bins) into.batchnorm_bins.emplace();
    into.batchnorm_bins->merge(*part.batchnorm_bins);
  }
  std::vector<std::string> names = split_implementations(into.implementation);
  for (const std::string& name : split_implementations(part.implementation)) names.push_back(name);
  into.implementation = join_implementations(std::move(names));
  into.seconds += part.seconds;
  finish_case_result(into, seed);
}

std::string provenance_value(const Provenance& provenance, std::string_view backend, std::string_view key) {
  for (const BackendProvenance& b : provenance.backends) {
    if (b.backend != backend) continue;
    for (const auto& [k, v] : b.fields) {
      if (k == key) return v;
    }
  }
  return {};
}

}  // namespace fusediff

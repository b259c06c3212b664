#include "fusediff/model/results.h"

#include <algorithm>

#include "fusediff/model/errors.h"

namespace fusediff {

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "fail";
    case Verdict::unsupported: return "unsupported";
    case Verdict::cross_convention: return "cross_convention";
  }
  return "?";
}

bool RunResult::any_failure() const {
  for (const CaseResult& c : cases) {
    if (c.verdict == Verdict::fail) return true;
  }
  return false;
}

}  // namespace fusediff

namespace fusediff {

void finish_case_result(CaseResult& result, uint64_t seed) {
  result.intermediate_codes_covered = result.per_code.covered_count();
  result.hard_codes_covered = 0;
  for (int32_t u : result.hard_codes) result.hard_codes_covered += result.per_code.covered(u) ? 1 : 0;
  result.worst.clear();
  for (const WorstCase& w : result.stats.worst.sorted()) {
    result.worst.push_back(WorstCaseReport{w, format_replay(ReplayKey{seed, w.sample, result.spec})});
  }
  if (result.verdict == Verdict::unsupported) return;
  if (result.spec.comparison == Comparison::cross_convention) {
    result.verdict = Verdict::cross_convention;
    result.reason = "cross-convention measurement, no verdict: the fused path declares " +
                    describe(declared_convention(result.spec)) + ", the reference runs " +
                    describe(reference_convention(result.spec));
    return;
  }
  result.reason = check_tolerance(result.stats.overall, result.tolerance);
  result.verdict = result.reason.empty() ? Verdict::pass : Verdict::fail;
}

void merge_case_result(CaseResult& into, const CaseResult& part, uint64_t seed) {
  if (canonical_key(into.spec) != canonical_key(part.spec) || into.spec.mutant != part.spec.mutant ||
      into.spec.samples != part.spec.samples) {
    throw InputError("case '" + into.spec.name + "': the parts describe different cases");
  }
  if (!(into.tolerance == part.tolerance)) {
    throw InputError("case '" + into.spec.name + "': the parts were judged against different tolerances");
  }
  if ((into.verdict == Verdict::unsupported) != (part.verdict == Verdict::unsupported)) {
    throw InputError("case '" + into.spec.name + "': unsupported in one part only");
  }
  into.stats.merge(part.stats);
  into.per_code.merge(part.per_code);
  into.reference_escalations = std::max(into.reference_escalations, part.reference_escalations);
  into.complete = into.complete && part.complete;
  if (into.unsupported_samples == 0) into.unsupported_sample_reason = part.unsupported_sample_reason;
  into.unsupported_samples += part.unsupported_samples;
  if (into.implementation.empty()) into.implementation = part.implementation;
  into.seconds += part.seconds;
  finish_case_result(into, seed);
}

}  // namespace fusediff

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "fusediff/model/diagnostics.h"
#include "fusediff/reports/reports.h"
#include "fusediff/reports/sha256.h"

namespace fusediff::reports {


std::string CaseSampleSetId(uint64_t seed, const CaseSpec& spec) {
  // effective_samples: a sweep runs every code whatever was requested, so only what actually runs counts.
  return Sha256Hex(fmt::format("fusediff-sample-set/1;seed={};{};mutant={};samples={}", seed, canonical_key(spec),
                               to_string(spec.mutant), effective_samples(spec)));
}

std::string SampleSetId(const RunResult& run) {
  std::string text = fmt::format("fusediff-run-sample-set/1;seed={}", run.seed);
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
  for (const CaseResult& c : run.cases) text += ";" + CaseSampleSetId(run.seed, c.spec);
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
  return Sha256Hex(text);
}

}  // namespace fusediff::reports

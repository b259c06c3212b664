#pragma once
// The pattern tests' one property (call it inside an RC_GTEST_PROP): on a random seed, a random case of `cases` kept
// whole (same convention) passes at tolerance 0, and a cross-convention case stays a measurement.
#include <rapidcheck.h>

#include <cstdint>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/model/case_spec.h"

namespace fusediff::test_support {

inline void CheckAnyCaseOnAnySeed(const std::vector<CaseSpec>& cases, driver::ReferenceCache& cache) {
  const CaseSpec& spec = *rc::gen::elementOf(cases);
  driver::RunOptions run;
  run.seed = *rc::gen::inRange<uint64_t>(1, uint64_t{1} << 40);
  RC_TAG(spec.name);
  const CaseResult r = driver::RunCase(spec, run, cache);
  if (spec.comparison == Comparison::same_convention) {
    RC_ASSERT(r.verdict == Verdict::pass);
    RC_ASSERT(r.stats.overall.max_abs() == 0);
  } else {
    RC_ASSERT(r.verdict == Verdict::cross_convention);
  }
}

}  // namespace fusediff::test_support

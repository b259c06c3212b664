#pragma once
// Proving the harness finds real bugs: for each mutant of the catalog, generate cases from the mutant's
// non-equivalent space (convention included) and count the samples until the first failing verdict under the
// fused path's default tolerance, with targeted generation and with uniform sampling of the same space; shrink
// the first counterexample to a minimal case with a v2 replay string.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/mutants.h"
#include "fusediff/model/results.h"

namespace fusediff::driver {

struct MutantSearchOptions {
  uint64_t budget = 50000;   // samples per search before giving up
  uint32_t seeds = 20;       // independent searches per mode
  uint64_t first_seed = 1;
  RegionMix mix;             // what targeted draws aim at
  // The path the mutated cases run on (a CaseSpec::backend value, model/backend.h): the built-in kernels unless set,
  // e.g. `mutants --fused WORD` for a backend that injects the catalog's mutants into its own path.
  std::string backend = std::string(kBuiltInPath);
};

// A failing sample with everything needed to re-run it.
struct Counterexample {
  CaseSpec spec;
  ExplicitConv sample;
  int32_t y_reference = 0;
  int32_t y_fused = 0;
  int64_t tolerance = 0;
};

struct SearchRun {
  bool detected = false;
  uint64_t samples = 0;  // samples compared up to and including the first failing one (the budget if none)
  std::optional<Counterexample> counterexample;
};

// One search: cases from GenerateMutantCase(mutant, targeted, seed, ...), conv draws (targeted: aimed by `mix`;
// uniform: plain random), samples in order until |e| exceeds the default tolerance or the budget runs out.
SearchRun SearchMutant(Mutant mutant, bool targeted, uint64_t seed, uint64_t budget, const RegionMix& mix,
                       const std::string& backend = std::string(kBuiltInPath));

// Greedy shrinking that keeps the failure: the failing output's receptive field alone (batch 1, one output
// channel, stride 1, no padding or dilation), then input channels, kernel rows and kernel columns removed one at
// a time with the bias absorbing their contribution, so the accumulator is unchanged. Every step is re-run through
// reference and fused paths and kept only if the sample still fails.
Counterexample Shrink(const Counterexample& failing);

// Re-runs an explicit sample: {y_reference, y_fused}.
std::pair<int32_t, int32_t> EvaluateExplicit(const CaseSpec& spec, const ExplicitConv& sample);

// The worst sample of a failed conv-source case (`fusediff run`), regenerated from its seed and shrunk (Shrink)
// through the case's own path, with the v2 replay string of the shrunk sample; nullopt where the case is not a
// conv-source failure with a worst sample, or the sample no longer fails when run again.
struct ShrunkFailure {
  Counterexample counterexample;
  std::string replay;
};
std::optional<ShrunkFailure> ShrinkWorstSample(const CaseResult& result, uint64_t seed);

struct MutantReport {
  Mutant mutant = Mutant::none;
  bool detected = false;                 // some targeted search found it
  uint64_t seeds = 0;
  uint64_t budget = 0;
  uint64_t median_targeted = 0;          // median samples to first detection (budget for a miss)
  uint64_t median_uniform = 0;
  uint32_t missed_targeted = 0;          // searches that reached the budget
  uint32_t missed_uniform = 0;
  bool ratio_is_lower_bound = false;     // the uniform median is the budget: the true ratio is at least this
  double ratio = 0;                      // median_uniform / median_targeted
  std::optional<Counterexample> shrunk;  // from the first detecting targeted search
  std::string replay;                    // v2 replay string of `shrunk`
};

MutantReport EvaluateMutant(Mutant mutant, const MutantSearchOptions& options);

}  // namespace fusediff::driver

#pragma once
// The --pattern cases of several patterns at `samples` a case, in the suite's order: the pattern tests' one way to
// collect the cases they check.
#include <initializer_list>
#include <string>
#include <vector>

#include "fusediff/driver/suite.h"
#include "fusediff/model/case_spec.h"

namespace fusediff::test_support {

inline std::vector<CaseSpec> CasesOfPatterns(std::initializer_list<const char*> patterns, size_t samples) {
  driver::SuiteOptions options;
  options.samples = samples;
  std::vector<CaseSpec> cases;
  for (const char* p : patterns) {
    for (CaseSpec& spec : driver::PatternCases(options, std::string(p))) cases.push_back(std::move(spec));
  }
  return cases;
}

}  // namespace fusediff::test_support

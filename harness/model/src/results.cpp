#include "fusediff/model/results.h"

namespace fusediff {

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "fail";
    case Verdict::unsupported: return "unsupported";
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

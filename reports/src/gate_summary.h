#pragma once
// What a gate result says in one line, the same in the terminal, the HTML title and the Markdown heading: ACCEPT or
// REJECT, the mode and the reason (gate_report.cpp).
#include <string>
#include <vector>

#include "fusediff/model/results.h"

namespace fusediff::reports {

struct GateSummary {
  bool accept = true;
  std::string mode;    // "relative mode, k = 1" / "absolute mode" / "illegal fusion"
  std::string reason;  // why: the first failing case's reason, or what the accepted table met
};
GateSummary SummarizeGate(const RunResult& run);
// "ACCEPT (relative mode, k = 1): REASON".
std::string GateHeadline(const GateSummary& summary);

// The worst samples to show, spread over the worse rows: the worst sample within each worse row's codes first (in
// row order), then the rest by |e|; at most `count`.
std::vector<const WorstCaseReport*> SpreadForDisplay(const CaseResult& c, const RunResult& run, size_t count);

// A worse row as a reviewer reads it: "knot 100: -154 (canonical -151): e -3 at u = -19977 (canonical +0); feeds u in
// [-20095, -19841], 120 of them worse".
std::string WorseRowText(const WorseRow& row, const std::string& rows);

}  // namespace fusediff::reports

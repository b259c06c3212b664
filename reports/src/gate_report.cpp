#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/reports/reports.h"
#include "gate_summary.h"

namespace fusediff::reports {

namespace {
std::string Histogram(const ErrorStats& s) {
  std::string out;
  for (const auto& [error, count] : s.histogram()) {
    out += fmt::format("{}{:+d}: {}", out.empty() ? "" : ", ", error, count);
  }
  return out.empty() ? "(no samples)" : out;
}

std::string ToleranceText(const Tolerance& t) {
  std::string out = fmt::format("max |e| <= {} LSB", t.max_abs_lsb);
  if (t.min_exact_fraction) out += fmt::format(", exact fraction >= {}", *t.min_exact_fraction);
  if (t.max_abs_mean_lsb) out += fmt::format(", |bias| <= {} LSB", *t.max_abs_mean_lsb);
  return out;
}
std::string RunLine(const CodeRun& run, const std::string& rows) {
  const std::string rows_text = run.row_lo == run.row_hi ? fmt::format("{} {}", rows, run.row_lo)
                                                         : fmt::format("{}s {}..{}", rows, run.row_lo, run.row_hi);
  return fmt::format("    u in [{}, {}]: {} codes, up to {:+d} ({})\n", run.u_lo, run.u_hi, run.codes, run.delta, rows_text);
}

std::string RunList(const std::vector<CodeRun>& runs, uint64_t codes, const std::string& rows, size_t shown) {
  std::string out;
  for (size_t i = 0; i < runs.size() && i < shown; ++i) out += RunLine(runs[i], rows);
  if (runs.size() > shown || runs.size() == kMaxCodeRuns) out += fmt::format("    ... ({} codes in all)\n", codes);
  return out;
}

std::string WorseRowsText(const CanonicalComparison& k, size_t shown) {
  if (k.worse_rows.empty()) return "";
  std::string out = fmt::format("  {} {}{} worse than canonical (value, canonical value, signed error at its worst code, "
                                "the codes it feeds):\n", k.worse_rows.size(), k.rows, k.worse_rows.size() == 1 ? "" : "s");
  for (size_t i = 0; i < k.worse_rows.size() && i < shown; ++i) out += "    " + WorseRowText(k.worse_rows[i], k.rows) + "\n";
  if (k.worse_rows.size() > shown) out += fmt::format("    ... ({} {}s in all)\n", k.worse_rows.size(), k.rows);
  return out;
}

// Candidate (the sweep) and canonical side by side, then where the candidate is worse and where it is better.
std::string SideBySide(const ErrorStats& candidate, const CanonicalComparison& k, size_t shown_runs) {
  const ErrorStats& c = k.canonical;
  std::string out = fmt::format("  {:<26}{:>12}{:>12}\n", "against the canonical table", "candidate", "canonical");
  out += fmt::format("  {:<26}{:>12.4f}{:>12.4f}\n", "exact %", 100.0 * candidate.exact_fraction(), 100.0 * c.exact_fraction());
  out += fmt::format("  {:<26}{:>+12.5f}{:>+12.5f}\n", "bias (LSB)", candidate.mean(), c.mean());
  out += fmt::format("  {:<26}{:>12}{:>12}\n", "p99 |e|", candidate.p99(), c.p99());
  out += fmt::format("  {:<26}{:>12}{:>12}\n", "max |e|", candidate.max_abs(), c.max_abs());
  const size_t worse_runs = k.worse.size();
  out += fmt::format("  worse than canonical by more than k = {}: {} codes{}\n", k.slack, k.worse_codes,
                     k.worse_codes ? fmt::format(" in {}{} runs", worse_runs, worse_runs == kMaxCodeRuns ? "+" : "") : "");
  out += RunList(k.worse, k.worse_codes, k.rows, shown_runs);
  out += WorseRowsText(k, 16);
  out += fmt::format("  better than canonical: {} codes{}\n", k.better_codes,
                     k.better_codes ? fmt::format(" in {}{} runs", k.better.size(), k.better.size() == kMaxCodeRuns ? "+" : "")
                                    : "");
  out += RunList(k.better, k.better_codes, k.rows, shown_runs);
  return out;
}
}  // namespace

std::string WorseRowText(const WorseRow& r, const std::string& rows) {
  return fmt::format("{} {}: {} (canonical {}): e {:+d} at u = {} (canonical {:+d}); feeds u in [{}, {}], {} of them worse",
                     rows, r.index, r.value, r.canonical_value, r.error, r.worst_u, r.canonical_error, r.u_lo, r.u_hi,
                     r.worse_codes);
}

GateSummary SummarizeGate(const RunResult& run) {
  GateSummary g;
  g.accept = !run.any_failure();
  const CanonicalComparison* k = run.gate && run.gate->canonical ? &*run.gate->canonical : nullptr;
  if (run.gate && !run.gate->illegal_fusion.empty()) {
    g.mode = "illegal fusion";
    g.reason = "rule " + run.gate->illegal_fusion;
    return g;
  }
  g.mode = k && k->mode == kGateModeRelative ? fmt::format("relative mode, k = {}", k->slack) : "absolute mode";
  for (const CaseResult& c : run.cases) {
    if (fails_run(c.verdict)) {
      g.reason = c.spec.name + ": " + c.reason;
      return g;
    }
  }
  const int64_t max = run.cases.empty() ? 0 : run.cases.front().stats.overall.max_abs();
  const int64_t bound = run.cases.empty() ? 0 : run.cases.front().tolerance.max_abs_lsb;
  g.reason = k && k->mode == kGateModeRelative
                 ? fmt::format("every code within |e_canonical| + {}, max |e| {} <= {}, |bias| within the canonical "
                               "table's + {} LSB", k->slack, max, bound, 0.1)
                 : fmt::format("max |e| {} <= {} LSB on every code and conv sample", max, bound);
  return g;
}

std::string GateHeadline(const GateSummary& g) {
  return fmt::format("{} ({}): {}", g.accept ? "ACCEPT" : "REJECT", g.mode, g.reason);
}

std::vector<const WorstCaseReport*> SpreadForDisplay(const CaseResult& c, const RunResult& run, size_t count) {
  std::vector<const WorstCaseReport*> out;
  std::vector<bool> taken(c.worst.size(), false);
  if (run.gate && run.gate->canonical) {
    for (const WorseRow& r : run.gate->canonical->worse_rows) {
      for (size_t i = 0; i < c.worst.size() && out.size() < count; ++i) {
        const int32_t u = c.worst[i].sample.u;
        if (taken[i] || u < r.u_lo || u > r.u_hi) continue;
        out.push_back(&c.worst[i]);
        taken[i] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < c.worst.size() && out.size() < count; ++i) {
    if (!taken[i]) out.push_back(&c.worst[i]);
  }
  return out;
}

std::string RenderGate(const RunResult& run, size_t listed_codes) {
  std::string out;
  if (run.gate) {
    out += fmt::format("descriptor  {}\n", run.gate->descriptor_path);
    out += fmt::format("table       {} ({}, sha256 {})\n", run.gate->table_path, run.gate->table_kind,
                       run.gate->table_sha256);
    if (!run.gate->illegal_fusion.empty()) {
      // Refused before any sample: the fusion itself changes the graph's meaning.
      out += fmt::format("fusion      ILLEGAL, rule {}\nverdict: {}\n", run.gate->illegal_fusion,
                         GateHeadline(SummarizeGate(run)));
      return out + ClosingLine(run);
    }
  }
  if (!run.cases.empty()) {
    out += fmt::format("convention  {}\n", describe(run.cases.front().spec.convention));
    out += fmt::format("tolerance   {} ({})\n", ToleranceText(run.cases.front().tolerance),
                       run.gate ? run.gate->tolerance_source : "default");
  }
  const CanonicalComparison* canonical = run.gate && run.gate->canonical ? &*run.gate->canonical : nullptr;
  if (canonical) {
    if (canonical->mode == kGateModeRelative) {
      out += fmt::format("mode        relative: every code |e| <= |e_canonical| + k, max |e| <= canonical max + k, "
                         "|bias| <= canonical |bias| + 0.1 LSB; k = {} ({})\n",
                         canonical->slack, canonical->slack_source);
    } else {
      out += "mode        absolute: the tolerance above decides; the canonical table is shown, not judged\n";
    }
    out += fmt::format("canonical   {}\n", canonical->construction);
  }
  for (const CaseResult& c : run.cases) {
    const ErrorStats& s = c.stats.overall;
    const bool sweep = c.spec.source == SampleSource::sweep;
    out += fmt::format("\n{}: {} {} ({})\n", c.spec.name, s.count(), sweep ? "codes, every intermediate code once" : "conv samples",
                       to_string(c.verdict));
    if (c.verdict == Verdict::unsupported) {
      out += fmt::format("  unsupported: {}\n", c.reason);
      continue;
    }
    out += fmt::format("  error (LSB) histogram  {}\n", Histogram(s));
    out += fmt::format("  exact {:.4f}%  bias {:+.5f}  std {:.5f}  p99 |e| {}  max |e| {}\n", 100.0 * s.exact_fraction(),
                       s.mean(), s.stddev(), s.p99(), s.max_abs());
    if (sweep && canonical) out += SideBySide(s, *canonical, 10);
    if (c.verdict == Verdict::fail) out += fmt::format("  REJECT: {}\n", c.reason);
    const std::vector<const WorstCaseReport*> shown = SpreadForDisplay(c, run, 5);
    if (!shown.empty() && shown.front()->sample.error != 0) {
      out += "  worst:";
      for (const WorstCaseReport* report : shown) {
        const WorstCase& w = report->sample;
        if (w.error != 0) out += fmt::format(" u={} (y_ref {}, y_table {}, e {:+d})", w.u, w.y_ref, w.y_fused, w.error);
      }
      out += "\n";
    }
    if (sweep && s.max_abs() > c.tolerance.max_abs_lsb) {
      // Every code breaking the bound: the sweep holds one sample per code, so the histogram counts them all.
      uint64_t offending = 0;
      for (const auto& [error, count] : s.histogram()) {
        if (std::llabs(error) > c.tolerance.max_abs_lsb) offending += count;
      }
      // In code order, from the per-code errors (a sweep's range at a code is that code's error).
      std::string codes;
      size_t listed = 0;
      for (const auto& [u, range] : c.per_code.nonzero()) {
        if (std::max(std::llabs(range.min), std::llabs(range.max)) <= c.tolerance.max_abs_lsb) continue;
        if (listed == listed_codes) break;
        codes += fmt::format("{}{}", codes.empty() ? "" : ", ", u);
        ++listed;
      }
      out += fmt::format("  offending codes ({} with |e| > {}): {}{}\n", offending, c.tolerance.max_abs_lsb, codes,
                         offending > listed ? fmt::format(" and {} more", offending - listed) : "");
    }
  }
  out += fmt::format("\nverdict: {}\n", GateHeadline(SummarizeGate(run)));
  return out + ClosingLine(run);
}

}  // namespace fusediff::reports

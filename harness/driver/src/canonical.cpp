// The canonical table of a descriptor and the gate's code-by-code comparison with it (canonical.h).
#include "fusediff/driver/canonical.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>

#include "fusediff/fused/canonical.h"
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/lut.h"
#include "fusediff/model/errors.h"
#include "table_cache.h"

namespace fusediff::driver {

struct ReferenceCacheAccess {
  static TableCache& get(ReferenceCache& cache) { return *cache.impl_; }
};

namespace {

// Codes farther apart than this start a new run: a run is one stretch of table rows a reviewer looks at.
constexpr int32_t kRunGap = 8;

std::string_view RowName(TableKind kind) {
  switch (kind) {
    case TableKind::lut_interp:
      return "knot";
    case TableKind::pwl:
      return "segment";
    default:
      return "entry";
  }
}

// The table rows code u reads: knots i (and i + 1 when it interpolates), the segment index, or the entry u.
std::pair<int32_t, int32_t> RowsOf(const TableData& table, int32_t u) {
  switch (table.kind) {
    case TableKind::lut_interp: {
      const int32_t knot = 256 + (u >> 7);
      return {knot, knot + ((u & 127) != 0 ? 1 : 0)};
    }
    case TableKind::pwl: {
      const auto it = std::lower_bound(table.segments.begin(), table.segments.end(), u,
                                       [](const PwlSegment& s, int32_t code) { return s.u_hi < code; });
      const int32_t index = static_cast<int32_t>(it - table.segments.begin());
      return {index, index};
    }
    default:
      return {u, u};
  }
}

// Extends the last run by code u (within kRunGap of it) or starts a new one; `delta` keeps the extreme.
void AddToRuns(std::vector<CodeRun>& runs, const TableData& table, int32_t u, int64_t delta, bool worse) {
  const auto [row_lo, row_hi] = RowsOf(table, u);
  if (!runs.empty() && u - runs.back().u_hi <= kRunGap) {
    CodeRun& run = runs.back();
    run.u_hi = u;
    ++run.codes;
    run.delta = worse ? std::max(run.delta, delta) : std::min(run.delta, delta);
    run.row_lo = std::min(run.row_lo, row_lo);
    run.row_hi = std::max(run.row_hi, row_hi);
    return;
  }
  if (runs.size() < kMaxCodeRuns) runs.push_back(CodeRun{u, u, 1, delta, row_lo, row_hi});
}

void Reject(CaseResult& c, const std::string& why) {
  if (c.verdict == Verdict::unsupported || c.verdict == Verdict::cross_convention) return;
  c.reason = c.verdict == Verdict::fail ? c.reason + "; " + why : why;
  c.verdict = Verdict::fail;
}

std::string RunText(const CodeRun& run, std::string_view rows) {
  const std::string rows_text = run.row_lo == run.row_hi ? fmt::format("{} {}", rows, run.row_lo)
                                                         : fmt::format("{}s {}..{}", rows, run.row_lo, run.row_hi);
  return fmt::format("u in [{}, {}] ({}): up to {:+d}", run.u_lo, run.u_hi, rows_text, run.delta);
}

}  // namespace

std::vector<int32_t> ReferenceCodes(const Convention& convention, ReferenceCache& cache) {
  const reference::ActivationTable& table = ReferenceCacheAccess::get(cache).get(convention);
  const int32_t qmin = convention.intermediate.q.type.qmin();
  std::vector<int32_t> y(table.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = table.at(qmin + static_cast<int32_t>(i)).y;
  return y;
}

CanonicalTable BuildCanonicalTable(const FusedOpDescriptor& descriptor, const TableData& candidate,
                                   ReferenceCache& cache) {
  const Convention& c = descriptor.convention;
  const std::vector<int32_t> y = ReferenceCodes(c, cache);
  const int32_t qmin = c.intermediate.q.type.qmin();
  CanonicalTable out;
  out.table.kind = descriptor.table_kind;
  switch (descriptor.table_kind) {
    case TableKind::lut:
      out.table.lut = y;
      out.construction = "the correctly rounded table";
      break;
    case TableKind::lut_interp: {
      const auto knots = fused::LUTPopulateInt16(c.activation, c.intermediate.q.scale, 0, c.output.q.scale, 0);
      out.table.knots.assign(knots.begin(), knots.end());
      out.construction = "TFLite LUTPopulateInt16";
      break;
    }
    case TableKind::pwl:
      for (const PwlSegment& s : candidate.segments) {
        const std::span<const int32_t> codes(y.data() + (s.u_lo - qmin), static_cast<size_t>(s.u_hi - s.u_lo + 1));
        const fused::PwlLine line = fused::MinimaxPwlLine(codes, s.u_lo, s.shift, c.output.q.type);
        out.table.segments.push_back(line.segment);
        out.exhaustive = out.exhaustive && line.exhaustive;
      }
      out.construction = out.exhaustive ? "the exact minimax line per segment (the candidate's boundaries and shifts)"
                                        : "the minimax line per segment (the candidate's boundaries and shifts); a "
                                          "search hit its breakpoint cap, so a segment's line is the best found";
      break;
  }
  std::string unsupported;
  const std::unique_ptr<fused::FusedKernel> kernel =
      fused::FusedKernel::Create(c, descriptor.table_kind, Mutant::none, &unsupported,
                                 std::make_shared<const TableData>(out.table));
  if (!kernel) throw InputError("canonical table: " + unsupported);
  out.errors.resize(y.size());
  for (size_t i = 0; i < y.size(); ++i) out.errors[i] = kernel->ApplyTable(qmin + static_cast<int32_t>(i)) - y[i];
  return out;
}

MinimaxPwlTable GenerateMinimaxPwl(const Convention& convention, int32_t segment_count, ReferenceCache& cache) {
  const fused::PwlFit placement = fused::FitPwl(convention, segment_count);
  const std::vector<int32_t> y = ReferenceCodes(convention, cache);
  const int32_t qmin = convention.intermediate.q.type.qmin();
  MinimaxPwlTable out;
  for (const PwlSegment& s : placement.segments) {
    const std::span<const int32_t> codes(y.data() + (s.u_lo - qmin), static_cast<size_t>(s.u_hi - s.u_lo + 1));
    const fused::PwlLine line = fused::MinimaxPwlLine(codes, s.u_lo, s.shift, convention.output.q.type);
    out.segments.push_back(line.segment);
    out.segment_max_abs_error.push_back(line.max_abs_error);
  }
  return out;
}

CanonicalComparison CompareWithCanonical(std::vector<CaseResult>& cases, const CanonicalTable& canonical,
                                         const TableData& candidate, int64_t slack, const std::string& slack_source,
                                         bool judge) {
  if (cases.empty() || cases.front().spec.source != SampleSource::sweep) {
    throw InputError("canonical comparison: the first case must be the sweep over every code");
  }
  CaseResult& sweep = cases.front();
  const int32_t qmin = sweep.per_code.qmin();
  const size_t count = canonical.errors.size();
  CanonicalComparison out;
  out.mode = judge ? kGateModeRelative : kGateModeAbsolute;
  out.construction = canonical.construction;
  out.rows = std::string(RowName(candidate.kind));
  out.slack = slack;
  out.slack_source = slack_source;
  out.canonical_per_code = CodeErrors(qmin, static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) {
    out.canonical.add(canonical.errors[i]);
    out.canonical_per_code.add(qmin + static_cast<int32_t>(i), canonical.errors[i]);
  }
  // The sweep holds one sample per code: its range at a code is that code's error.
  std::vector<int64_t> errors(count, 0);
  for (const auto& [code, range] : sweep.per_code.nonzero()) {
    errors[static_cast<size_t>(code - qmin)] = std::abs(range.min) > std::abs(range.max) ? range.min : range.max;
  }
  for (size_t i = 0; i < count; ++i) {
    const int32_t u = qmin + static_cast<int32_t>(i);
    const int64_t delta = std::abs(errors[i]) - std::abs(int64_t{canonical.errors[i]});
    if (delta > slack) {
      ++out.worse_codes;
      AddToRuns(out.worse, candidate, u, delta, true);
    } else if (delta < 0) {
      ++out.better_codes;
      AddToRuns(out.better, candidate, u, delta, false);
    }
  }
  if (!judge) return out;

  if (out.worse_codes > 0) {
    Reject(sweep, fmt::format("{} codes worse than the canonical table by more than k = {}, first {}", out.worse_codes,
                              slack, RunText(out.worse.front(), out.rows)));
  }
  const double bias_bound = std::abs(out.canonical.mean()) + kBiasSlackLsb;
  if (std::abs(sweep.stats.overall.mean()) > bias_bound) {
    Reject(sweep, fmt::format("|bias| {:.5f} > canonical |bias| {:.5f} + {} LSB", std::abs(sweep.stats.overall.mean()),
                              std::abs(out.canonical.mean()), kBiasSlackLsb));
  }
  // Conv samples: the code each sample landed on decides.
  for (size_t k = 1; k < cases.size(); ++k) {
    CaseResult& conv = cases[k];
    uint64_t offending = 0;
    std::string listed;
    for (const auto& [code, range] : conv.per_code.nonzero()) {
      const int64_t worst = std::max(std::abs(range.min), std::abs(range.max));
      if (worst <= std::abs(int64_t{canonical.errors[static_cast<size_t>(code - qmin)]}) + slack) continue;
      if (++offending <= 8) listed += fmt::format("{}{}", listed.empty() ? "" : ", ", code);
    }
    if (offending > 0) {
      Reject(conv, fmt::format("{} codes where a sample's |e| exceeds |e_canonical| + {} (u = {}{})", offending, slack,
                               listed, offending > 8 ? ", ..." : ""));
    }
  }
  return out;
}

}  // namespace fusediff::driver

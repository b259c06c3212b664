// The canonical table of a descriptor and the gate's code-by-code comparison with it (canonical.h).
#include "fusediff/driver/canonical.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
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

// The codes row `row` feeds: a knot the 255 codes around its own, a segment its range, an entry its code.
std::pair<int32_t, int32_t> CodesOfRow(const TableData& table, int32_t row, const QuantType& type) {
  switch (table.kind) {
    case TableKind::lut_interp:
      return {std::max(type.qmin(), 128 * (row - 257) + 1), std::min(type.qmax(), 128 * (row - 255) - 1)};
    case TableKind::pwl:
      return {table.segments[static_cast<size_t>(row)].u_lo, table.segments[static_cast<size_t>(row)].u_hi};
    default:
      return {row, row};
  }
}

// A row as a reviewer compares it with the canonical one.
std::string RowValue(const TableData& table, int32_t row, int32_t qmin) {
  switch (table.kind) {
    case TableKind::lut_interp:
      return std::to_string(table.knots[static_cast<size_t>(row)]);
    case TableKind::pwl: {
      const PwlSegment& s = table.segments[static_cast<size_t>(row)];
      return fmt::format("slope {} offset {} shift {}", s.slope, s.offset, s.shift);
    }
    default:
      return std::to_string(table.lut[static_cast<size_t>(row - qmin)]);
  }
}

// The rows that differ from the canonical table's and feed a code worse by more than the slack (a worse code's
// rows cannot all equal the canonical ones: its output would be the canonical one), each with its worst code.
std::vector<WorseRow> WorseRows(const TableData& candidate, const CanonicalTable& canonical, const QuantType& type,
                                const std::vector<int64_t>& errors, int64_t slack) {
  std::map<int32_t, WorseRow> rows;
  std::map<int32_t, int64_t> worst_delta;
  for (size_t i = 0; i < errors.size(); ++i) {
    const int32_t u = type.qmin() + static_cast<int32_t>(i);
    const int64_t delta = std::abs(errors[i]) - std::abs(int64_t{canonical.errors[i]});
    if (delta <= slack) continue;
    const auto [first, second] = RowsOf(candidate, u);
    for (int32_t row : first == second ? std::vector<int32_t>{first} : std::vector<int32_t>{first, second}) {
      if (RowValue(candidate, row, type.qmin()) == RowValue(canonical.table, row, type.qmin())) continue;
      WorseRow& r = rows[row];
      ++r.worse_codes;
      auto [it, fresh] = worst_delta.emplace(row, delta);
      if (fresh || delta > it->second) {
        it->second = delta;
        r.worst_u = u;
        r.error = errors[i];
        r.canonical_error = canonical.errors[i];
      }
    }
  }
  std::vector<WorseRow> out;
  for (auto& [index, r] : rows) {
    if (out.size() == kMaxCodeRuns) break;
    r.index = index;
    r.value = RowValue(candidate, index, type.qmin());
    r.canonical_value = RowValue(canonical.table, index, type.qmin());
    std::tie(r.u_lo, r.u_hi) = CodesOfRow(candidate, index, type);
    out.push_back(std::move(r));
  }
  return out;
}

// The row a sample at code u is charged to: the first of its rows that is worse, else the first.
int32_t ChargedRow(const TableData& table, int32_t u, const std::set<int32_t>& worse) {
  const auto [first, second] = RowsOf(table, u);
  return !worse.count(first) && worse.count(second) ? second : first;
}

// Keeps kGateWorstShown of a case's worst samples, spread over rows: the worse rows first (worst first), then the
// others by their worst sample; one sample of each row per round. A sweep row missing from the pool (its codes err
// less than canonical-like codes elsewhere) gets its worst code from the per-code errors.
void SpreadWorst(CaseResult& c, const TableData& table, const std::vector<WorseRow>& rows,
                 const std::vector<int32_t>& reference, uint64_t seed) {
  std::set<int32_t> worse;
  for (const WorseRow& r : rows) worse.insert(r.index);
  std::map<int32_t, std::vector<WorstCase>> by_row;
  for (const WorstCase& w : c.stats.worst.sorted()) by_row[ChargedRow(table, w.u, worse)].push_back(w);
  const int32_t qmin = c.spec.convention.intermediate.q.type.qmin();
  std::vector<int32_t> order;
  for (const WorseRow& r : rows) {
    if (c.spec.source == SampleSource::sweep && !by_row.count(r.index)) {
      const size_t i = static_cast<size_t>(r.worst_u - qmin);
      by_row[r.index].push_back(WorstCase{i, r.error, 0, r.worst_u, reference[i], static_cast<int32_t>(reference[i] + r.error), 0});
    }
    if (by_row.count(r.index)) order.push_back(r.index);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::llabs(by_row[a].front().error) > std::llabs(by_row[b].front().error);
  });
  std::vector<int32_t> rest;
  for (const auto& [row, list] : by_row) {
    if (!worse.count(row)) rest.push_back(row);
  }
  std::stable_sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) {
    return std::llabs(by_row[a].front().error) > std::llabs(by_row[b].front().error);
  });
  order.insert(order.end(), rest.begin(), rest.end());
  WorstCases kept(kGateWorstShown);
  size_t taken = 0;
  for (size_t round = 0; taken < kGateWorstShown; ++round) {
    bool any = false;
    for (int32_t row : order) {
      if (round >= by_row[row].size() || taken == kGateWorstShown) continue;
      kept.offer(by_row[row][round]);
      any = true;
      ++taken;
    }
    if (!any) break;
  }
  c.stats.worst = kept;
  finish_case_result(c, seed);
}

std::string RowsText(const std::vector<WorseRow>& rows, std::string_view name) {
  std::string out;
  for (size_t i = 0; i < rows.size() && i < 3; ++i) {
    const WorseRow& r = rows[i];
    out += fmt::format("{}{} {} ({}, canonical {}: e {:+d} at u = {}, canonical {:+d})", i ? "; " : "", name, r.index,
                       r.value, r.canonical_value, r.error, r.worst_u, r.canonical_error);
  }
  if (rows.size() > 3) out += fmt::format("; {} more", rows.size() - 3);
  return out;
}

void Reject(CaseResult& c, const std::string& why) {
  if (c.verdict == Verdict::unsupported || c.verdict == Verdict::cross_convention) return;
  c.reason = c.verdict == Verdict::fail ? c.reason + "; " + why : why;
  c.verdict = Verdict::fail;
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
  out.reference = y;
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
                                         bool judge, uint64_t seed) {
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
  const QuantType type = sweep.spec.convention.intermediate.q.type;
  out.worse_rows = WorseRows(candidate, canonical, type, errors, slack);
  for (CaseResult& c : cases) SpreadWorst(c, candidate, out.worse_rows, canonical.reference, seed);
  if (!judge) return out;

  if (out.worse_codes > 0) {
    Reject(sweep, fmt::format("{} codes worse than the canonical table by more than k = {} in {} {}{}: {}", out.worse_codes,
                              slack, out.worse_rows.size(), out.rows, out.worse_rows.size() == 1 ? "" : "s",
                              RowsText(out.worse_rows, out.rows)));
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

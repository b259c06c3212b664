// The sign-off report: one self-contained HTML page (inline SVG with explicit sizes, no script, no external
// asset) and the same tables in Markdown for pull-request comments.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "fusediff/model/diagnostics.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {

// Markdown table cells: pipes and newlines would break the row; backticks would break code spans.
std::string MdCell(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n') out += ' ';
    else out += ch;
  }
  return out;
}
std::string MdCode(std::string_view s) {
  std::string inner = MdCell(s);
  std::replace(inner.begin(), inner.end(), '`', '\'');
  return "`" + inner + "`";
}

uint64_t TotalSamples(const RunResult& run) {
  uint64_t n = 0;
  for (const CaseResult& c : run.cases) n += c.stats.overall.count();
  return n;
}

// What a case's evidence proves: exhaustive when every intermediate code was compared and the fused path is a
// pure function of the code (sweep); otherwise sampled, with the rule-of-three bound when nothing failed.
struct Evidence {
  std::string kind;            // "exhaustive" / "sampled"
  uint64_t failing = 0;        // samples with |e| above the tolerance
  std::string failure_bound;   // "< 1.5e-04 (95%)" or "" when some sample failed
  std::string hard_cases;      // per-region counts
};

Evidence EvidenceOf(const CaseResult& c) {
  Evidence e;
  const ErrorStats& s = c.stats.overall;
  const uint32_t codes = c.spec.convention.intermediate.q.type.code_count();
  const bool exhaustive = c.spec.source == SampleSource::sweep && c.complete && c.intermediate_codes_covered == codes;
  e.kind = exhaustive ? fmt::format("exhaustive: every one of the {} intermediate codes", codes)
                      : fmt::format("sampled: {} samples, {} of {} intermediate codes", s.count(), c.intermediate_codes_covered, codes);
  for (const auto& [error, n] : s.histogram()) {
    if (std::abs(error) > c.tolerance.max_abs_lsb) e.failing += n;
  }
  if (e.failing == 0 && s.count() > 0) {
    e.failure_bound = exhaustive ? "0 (proven over every code)"
                                 : fmt::format("< {:.3g} (95% upper bound, 3/n)", FailureRateUpperBound95(s.count()));
  }
  for (Region r : kAllRegions) {
    e.hard_cases += fmt::format("{}{} {}", e.hard_cases.empty() ? "" : ", ", to_string(r),
                                c.stats.by_region[static_cast<size_t>(r)].count());
  }
  return e;
}

std::string Percent(double f) { return fmt::format("{:.4f}", 100 * f); }

struct StatsRow {
  std::string cells[11];
};
StatsRow StatsCells(const std::string& label, const ErrorStats& s) {
  return StatsRow{{label, std::to_string(s.count()), Percent(s.exact_fraction()), fmt::format("{:+.5f}", s.mean()),
                   fmt::format("{:.5f}", s.stddev()), std::to_string(s.p50()), std::to_string(s.p90()),
                   std::to_string(s.p99()), std::to_string(s.p999()), std::to_string(s.max_abs()),
                   fmt::format("[{}, {}]", s.min(), s.max())}};
}
constexpr const char* kStatsHeader[11] = {"", "samples", "exact %", "bias", "std", "p50 |e|", "p90 |e|", "p99 |e|",
                                          "p99.9 |e|", "max |e|", "min..max e"};

std::vector<std::pair<std::string, std::string>> ConventionRows(const CaseResult& c) {
  const Convention& v = c.spec.convention;
  std::string activation(to_string(v.activation.kind));
  if (takes_alpha(v.activation.kind)) activation += " (alpha " + format_float32(v.activation.alpha) + ")";
  return {{"activation", activation},
          {"source", std::string(to_string(c.spec.source))},
          {"fused path", std::string(fused_path_name(c.spec))},
          {"mutant", std::string(to_string(c.spec.mutant))},
          {"requant variant", std::string(to_string(v.requant))},
          {"intermediate", fmt::format("{} scale {} zero point {} rounding {}", to_string(v.intermediate.q.type),
                                       format_float32(v.intermediate.q.scale), v.intermediate.q.zero_point,
                                       to_string(v.intermediate.rounding))},
          {"output", fmt::format("{} scale {} zero point {} rounding {} ({})", to_string(v.output.q.type),
                                 format_float32(v.output.q.scale), v.output.q.zero_point, to_string(v.output.rounding),
                                 to_string(v.output.zero_point_order))},
          {"tolerance", c.verdict == Verdict::cross_convention
                            ? std::string("none: a cross-convention measurement is never judged")
                            : fmt::format("max |e| <= {} LSB{}{}", c.tolerance.max_abs_lsb,
                                          c.tolerance.min_exact_fraction ? fmt::format(", exact >= {}", *c.tolerance.min_exact_fraction) : "",
                                          c.tolerance.max_abs_mean_lsb ? fmt::format(", |bias| <= {}", *c.tolerance.max_abs_mean_lsb) : "")}};
}

// What the comparison compares when the fused path is a library's (or declares another convention): both
// conventions, the comparison kind, the implementations the library chose and the draws it rejected.
std::vector<std::pair<std::string, std::string>> ComparisonRows(const CaseResult& c) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (c.fused_convention.empty() || c.fused_convention == c.reference_convention) {
    if (c.implementation.empty() && c.unsupported_samples == 0) return rows;
  }
  rows.push_back({"comparison", std::string(to_string(c.spec.comparison))});
  rows.push_back({"reference runs", c.reference_convention});
  rows.push_back({"fused path declares", c.fused_convention});
  if (!c.implementation.empty()) rows.push_back({"implementations", c.implementation});
  if (c.unsupported_samples > 0) {
    rows.push_back({"samples not compared", fmt::format("{} (first at sample {}): {}", c.unsupported_samples,
                                                        c.first_unsupported_sample, c.unsupported_sample_reason)});
  }
  return rows;
}

// A library path's attribution: per implementation and per formulation choice, [kind, name, samples, exact %,
// max |e|]; then the paired formulations ([value, samples, exact %, max |e|, rejected samples]).
std::vector<std::array<std::string, 5>> AttributionRows(const CaseResult& c) {
  std::vector<std::array<std::string, 5>> rows;
  for (const auto& [name, s] : c.stats.by_implementation) {
    rows.push_back({"implementation", name, std::to_string(s.count()), Percent(s.exact_fraction()), std::to_string(s.max_abs())});
  }
  for (const auto& [name, s] : c.stats.by_formulation) {
    rows.push_back({"formulation", name, std::to_string(s.count()), Percent(s.exact_fraction()), std::to_string(s.max_abs())});
  }
  return rows;
}
std::vector<std::array<std::string, 5>> PairedRows(const PairedFormulations& p) {
  std::vector<std::array<std::string, 5>> rows;
  for (size_t i = 0; i < p.values.size(); ++i) {
    const ErrorStats& s = p.errors[i];
    rows.push_back({p.dimension + ":" + p.values[i], std::to_string(s.count()), Percent(s.exact_fraction()),
                    std::to_string(s.max_abs()), std::to_string(p.rejected[i])});
  }
  return rows;
}
std::string PairedSummary(const PairedFormulations& p) {
  return fmt::format("{} draws; on the {} samples where every value ran, {} outputs differ (max |difference| {})",
                     p.draws, p.both_samples, p.differing_samples, p.max_abs_difference);
}
std::string Attribution(const WorstCase& w) {
  if (w.implementation.empty() && w.formulation.empty()) return "";
  std::string out = w.implementation;
  if (!w.formulation.empty()) out.append(" [").append(w.formulation).append("]");
  return out;
}
std::string Repetitions(const WorstCase& w) {
  std::string out;
  for (int32_t y : w.repetitions) out.append(out.empty() ? "" : ", ").append(std::to_string(y));
  return out;
}

std::vector<std::pair<std::string, std::string>> ProvenanceRows(const RunResult& run) {
  std::vector<std::pair<std::string, std::string>> rows = {
      {"tool", run.provenance.tool_name + " " + run.provenance.tool_version},
      {"git commit", run.provenance.git_commit},
      {"date (UTC)", run.provenance.created},
      {"seed", std::to_string(run.seed)},
      {"samples", fmt::format("{} in {} cases", TotalSamples(run), run.cases.size())},
      {"sample set", SampleSetId(run)},
      {"shard", fmt::format("{}/{} (from {})", run.shard_index, run.shard_count, run.shard_source)},
      {"complete", run.complete ? "yes" : "NO (partial result: interrupted, or a merge of some shards)"},
      {"command line", run.provenance.command_line},
      {"platform", run.provenance.compiler + "; " + run.provenance.libc + "; " + run.provenance.isa}};
  if (!run.provenance.onednn_version.empty()) {
    rows.push_back({"oneDNN", run.provenance.onednn_version + ", dispatching to " + run.provenance.onednn_isa});
  }
  if (run.gate) {
    rows.push_back({"gate descriptor", run.gate->descriptor_path});
    rows.push_back({"table file", run.gate->table_path + " (" + run.gate->table_kind + ")"});
    rows.push_back({"table SHA-256", run.gate->table_sha256});
    rows.push_back({"tolerance", run.gate->tolerance_source});
  }
  return rows;
}

// ---- SVG plots: fixed sizes, explicit viewBox, so they render the same everywhere. ----------------------------

constexpr int kPlotWidth = 640, kPlotHeight = 240, kLeft = 56, kRight = 16, kTop = 16, kBottom = 36;

std::string SvgOpen(const std::string& label) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"{0}\" height=\"{1}\" "
                     "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">"
                     "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>",
                     kPlotWidth, kPlotHeight, HtmlEscape(label));
}

std::string Text(double x, double y, const std::string& s, const char* anchor = "middle") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"{}\">{}</text>", x, y, anchor, HtmlEscape(s));
}

std::string Axes(const std::string& x_label, const std::string& y_label) {
  const int x0 = kLeft, y0 = kPlotHeight - kBottom;
  return fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>"
                     "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#333\"/>",
                     x0, y0, kPlotWidth - kRight, kTop) +
         Text((kLeft + kPlotWidth - kRight) / 2.0, kPlotHeight - 6, x_label) +
         fmt::format("<text x=\"12\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1f})\">{}</text>",
                     (kTop + y0) / 2.0, (kTop + y0) / 2.0, HtmlEscape(y_label));
}

// Signed-error histogram, log10(count) bars.
std::string HistogramSvg(const ErrorStats& s) {
  std::string svg = SvgOpen("signed error histogram");
  const int64_t lo = std::min<int64_t>(s.min(), -1), hi = std::max<int64_t>(s.max(), 1);
  const double span = static_cast<double>(hi - lo + 1);
  const double plot_w = kPlotWidth - kLeft - kRight, plot_h = kPlotHeight - kTop - kBottom;
  uint64_t peak = 1;
  for (const auto& [e, n] : s.histogram()) peak = std::max(peak, n);
  const double log_peak = std::log10(static_cast<double>(peak)) + 1;  // +1: a count of 1 still gets a bar
  const double bar_w = plot_w / span;
  for (const auto& [e, n] : s.histogram()) {
    const double h = plot_h * (std::log10(static_cast<double>(n)) + 1) / log_peak;
    const double x = kLeft + (static_cast<double>(e - lo)) * bar_w;
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>e={}: {} samples</title></rect>",
                       x, kTop + plot_h - h, std::max(bar_w * 0.9, 1.0), h, e == 0 ? "#2a7" : "#c44", e, n);
  }
  svg += Axes("signed error e = y_fused - y_ref (LSB)", "count (log)");
  for (int64_t tick : {lo, int64_t{0}, hi}) svg += Text(kLeft + (tick - lo + 0.5) * bar_w, kPlotHeight - kBottom + 14, std::to_string(tick));
  for (uint64_t p = 1; p <= peak; p *= 10) {
    const double y = kTop + plot_h - plot_h * (std::log10(static_cast<double>(p)) + 1) / log_peak;
    svg += Text(kLeft - 4, y + 4, fmt::format("{}", p), "end");
    if (p > UINT64_MAX / 10) break;
  }
  return svg + "</svg>";
}

// The labels of an error-against-code plot: the code range under the axis, the error range and 0 beside it.
template <typename YOf>
std::string CodeAxisLabels(const QuantType& type, int64_t e_lo, int64_t e_hi, YOf y_of) {
  return Text(kLeft, kPlotHeight - kBottom + 14, fmt::format("{}", type.qmin()), "start") +
         Text(kPlotWidth - kRight, kPlotHeight - kBottom + 14, fmt::format("{}", type.qmax()), "end") +
         Text(kLeft - 4, y_of(static_cast<double>(e_hi)) + 4, std::to_string(e_hi), "end") +
         Text(kLeft - 4, y_of(static_cast<double>(e_lo)) + 4, std::to_string(e_lo), "end") +
         Text(kLeft - 4, y_of(0) + 4, "0", "end");
}

// |e| against a binned magnitude (model/error_bins.h): per bin a bar of the max |e| and a dot at the mean |e|, both
// on a linear LSB axis; `bin_label` names a bin's range under its bar.
template <typename BinLabel>
std::string ErrorBinsSvg(const std::string& title, const ErrorBins& bins, const std::string& x_label, BinLabel bin_label) {
  std::string svg = SvgOpen(title);
  const double plot_w = kPlotWidth - kLeft - kRight, plot_h = kPlotHeight - kTop - kBottom;
  int64_t peak = 1;
  for (const auto& [key, b] : bins.bins) peak = std::max(peak, b.max_abs);
  const double slot = plot_w / static_cast<double>(std::max<size_t>(bins.bins.size(), 1));
  auto y_of = [&](double e) { return kTop + plot_h - plot_h * e / static_cast<double>(peak); };
  size_t i = 0;
  for (const auto& [key, b] : bins.bins) {
    const double x = kLeft + slot * static_cast<double>(i++);
    const double mean = static_cast<double>(b.sum_abs) / static_cast<double>(b.count);
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#c44\"><title>{}: max |e| {}, "
                       "mean |e| {:.3f}, {} samples</title></rect>",
                       x + slot * 0.1, y_of(static_cast<double>(b.max_abs)), slot * 0.8,
                       plot_h - (y_of(static_cast<double>(b.max_abs)) - kTop), HtmlEscape(bin_label(key)), b.max_abs, mean, b.count);
    svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"#36c\"/>", x + slot * 0.5, y_of(mean));
    svg += Text(x + slot * 0.5, kPlotHeight - kBottom + 14, bin_label(key));
  }
  svg += Axes(x_label, "|e| (LSB): bar max, dot mean");
  svg += Text(kLeft - 4, y_of(static_cast<double>(peak)) + 4, std::to_string(peak), "end") + Text(kLeft - 4, y_of(0) + 4, "0", "end");
  return svg + "</svg>";
}

// BatchNorm's two plots: error against |u - zu| and against the channel gain (docs/batchnorm.md).
std::string BatchNormBinsSvg(const BatchNormErrorBins& bins) {
  const auto u_label = [](int32_t b) {
    return b == 0 ? std::string("0") : b == 1 ? std::string("1") : fmt::format("{}-{}", 1 << (b - 1), (1 << b) - 1);
  };
  const auto gain_label = [](int32_t b) { return fmt::format("2^{}", b); };
  return ErrorBinsSvg("error against |u|", bins.by_u, "|u - zu| (intermediate codes, bins by powers of two)", u_label) + "\n" +
         ErrorBinsSvg("error against channel gain", bins.by_gain,
                      "channel gain gamma / sqrt(var + eps), bin [2^b, 2^(b+1))", gain_label);
}

// Error against intermediate code: a min..max band per covered code, knees and saturation edges marked.
std::string CodeErrorSvg(const CaseResult& c) {
  std::string svg = SvgOpen("error against intermediate code");
  const CodeErrors& codes = c.per_code;
  const QuantType& type = c.spec.convention.intermediate.q.type;
  const double plot_w = kPlotWidth - kLeft - kRight, plot_h = kPlotHeight - kTop - kBottom;
  int64_t e_lo = -1, e_hi = 1;
  for (const auto& [code, r] : codes.nonzero()) {
    e_lo = std::min(e_lo, r.min);
    e_hi = std::max(e_hi, r.max);
  }
  const double qmin = type.qmin(), qmax = type.qmax();
  auto x_of = [&](double code) { return kLeft + (code - qmin) / std::max(qmax - qmin, 1.0) * plot_w; };
  auto y_of = [&](double e) { return kTop + (e_hi - e) / static_cast<double>(e_hi - e_lo) * plot_h; };
  // Zero line and the uncovered codes (grey ticks) first, so the errors draw on top.
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"#2a7\"/>", kLeft, y_of(0),
                     kPlotWidth - kRight, y_of(0));
  // Pixel columns: several codes share one at 65,536 codes; keep each column's extreme range.
  const int columns = static_cast<int>(plot_w);
  std::vector<int64_t> col_lo(columns, 0), col_hi(columns, 0);
  std::vector<bool> col_used(columns, false);
  for (const auto& [code, r] : codes.nonzero()) {
    const int col = std::clamp(static_cast<int>(x_of(code) - kLeft), 0, columns - 1);
    col_lo[col] = col_used[col] ? std::min(col_lo[col], r.min) : std::min<int64_t>(r.min, 0);
    col_hi[col] = col_used[col] ? std::max(col_hi[col], r.max) : std::max<int64_t>(r.max, 0);
    col_used[col] = true;
  }
  for (int col = 0; col < columns; ++col) {
    if (!col_used[col]) continue;
    const double y1 = y_of(static_cast<double>(col_hi[col])), y2 = y_of(static_cast<double>(col_lo[col]));
    svg += fmt::format("<rect x=\"{}\" y=\"{:.2f}\" width=\"1\" height=\"{:.2f}\" fill=\"#c44\"/>", kLeft + col, y1,
                       std::max(y2 - y1, 1.0));
  }
  // Knees (dashed blue) at code zu + p / su; intermediate saturation edges (orange) at qmin and qmax.
  const QuantParams& q = c.spec.convention.intermediate.q;
  for (double p : knee_points(c.spec.convention.activation)) {
    const double code = q.zero_point + p / q.scale;
    if (code < qmin || code > qmax) continue;
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#36c\" stroke-dasharray=\"4 3\"><title>knee v={3:.4g}</title></line>",
                       x_of(code), kTop, kPlotHeight - kBottom, p);
  }
  for (double edge : {qmin, qmax}) {
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#e80\" stroke-width=\"2\"><title>intermediate saturation edge u={3}</title></line>",
                       x_of(edge), kTop, kPlotHeight - kBottom, edge);
  }
  svg += Axes("intermediate code u (blue dashed: knees; orange: saturation edges)", "error (LSB)");
  return svg + CodeAxisLabels(type, e_lo, e_hi, y_of) + "</svg>";
}

// Per-region bars: share of inexact samples, labelled with the sample count and max |e|.
std::string RegionSvg(const CaseResult& c) {
  std::string svg = SvgOpen("per-region inexact share");
  const double plot_w = kPlotWidth - kLeft - kRight - 300, row_h = (kPlotHeight - kTop - kBottom) / 4.0;
  for (size_t i = 0; i < kAllRegions.size(); ++i) {
    const ErrorStats& s = c.stats.by_region[i];
    const double inexact = 1 - s.exact_fraction();
    const double y = kTop + i * row_h;
    svg += Text(kLeft + 44, y + row_h * 0.6, std::string(to_string(kAllRegions[i])), "end");
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#eee\"/>", kLeft + 50, y + 4,
                       plot_w, row_h - 8);
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#c44\"/>", kLeft + 50, y + 4,
                       std::max(plot_w * inexact, s.count() ? 1.0 : 0.0), row_h - 8);
    svg += Text(kLeft + 56 + plot_w, y + row_h * 0.6,
                fmt::format("{:.3f}% inexact, n={}, max |e|={}", 100 * inexact, s.count(), s.max_abs()), "start");
  }
  svg += Text((kLeft + kPlotWidth) / 2.0, kPlotHeight - 8, "share of samples with e != 0, per region (docs/regions.md)");
  return svg + "</svg>";
}

std::string HtmlTable(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "<table class=\"kv\">";
  for (const auto& [k, v] : rows) out += fmt::format("<tr><th>{}</th><td>{}</td></tr>", HtmlEscape(k), HtmlEscape(v));
  return out + "</table>\n";
}

std::string HtmlStatsTable(const CaseResult& c) {
  std::string out = "<table><tr>";
  for (const char* h : kStatsHeader) out += fmt::format("<th>{}</th>", HtmlEscape(h));
  out += "</tr>";
  auto row = [&](const StatsRow& r) {
    out += "<tr>";
    for (const std::string& cell : r.cells) out += fmt::format("<td>{}</td>", HtmlEscape(cell));
    out += "</tr>";
  };
  row(StatsCells("all", c.stats.overall));
  for (Region r : kAllRegions) row(StatsCells(std::string(to_string(r)), c.stats.by_region[static_cast<size_t>(r)]));
  return out + "</table>\n";
}

std::string Anchor(const std::string& name) {
  std::string out = "case-";
  for (char ch : name) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
  return out;
}

}  // namespace

namespace {

// Per pixel column, the smallest and largest error over the codes the column holds (0 for an exact code).
struct ColumnBands {
  std::vector<int64_t> lo, hi;
};
ColumnBands Columns(const CodeErrors& codes, int columns) {
  ColumnBands b{std::vector<int64_t>(columns, 0), std::vector<int64_t>(columns, 0)};
  const double span = std::max(static_cast<double>(codes.code_count()) - 1.0, 1.0);
  for (const auto& [code, r] : codes.nonzero()) {
    const int col = std::clamp(static_cast<int>((code - codes.qmin()) / span * columns), 0, columns - 1);
    b.lo[col] = std::min(b.lo[col], r.min);
    b.hi[col] = std::max(b.hi[col], r.max);
  }
  return b;
}

// The gate's error by code: candidate (red) over canonical (blue), the codes where the candidate is worse by more
// than the slack marked under the axis (orange).
std::string CanonicalSvg(const CaseResult& sweep, const CanonicalComparison& k) {
  std::string svg = SvgOpen("error by code: candidate and canonical table");
  const double plot_w = kPlotWidth - kLeft - kRight, plot_h = kPlotHeight - kTop - kBottom;
  const int columns = static_cast<int>(plot_w);
  const ColumnBands candidate = Columns(sweep.per_code, columns), canonical = Columns(k.canonical_per_code, columns);
  int64_t e_lo = -1, e_hi = 1;
  for (const ColumnBands* b : {&candidate, &canonical}) {
    e_lo = std::min(e_lo, *std::min_element(b->lo.begin(), b->lo.end()));
    e_hi = std::max(e_hi, *std::max_element(b->hi.begin(), b->hi.end()));
  }
  auto y_of = [&](double e) { return kTop + (e_hi - e) / static_cast<double>(e_hi - e_lo) * plot_h; };
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"#2a7\"/>", kLeft, y_of(0),
                     kPlotWidth - kRight, y_of(0));
  const auto band = [&](const ColumnBands& b, const char* colour, double opacity) {  // one rect per column
    std::string out;
    for (int col = 0; col < columns; ++col) {
      if (b.lo[col] == 0 && b.hi[col] == 0) continue;
      const double y1 = y_of(static_cast<double>(b.hi[col])), y2 = y_of(static_cast<double>(b.lo[col]));
      out += fmt::format("<rect x=\"{}\" y=\"{:.2f}\" width=\"1\" height=\"{:.2f}\" fill=\"{}\" fill-opacity=\"{}\"/>",
                         kLeft + col, y1, std::max(y2 - y1, 1.0), colour, opacity);
    }
    return out;
  };
  // The canonical table as a band, the candidate as the two lines bounding its errors per column on top.
  svg += band(canonical, "#8ab8e6", 1.0);
  for (const std::vector<int64_t>* edge : {&candidate.hi, &candidate.lo}) {
    std::string points;
    for (int col = 0; col < columns; ++col) {
      points += fmt::format("{}{},{:.2f}", points.empty() ? "" : " ", kLeft + col, y_of(static_cast<double>((*edge)[col])));
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#c22\" stroke-width=\"1\"/>", points);
  }
  const QuantType& type = sweep.spec.convention.intermediate.q.type;
  const double span = std::max(static_cast<double>(type.qmax() - type.qmin()), 1.0);
  for (const CodeRun& run : k.worse) {
    const double x1 = kLeft + (run.u_lo - type.qmin()) / span * plot_w, x2 = kLeft + (run.u_hi - type.qmin()) / span * plot_w;
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"4\" fill=\"#e80\"><title>u in [{}, {}]: up to "
                       "{:+d} worse</title></rect>",
                       x1, kPlotHeight - kBottom + 1, std::max(x2 - x1, 1.0), run.u_lo, run.u_hi, run.delta);
  }
  svg += Axes("intermediate code u (red lines: candidate; blue band: canonical; orange: worse by more than k)", "error (LSB)");
  return svg + CodeAxisLabels(type, e_lo, e_hi, y_of) + "</svg>";
}

// A run as a reviewer reads it: its codes, how much worse or better, and the table rows feeding it.
std::string RunRowText(const CodeRun& run, const std::string& rows) {
  const std::string rows_text = run.row_lo == run.row_hi ? fmt::format("{} {}", rows, run.row_lo)
                                                         : fmt::format("{}s {}..{}", rows, run.row_lo, run.row_hi);
  return fmt::format("u in [{}, {}]: {} codes, up to {:+d} ({})", run.u_lo, run.u_hi, run.codes, run.delta, rows_text);
}

// Candidate and canonical side by side (exact %, bias, p99, max), then the worse and better runs.
std::vector<std::vector<std::string>> SideBySideRows(const ErrorStats& c, const ErrorStats& k) {
  return {{"exact %", Percent(c.exact_fraction()), Percent(k.exact_fraction())},
          {"bias (LSB)", fmt::format("{:+.5f}", c.mean()), fmt::format("{:+.5f}", k.mean())},
          {"p99 |e|", std::to_string(c.p99()), std::to_string(k.p99())},
          {"max |e|", std::to_string(c.max_abs()), std::to_string(k.max_abs())}};
}

std::string CanonicalHtml(const RunResult& run) {
  if (!run.gate || !run.gate->canonical || run.cases.empty()) return "";
  const CanonicalComparison& k = *run.gate->canonical;
  const CaseResult& sweep = run.cases.front();
  std::string out = "<h2>Gate: the table against the canonical table</h2>\n";
  out += HtmlTable({{"mode", k.mode == kGateModeRelative
                                 ? fmt::format("relative: every code |e| ≤ |e_canonical| + k, k = {} ({})", k.slack, k.slack_source)
                                 : std::string("absolute: the tolerance decides; the canonical table is shown, not judged")},
                    {"canonical table", k.construction}});
  out += "<table><tr><th>every code</th><th>candidate</th><th>canonical</th></tr>";
  for (const auto& row : SideBySideRows(sweep.stats.overall, k.canonical)) {
    out += fmt::format("<tr><td style=\"text-align:left\">{}</td><td>{}</td><td>{}</td></tr>", row[0], row[1], row[2]);
  }
  out += "</table>\n" + CanonicalSvg(sweep, k) + "\n";
  const auto runs = [&](const char* title, const std::vector<CodeRun>& list, uint64_t codes) {
    std::string html = fmt::format("<h3>{}: {} codes</h3>\n", title, codes);
    if (list.empty()) return html;
    html += "<ul>";
    for (const CodeRun& r : list) html += "<li>" + HtmlEscape(RunRowText(r, k.rows)) + "</li>";
    return html + "</ul>\n";
  };
  out += runs(fmt::format("Worse than the canonical table by more than k = {}", k.slack).c_str(), k.worse, k.worse_codes);
  out += runs("Better than the canonical table", k.better, k.better_codes);
  return out;
}

}  // namespace

std::string ToHtml(const RunResult& run) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>fusediff sign-off report</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}"
      "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;font-size:13px}"
      "table.kv th,table.kv td{text-align:left}th{background:#f4f4f4}"
      ".pass{color:#185}.fail,.nondeterministic{color:#b22;font-weight:bold}.unsupported{color:#777}.known_defect,.documented_behaviour{color:#a60}"
      "code{font-size:12px;word-break:break-all}section{border-top:2px solid #ddd;margin-top:2em}"
      "svg.plot{display:block;margin:.5em 0;border:1px solid #ddd}"
      "</style></head><body>\n<h1>fusediff sign-off report</h1>\n";
  size_t passed = 0, failed = 0, unsupported = 0, crossed = 0, known = 0, documented = 0;
  for (const CaseResult& c : run.cases) {
    passed += c.verdict == Verdict::pass;
    failed += c.verdict == Verdict::fail;
    unsupported += c.verdict == Verdict::unsupported;
    crossed += c.verdict == Verdict::cross_convention;
    known += c.verdict == Verdict::known_defect;
    documented += c.verdict == Verdict::documented_behaviour;
    failed += c.verdict == Verdict::nondeterministic;
  }
  out += fmt::format("<p class=\"{}\">{} cases: {} passed, {} failed{}{}, {} unsupported{}{}</p>\n", failed ? "fail" : "pass",
                     run.cases.size(), passed, failed,
                     known ? fmt::format(", {} known defect (not failing)", known) : "",
                     documented ? fmt::format(", {} documented behaviour (not failing)", documented) : "", unsupported,
                     crossed ? fmt::format(", {} cross-convention measurements (no verdict)", crossed) : "",
                     run.complete ? "" : " — INCOMPLETE (partial result)");
  out += "<h2>Provenance</h2>\n" + HtmlTable(ProvenanceRows(run));
  out += CanonicalHtml(run);

  out += "<h2>Summary</h2>\n<table><tr><th>case</th><th>verdict</th><th>evidence</th><th>samples</th><th>exact %</th>"
         "<th>bias</th><th>std</th><th>p99 |e|</th><th>max |e|</th><th>tolerance</th></tr>";
  for (const CaseResult& c : run.cases) {
    const ErrorStats& s = c.stats.overall;
    const Evidence e = EvidenceOf(c);
    out += fmt::format("<tr><td style=\"text-align:left\"><a href=\"#{}\">{}</a></td><td class=\"{}\">{}</td><td>{}</td><td>{}</td>"
                       "<td>{}</td><td>{:+.5f}</td><td>{:.5f}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                       Anchor(c.spec.name), HtmlEscape(c.spec.name), to_string(c.verdict), to_string(c.verdict),
                       e.kind.substr(0, e.kind.find(':')), s.count(), Percent(s.exact_fraction()), s.mean(), s.stddev(), s.p99(),
                       s.max_abs(), c.tolerance.max_abs_lsb);
  }
  out += "</table>\n";

  for (const CaseResult& c : run.cases) {
    out += fmt::format("<section id=\"{}\"><h2>{} — <span class=\"{}\">{}</span></h2>\n", Anchor(c.spec.name),
                       HtmlEscape(c.spec.name), to_string(c.verdict), to_string(c.verdict));
    if (!c.reason.empty()) out += fmt::format("<p>{}</p>\n", HtmlEscape(c.reason));
    if (!c.complete) out += "<p class=\"fail\">This case was interrupted: its statistics cover part of its samples.</p>\n";
    out += "<h3>Convention</h3>\n" + HtmlTable(ConventionRows(c));
    if (const auto rows = ComparisonRows(c); !rows.empty()) out += "<h3>Comparison</h3>\n" + HtmlTable(rows);
    if (c.verdict == Verdict::unsupported) {
      out += "</section>\n";
      continue;
    }
    const Evidence e = EvidenceOf(c);
    out += "<h3>What the evidence covers</h3>\n" +
           HtmlTable({{"evidence", e.kind},
                      {"intermediate codes covered",
                       reference_convention(c.spec).intermediate.kind == IntermediateKind::f32
                           ? std::string("none: the reference's intermediate is f32, not a code")
                           : fmt::format("{} of {}", c.intermediate_codes_covered,
                                         c.spec.convention.intermediate.q.type.code_count())},
                      {"hard cases (samples per region)", e.hard_cases},
                      {"samples above tolerance", c.verdict == Verdict::cross_convention ? std::string("- (no verdict)")
                                                                                          : std::to_string(e.failing)},
                      {"failure rate", e.failure_bound.empty() ? "observed failures (see worst cases)" : e.failure_bound},
                      {"reference escalations to exact arithmetic", std::to_string(c.reference_escalations)}});
    if (!c.known_defects.empty()) {
      // The ledger's samples: counted apart from the statistics below (which the verdict judges), never hidden.
      out += "<h3>Known defects and documented behaviour (ledger)</h3>\n<table><tr><th style=\"text-align:left\">entry</th><th>kind</th><th>status</th>"
             "<th>draws</th><th>samples</th><th>model differs</th><th>explained</th><th>max |e|</th>"
             "<th style=\"text-align:left\">first replay</th></tr>";
      for (const KnownDefectTally& t : c.known_defects) {
        out += fmt::format("<tr><td style=\"text-align:left\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                           "<td>{}</td><td style=\"text-align:left\"><code>{}</code></td></tr>",
                           HtmlEscape(t.id), describe(t.kind), t.no_longer_reproduces() ? "no longer reproduces" : "reproduces", t.draws, t.samples,
                           t.predicted_samples, t.stats.overall.count(), t.stats.overall.max_abs(),
                           t.worst.empty() ? std::string("-") : HtmlEscape("fusediff replay '" + t.worst.front().replay + "'"));
      }
      out += "</table>\n";
    }
    out += "<h3>Statistics (output LSB)</h3>\n" + HtmlStatsTable(c);
    out += "<h3>Plots</h3>\n" + HistogramSvg(c.stats.overall) + "\n" + CodeErrorSvg(c) + "\n" + RegionSvg(c) + "\n";
    if (c.batchnorm_bins && !c.batchnorm_bins->by_u.bins.empty()) out += BatchNormBinsSvg(*c.batchnorm_bins) + "\n";
    if (const auto rows = AttributionRows(c); !rows.empty()) {
      out += "<h3>Per implementation and formulation</h3>\n<table><tr><th>kind</th><th style=\"text-align:left\">name</th>"
             "<th>samples</th><th>exact %</th><th>max |e|</th></tr>";
      for (const auto& r : rows) {
        out += fmt::format("<tr><td>{}</td><td style=\"text-align:left\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                           r[0], HtmlEscape(r[1]), r[2], r[3], r[4]);
      }
      out += "</table>\n";
    }
    if (!c.stats.paired.dimension.empty()) {
      out += fmt::format("<h3>Formulations compared on the same draws ({})</h3>\n<p>{}</p>\n<table><tr><th>formulation</th>"
                         "<th>samples</th><th>exact %</th><th>max |e|</th><th>rejected samples</th></tr>",
                         HtmlEscape(c.stats.paired.dimension), HtmlEscape(PairedSummary(c.stats.paired)));
      for (const auto& r : PairedRows(c.stats.paired)) {
        out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", HtmlEscape(r[0]), r[1], r[2], r[3], r[4]);
      }
      out += "</table>\n";
    }
    const auto worst_table = [&](const char* title, const std::vector<WorstCaseReport>& list) {
      if (list.empty()) return;
      out += fmt::format("<h3>{}</h3>\n<table><tr><th>e</th><th>sample</th><th>acc</th><th>u</th><th>y_ref</th>"
                         "<th>y_fused</th><th>repetitions</th><th style=\"text-align:left\">implementation [formulation]</th>"
                         "<th style=\"text-align:left\">replay</th></tr>", title);
      for (const WorstCaseReport& w : list) {
        out += fmt::format("<tr><td>{:+d}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                           "<td style=\"text-align:left\"><code>{}</code></td>"
                           "<td style=\"text-align:left\"><code>fusediff replay '{}'</code></td></tr>",
                           w.sample.error, w.sample.sample, w.sample.acc, w.sample.u, w.sample.y_ref, w.sample.y_fused,
                           Repetitions(w.sample), HtmlEscape(Attribution(w.sample)), HtmlEscape(w.replay));
      }
      out += "</table>\n";
    };
    worst_table("Nondeterministic samples (outputs of every repetition)", c.nondeterministic);
    worst_table("Worst cases", c.worst);
    out += "</section>\n";
  }
  out += "<p>Reviewed and signed: ______________________ date: __________</p>\n</body></html>\n";
  return out;
}

std::string ToMarkdown(const RunResult& run) {
  std::string out = "# fusediff sign-off report\n\n## Provenance\n\n| | |\n|---|---|\n";
  for (const auto& [k, v] : ProvenanceRows(run)) out += fmt::format("| {} | {} |\n", k, MdCell(v));
  if (run.gate && run.gate->canonical && !run.cases.empty()) {
    const CanonicalComparison& k = *run.gate->canonical;
    out += fmt::format("\n## Gate: the table against the canonical table ({}, {} mode, k = {})\n\n"
                       "| every code | candidate | canonical |\n|---|--:|--:|\n",
                       MdCell(k.construction), k.mode, k.slack);
    for (const auto& row : SideBySideRows(run.cases.front().stats.overall, k.canonical)) {
      out += fmt::format("| {} | {} | {} |\n", row[0], row[1], row[2]);
    }
    out += fmt::format("\nWorse by more than k: {} codes. Better: {} codes.\n", k.worse_codes, k.better_codes);
    for (const CodeRun& r : k.worse) out += "- worse: " + MdCell(RunRowText(r, k.rows)) + "\n";
  }
  out += "\n## Summary\n\n| case | verdict | evidence | samples | exact % | bias | std | p50 | p90 | p99 | p99.9 | max abs e | tol |\n"
         "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const CaseResult& c : run.cases) {
    const StatsRow r = StatsCells(c.spec.name, c.stats.overall);
    const Evidence e = EvidenceOf(c);
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", MdCell(c.spec.name),
                       c.verdict == Verdict::fail || c.verdict == Verdict::nondeterministic ? "**" + std::string(to_string(c.verdict)) + "**"
                                                                                           : std::string(to_string(c.verdict)),
                       e.kind.substr(0, e.kind.find(':')), r.cells[1], r.cells[2], r.cells[3], r.cells[4], r.cells[5],
                       r.cells[6], r.cells[7], r.cells[8], r.cells[9], c.tolerance.max_abs_lsb);
  }
  for (const CaseResult& c : run.cases) {
    out += fmt::format("\n## {} — {}\n\n", MdCell(c.spec.name), to_string(c.verdict));
    if (!c.reason.empty()) out += MdCell(c.reason) + "\n\n";
    if (!c.complete) out += "**Interrupted: partial statistics.**\n\n";
    out += "| convention | |\n|---|---|\n";
    for (const auto& [k, v] : ConventionRows(c)) out += fmt::format("| {} | {} |\n", k, MdCell(v));
    for (const auto& [k, v] : ComparisonRows(c)) out += fmt::format("| {} | {} |\n", k, MdCell(v));
    if (c.verdict == Verdict::unsupported) continue;
    const Evidence e = EvidenceOf(c);
    out += fmt::format("\nEvidence: {}; hard cases: {}; samples above tolerance: {}; failure rate: {}.\n\n", e.kind,
                       e.hard_cases, e.failing, e.failure_bound.empty() ? "failures observed" : e.failure_bound);
    out += "|";
    for (const char* h : kStatsHeader) out += fmt::format(" {} |", h);
    out += "\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    auto row = [&](const StatsRow& r) {
      out += "|";
      FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
      for (const std::string& cell : r.cells) out += " " + MdCell(cell) + " |";
      FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
      out += "\n";
    };
    row(StatsCells("all", c.stats.overall));
    for (Region r : kAllRegions) row(StatsCells(std::string(to_string(r)), c.stats.by_region[static_cast<size_t>(r)]));
    for (const KnownDefectTally& t : c.known_defects) {
      out += fmt::format("\n{}{} {}: {}; {} draws, {} samples met its conditions, its model differs from the "
                         "reference on {}, explains {} (max |e| {}){}.\n",
                         static_cast<char>(std::toupper(describe(t.kind)[0])), describe(t.kind).substr(1), MdCell(t.id), t.no_longer_reproduces() ? "**no longer reproduces**" : "reproduces", t.draws,
                         t.samples, t.predicted_samples, t.stats.overall.count(), t.stats.overall.max_abs(),
                         t.worst.empty() ? std::string() : fmt::format("; first: {}", MdCode("fusediff replay '" + t.worst.front().replay + "'")));
    }
    if (const auto rows = AttributionRows(c); !rows.empty()) {
      out += "\n| kind | name | samples | exact % | max abs e |\n|---|---|--:|--:|--:|\n";
      for (const auto& r : rows) out += fmt::format("| {} | {} | {} | {} | {} |\n", r[0], MdCode(r[1]), r[2], r[3], r[4]);
    }
    if (!c.stats.paired.dimension.empty()) {
      out += fmt::format("\nFormulations compared on the same draws: {}.\n\n| formulation | samples | exact % | max abs e | rejected samples |\n"
                         "|---|--:|--:|--:|--:|\n", MdCell(PairedSummary(c.stats.paired)));
      for (const auto& r : PairedRows(c.stats.paired)) out += fmt::format("| {} | {} | {} | {} | {} |\n", r[0], r[1], r[2], r[3], r[4]);
    }
    const auto worst_table = [&](const char* title, const std::vector<WorstCaseReport>& list) {
      if (list.empty()) return;
      out += fmt::format("\n{}:\n\n| e | sample | u | y_ref | y_fused | repetitions | implementation [formulation] | replay |\n"
                         "|--:|--:|--:|--:|--:|---|---|---|\n", title);
      for (const WorstCaseReport& w : list) {
        const std::string attribution = Attribution(w.sample);
        out += fmt::format("| {:+d} | {} | {} | {} | {} | {} | {} | {} |\n", w.sample.error, w.sample.sample, w.sample.u,
                           w.sample.y_ref, w.sample.y_fused, Repetitions(w.sample),
                           attribution.empty() ? std::string() : MdCode(attribution), MdCode("fusediff replay '" + w.replay + "'"));
      }
    };
    worst_table("Nondeterministic samples (outputs of every repetition)", c.nondeterministic);
    worst_table("Worst cases", c.worst);
  }
  return out;
}

}  // namespace fusediff::reports

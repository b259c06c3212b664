#include "svg_plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {

// A plot's box: the axes span [left, width - right] x [top, height - bottom].
struct Frame {
  int width = 640, height = 240, left = 56, right = 16, top = 16, bottom = 40;
  double x0() const { return left; }
  double x1() const { return width - right; }
  double y0() const { return top; }
  double y1() const { return height - bottom; }
  double plot_w() const { return x1() - x0(); }
  double plot_h() const { return y1() - y0(); }
};

// A coordinate to a tenth of a pixel, without a trailing ".0": the plots' paths are most of a report's bytes.
std::string Px(double v) {
  std::string s = fmt::format("{:.1f}", v);
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

std::string SvgOpen(const Frame& f, const std::string& label) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"{0}\" height=\"{1}\" "
                     "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">"
                     "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>",
                     f.width, f.height, HtmlEscape(label));
}

std::string Text(double x, double y, const std::string& s, const char* anchor = "middle", int size = 11) {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\">{}</text>", x, y, size, anchor,
                     HtmlEscape(s));
}

std::string Axes(const Frame& f, const std::string& x_label, const std::string& y_label) {
  const double ym = (f.y0() + f.y1()) / 2;
  return fmt::format("<path d=\"M{0} {1}V{2}H{3}\" stroke=\"#333\" fill=\"none\"/>", f.x0(), f.y0(), f.y1(), f.x1()) +
         Text((f.x0() + f.x1()) / 2, f.height - 6, x_label) +
         fmt::format("<text x=\"12\" y=\"{0:.1f}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 "
                     "{0:.1f})\">{1}</text>", ym, HtmlEscape(y_label));
}

// Round tick values (1, 2 or 5 times a power of ten) across [lo, hi], at most about `count` of them.
std::vector<double> NiceTicks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / count;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  step = std::max(step, 1.0);  // codes and LSBs are integers
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

template <typename XOf>
std::string XTicks(const Frame& f, double lo, double hi, XOf x_of, int count = 8) {
  std::string out, path;
  for (double t : NiceTicks(lo, hi, count)) {
    path += fmt::format("M{:.1f} {}v4", x_of(t), f.y1());
    out += Text(x_of(t), f.y1() + 15, fmt::format("{:.0f}", t + 0.0));
  }
  return fmt::format("<path d=\"{}\" stroke=\"#333\"/>", path) + out;
}

template <typename YOf>
std::string YTicks(const Frame& f, double lo, double hi, YOf y_of, int count = 5) {
  std::string out, path;
  for (double t : NiceTicks(lo, hi, count)) {
    path += fmt::format("M{} {:.1f}h-4", f.x0(), y_of(t));
    out += Text(f.x0() - 6, y_of(t) + 4, fmt::format("{:.0f}", t + 0.0), "end");
  }
  return fmt::format("<path d=\"{}\" stroke=\"#333\"/>", path) + out;
}

// One vertical segment per pixel column, as one path: "Mx y1Vy2".
std::string ColumnPath(const std::vector<std::pair<double, std::pair<double, double>>>& columns, const char* colour) {
  if (columns.empty()) return "";
  std::string d;
  for (const auto& [x, ys] : columns) d += fmt::format("M{} {}V{}", Px(x), Px(ys.first), Px(std::max(ys.second, ys.first + 1)));
  return fmt::format("<path d=\"{}\" stroke=\"{}\" stroke-width=\"1\" fill=\"none\"/>", d, colour);
}

// Per pixel column of a code axis, the smallest and largest error of the codes it holds (0 for an exact code).
struct Band {
  std::vector<int64_t> lo, hi;
};
Band CodeBand(const CodeErrors& codes, int32_t first, int32_t last, int columns) {
  Band b{std::vector<int64_t>(static_cast<size_t>(columns), 0), std::vector<int64_t>(static_cast<size_t>(columns), 0)};
  const double span = std::max(static_cast<double>(last - first), 1.0);
  for (auto it = codes.nonzero().lower_bound(first); it != codes.nonzero().end() && it->first <= last; ++it) {
    const size_t col = static_cast<size_t>(std::clamp(static_cast<int>((it->first - first) / span * (columns - 1) + 0.5), 0, columns - 1));
    b.lo[col] = std::min(b.lo[col], it->second.min);
    b.hi[col] = std::max(b.hi[col], it->second.max);
  }
  return b;
}

}  // namespace

std::string HistogramSvg(const ErrorStats& s) {
  const Frame f;
  std::string svg = SvgOpen(f, "signed error histogram");
  const int64_t lo = std::min<int64_t>(s.min(), -1), hi = std::max<int64_t>(s.max(), 1);
  // At most one bar per pixel: a wide range is binned, each bar summing the errors its column holds.
  const int64_t per_bar = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((hi - lo + 1) / f.plot_w())));
  const int64_t bars = (hi - lo) / per_bar + 1;
  const double bar_w = f.plot_w() / static_cast<double>(bars);
  std::vector<uint64_t> counts(static_cast<size_t>(bars), 0);
  for (const auto& [e, n] : s.histogram()) counts[static_cast<size_t>((e - lo) / per_bar)] += n;
  const uint64_t peak = std::max<uint64_t>(1, *std::max_element(counts.begin(), counts.end()));
  const double log_peak = std::log10(static_cast<double>(peak)) + 1;  // +1: a count of 1 still gets a bar
  const auto y_of = [&](double n) { return f.y1() - f.plot_h() * (std::log10(n) + 1) / log_peak; };
  const auto x_of = [&](double e) { return f.x0() + (e - static_cast<double>(lo)) / static_cast<double>(per_bar) * bar_w; };
  std::string exact, inexact;
  const size_t zero = static_cast<size_t>((0 - lo) / per_bar);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    const std::string width = Px(std::max(bar_w * 0.9, 1.0));
    (i == zero ? exact : inexact) += fmt::format("M{} {}h{}V{}h-{}z", Px(f.x0() + static_cast<double>(i) * bar_w),
                                                 Px(y_of(static_cast<double>(counts[i]))), width, f.y1(), width);
  }
  svg += fmt::format("<path d=\"{}\" fill=\"#c44\"/><path d=\"{}\" fill=\"#2a7\"/>", inexact, exact);
  svg += Axes(f, per_bar == 1 ? "signed error e = y_fused - y_ref (LSB)"
                              : fmt::format("signed error e (LSB), {} values per bar", per_bar),
              "count (log)");
  svg += XTicks(f, static_cast<double>(lo), static_cast<double>(hi), [&](double e) { return x_of(e) + bar_w / 2; });
  for (uint64_t p = 1; p <= peak; p *= 10) {
    svg += Text(f.x0() - 6, y_of(static_cast<double>(p)) + 4, fmt::format("{}", p), "end");
    if (p > UINT64_MAX / 10) break;
  }
  return svg + "</svg>";
}

std::string CodeErrorSvg(const CaseResult& c) {
  const Frame f;
  std::string svg = SvgOpen(f, "error against intermediate code");
  const QuantType& type = c.spec.convention.intermediate.q.type;
  int64_t e_lo = -1, e_hi = 1;
  for (const auto& [code, r] : c.per_code.nonzero()) {
    e_lo = std::min(e_lo, r.min);
    e_hi = std::max(e_hi, r.max);
  }
  const double qmin = type.qmin(), qmax = type.qmax();
  const auto x_of = [&](double code) { return f.x0() + (code - qmin) / std::max(qmax - qmin, 1.0) * f.plot_w(); };
  const auto y_of = [&](double e) { return f.y0() + (static_cast<double>(e_hi) - e) / static_cast<double>(e_hi - e_lo) * f.plot_h(); };
  svg += fmt::format("<path d=\"M{} {:.2f}H{}\" stroke=\"#2a7\"/>", f.x0(), y_of(0), f.x1());
  const int columns = static_cast<int>(f.plot_w());
  const Band band = CodeBand(c.per_code, type.qmin(), type.qmax(), columns);
  std::vector<std::pair<double, std::pair<double, double>>> lines;
  for (int col = 0; col < columns; ++col) {
    const size_t i = static_cast<size_t>(col);
    if (band.lo[i] == 0 && band.hi[i] == 0) continue;
    lines.push_back({f.x0() + col + 0.5, {y_of(static_cast<double>(band.hi[i])), y_of(static_cast<double>(band.lo[i]))}});
  }
  svg += ColumnPath(lines, "#c44");
  // Knees (dashed blue) at code zu + p / su; intermediate saturation edges (orange) at qmin and qmax.
  const QuantParams& q = c.spec.convention.intermediate.q;
  for (double p : knee_points(c.spec.convention.activation)) {
    const double code = q.zero_point + p / q.scale;
    if (code < qmin || code > qmax) continue;
    svg += fmt::format("<path d=\"M{:.2f} {}V{}\" stroke=\"#36c\" stroke-dasharray=\"4 3\"><title>knee v={:.4g}</title></path>",
                       x_of(code), f.y0(), f.y1(), p);
  }
  svg += fmt::format("<path d=\"M{0:.2f} {2}V{3}M{1:.2f} {2}V{3}\" stroke=\"#e80\" stroke-width=\"2\"/>", x_of(qmin),
                     x_of(qmax), f.y0(), f.y1());
  svg += Axes(f, "intermediate code u (blue dashed: knees; orange: saturation edges)", "error (LSB)");
  svg += XTicks(f, qmin, qmax, x_of) + YTicks(f, static_cast<double>(e_lo), static_cast<double>(e_hi), y_of);
  return svg + "</svg>";
}

std::string RegionSvg(const CaseResult& c) {
  const Frame f;
  std::string svg = SvgOpen(f, "per-region inexact share");
  const double plot_w = f.plot_w() - 300, row_h = f.plot_h() / 4.0;
  for (size_t i = 0; i < kAllRegions.size(); ++i) {
    const ErrorStats& s = c.stats.by_region[i];
    const double inexact = 1 - s.exact_fraction();
    const double y = f.y0() + static_cast<double>(i) * row_h;
    svg += Text(f.x0() + 44, y + row_h * 0.6, std::string(to_string(kAllRegions[i])), "end");
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#eee\"/>", f.x0() + 50, y + 4,
                       plot_w, row_h - 8);
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#c44\"/>", f.x0() + 50, y + 4,
                       std::max(plot_w * inexact, s.count() ? 1.0 : 0.0), row_h - 8);
    svg += Text(f.x0() + 56 + plot_w, y + row_h * 0.6,
                fmt::format("{:.3f}% inexact, n={}, max |e|={}", 100 * inexact, s.count(), s.max_abs()), "start");
  }
  svg += Text((f.x0() + f.width) / 2.0, f.height - 8, "share of samples with e != 0, per region (docs/regions.md)");
  return svg + "</svg>";
}

namespace {
// |e| against a binned magnitude (model/error_bins.h): per bin a bar of the max |e| and a dot at the mean |e|, both
// on a linear LSB axis; `bin_label` names a bin's range under its bar.
template <typename BinLabel>
std::string ErrorBinsSvg(const std::string& title, const ErrorBins& bins, const std::string& x_label, BinLabel bin_label) {
  const Frame f;
  std::string svg = SvgOpen(f, title);
  int64_t peak = 1;
  for (const auto& [key, b] : bins.bins) peak = std::max(peak, b.max_abs);
  const double slot = f.plot_w() / static_cast<double>(std::max<size_t>(bins.bins.size(), 1));
  const auto y_of = [&](double e) { return f.y1() - f.plot_h() * e / static_cast<double>(peak); };
  size_t i = 0;
  for (const auto& [key, b] : bins.bins) {
    const double x = f.x0() + slot * static_cast<double>(i++);
    const double mean = static_cast<double>(b.sum_abs) / static_cast<double>(b.count);
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#c44\"><title>{}: max |e| {}, "
                       "mean |e| {:.3f}, {} samples</title></rect>",
                       x + slot * 0.1, y_of(static_cast<double>(b.max_abs)), slot * 0.8,
                       f.y1() - y_of(static_cast<double>(b.max_abs)), HtmlEscape(bin_label(key)), b.max_abs, mean, b.count);
    svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"#36c\"/>", x + slot * 0.5, y_of(mean));
    svg += Text(x + slot * 0.5, f.y1() + 15, bin_label(key));
  }
  svg += Axes(f, x_label, "|e| (LSB): bar max, dot mean");
  return svg + YTicks(f, 0, static_cast<double>(peak), y_of) + "</svg>";
}
}  // namespace

std::string BatchNormBinsSvg(const BatchNormErrorBins& bins) {
  const auto u_label = [](int32_t b) {
    return b == 0 ? std::string("0") : b == 1 ? std::string("1") : fmt::format("{}-{}", 1 << (b - 1), (1 << b) - 1);
  };
  const auto gain_label = [](int32_t b) { return fmt::format("2^{}", b); };
  return ErrorBinsSvg("error against |u|", bins.by_u, "|u - zu| (intermediate codes, bins by powers of two)", u_label) + "\n" +
         ErrorBinsSvg("error against channel gain", bins.by_gain,
                      "channel gain gamma / sqrt(var + eps), bin [2^b, 2^(b+1))", gain_label);
}

namespace {
// Candidate (red lines bounding its errors) over canonical (blue band), codes [first, last] on the x axis.
template <typename XOf, typename YOf>
std::string CandidateOverCanonical(const Frame& f, const CaseResult& sweep, const CanonicalComparison& k, int32_t first,
                                   int32_t last, XOf x_of, YOf y_of) {
  const int columns = static_cast<int>(std::min<double>(f.plot_w(), last - first + 1));
  const Band candidate = CodeBand(sweep.per_code, first, last, columns);
  const Band canonical = CodeBand(k.canonical_per_code, first, last, columns);
  const auto column_x = [&](int col) {
    return columns == last - first + 1 ? x_of(first + col) : f.x0() + (col + 0.5) * f.plot_w() / columns;
  };
  const auto polyline = [&](const std::vector<int64_t>& edge, const char* colour, double width) {
    std::string points;
    for (int col = 0; col < columns; ++col) {
      points += fmt::format("{}{:.1f},{:.1f}", col ? " " : "", column_x(col), y_of(static_cast<double>(edge[static_cast<size_t>(col)])));
    }
    return fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>", points, colour, width);
  };
  std::string svg;
  if (columns == last - first + 1) {  // a column per code: each table's signed error, the canonical one wider beneath
    const auto signed_error = [](const Band& b) {
      std::vector<int64_t> e(b.hi.size());
      for (size_t i = 0; i < e.size(); ++i) e[i] = b.hi[i] != 0 ? b.hi[i] : b.lo[i];
      return e;
    };
    return polyline(signed_error(canonical), "#8ab8e6", 4) + polyline(signed_error(candidate), "#c22", 1.5);
  } else {  // several codes per column: the canonical table's range per column as a band
    std::vector<std::pair<double, std::pair<double, double>>> band;
    for (int col = 0; col < columns; ++col) {
      const size_t i = static_cast<size_t>(col);
      if (canonical.lo[i] == 0 && canonical.hi[i] == 0) continue;
      band.push_back({column_x(col), {y_of(static_cast<double>(canonical.hi[i])), y_of(static_cast<double>(canonical.lo[i]))}});
    }
    svg += ColumnPath(band, "#8ab8e6");
  }
  svg += polyline(candidate.hi, "#c22", 1);
  if (candidate.lo != candidate.hi) svg += polyline(candidate.lo, "#c22", 1);
  return svg;
}

std::pair<int64_t, int64_t> ErrorRange(const CodeErrors& a, const CodeErrors& b, int32_t first, int32_t last) {
  int64_t lo = -1, hi = 1;
  for (const CodeErrors* codes : {&a, &b}) {
    for (auto it = codes->nonzero().lower_bound(first); it != codes->nonzero().end() && it->first <= last; ++it) {
      lo = std::min(lo, it->second.min);
      hi = std::max(hi, it->second.max);
    }
  }
  return {lo, hi};
}
}  // namespace

std::string CanonicalSvg(const CaseResult& sweep, const CanonicalComparison& k) {
  Frame f;
  f.top = 34;  // room for the worse rows' labels
  std::string svg = SvgOpen(f, "error by code: candidate and canonical table");
  const QuantType& type = sweep.spec.convention.intermediate.q.type;
  const auto [e_lo, e_hi] = ErrorRange(sweep.per_code, k.canonical_per_code, type.qmin(), type.qmax());
  const double span = std::max(static_cast<double>(type.qmax() - type.qmin()), 1.0);
  const auto x_of = [&](double u) { return f.x0() + (u - type.qmin()) / span * f.plot_w(); };
  const auto y_of = [&](double e) { return f.y0() + (static_cast<double>(e_hi) - e) / static_cast<double>(e_hi - e_lo) * f.plot_h(); };
  svg += fmt::format("<path d=\"M{} {:.2f}H{}\" stroke=\"#2a7\"/>", f.x0(), y_of(0), f.x1());
  svg += CandidateOverCanonical(f, sweep, k, type.qmin(), type.qmax(), x_of, y_of);
  // The worse runs under the axis, every worse row dashed at its worst code with its name above the plot.
  std::string runs, marks;
  for (const CodeRun& run : k.worse) runs += fmt::format("M{:.1f} {}h{:.1f}", x_of(run.u_lo), f.y1() + 2, std::max(x_of(run.u_hi) - x_of(run.u_lo), 1.0));
  svg += fmt::format("<path d=\"{}\" stroke=\"#e80\" stroke-width=\"4\"/>", runs);
  double last_label = -1e9;
  for (size_t i = 0; i < k.worse_rows.size(); ++i) {
    const WorseRow& r = k.worse_rows[i];
    marks += fmt::format("M{:.1f} {}V{}", x_of(r.worst_u), f.y0(), f.y1());
    if (x_of(r.worst_u) - last_label < 40) continue;  // labels would overlap: the list below names every row
    last_label = x_of(r.worst_u);
    svg += Text(x_of(r.worst_u), f.y0() - (i % 2 ? 4 : 16), fmt::format("{} {}", k.rows, r.index), "middle", 10);
  }
  svg += fmt::format("<path d=\"{}\" stroke=\"#e80\" stroke-dasharray=\"3 2\"/>", marks);
  svg += Axes(f, "intermediate code u (red: candidate; blue: canonical; orange: worse by more than k, dashed: worse rows)",
              "error (LSB)");
  svg += XTicks(f, type.qmin(), type.qmax(), x_of) + YTicks(f, static_cast<double>(e_lo), static_cast<double>(e_hi), y_of);
  return svg + "</svg>";
}

std::string CanonicalPanelsSvg(const CaseResult& sweep, const CanonicalComparison& k, size_t max_panels) {
  std::vector<CodeRun> runs = k.worse;
  std::stable_sort(runs.begin(), runs.end(), [](const CodeRun& a, const CodeRun& b) { return a.delta > b.delta; });
  if (runs.size() > max_panels) runs.resize(max_panels);
  std::stable_sort(runs.begin(), runs.end(), [](const CodeRun& a, const CodeRun& b) { return a.u_lo < b.u_lo; });
  const QuantType& type = sweep.spec.convention.intermediate.q.type;
  std::string out;
  for (const CodeRun& run : runs) {
    Frame f;
    f.height = 200;
    f.top = 24;
    const int32_t pad = std::max(8, (run.u_hi - run.u_lo) / 4);
    const int32_t first = std::max(type.qmin(), run.u_lo - pad), last = std::min(type.qmax(), run.u_hi + pad);
    const auto [e_lo, e_hi] = ErrorRange(sweep.per_code, k.canonical_per_code, first, last);
    const double span = std::max(static_cast<double>(last - first), 1.0);
    const auto x_of = [&](double u) { return f.x0() + (u - first) / span * f.plot_w(); };
    const auto y_of = [&](double e) { return f.y0() + (static_cast<double>(e_hi) - e) / static_cast<double>(e_hi - e_lo) * f.plot_h(); };
    const std::string rows = run.row_lo == run.row_hi ? fmt::format("{} {}", k.rows, run.row_lo)
                                                      : fmt::format("{}s {}..{}", k.rows, run.row_lo, run.row_hi);
    std::string svg = SvgOpen(f, fmt::format("worse run u in [{}, {}]", run.u_lo, run.u_hi));
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#fdebd0\"/>", x_of(run.u_lo), f.y0(),
                       std::max(x_of(run.u_hi) - x_of(run.u_lo), 1.0), f.plot_h());
    svg += fmt::format("<path d=\"M{} {:.2f}H{}\" stroke=\"#2a7\"/>", f.x0(), y_of(0), f.x1());
    svg += CandidateOverCanonical(f, sweep, k, first, last, x_of, y_of);
    if (k.rows == "knot") {  // knot i sits at code 128 (i - 256)
      std::string knots;
      for (int32_t u = (first + 32768 + 127) / 128 * 128 - 32768; u <= last; u += 128) {
        knots += fmt::format("M{:.1f} {}V{}", x_of(u), f.y0(), f.y1());
        svg += Text(x_of(u), f.y0() + 10, fmt::format("knot {}", 256 + u / 128), "middle", 10);
      }
      svg += fmt::format("<path d=\"{}\" stroke=\"#999\" stroke-dasharray=\"2 3\"/>", knots);
    }
    svg += Text(f.x0(), 14, fmt::format("u in [{}, {}]: {} codes worse by up to {:+d} ({})", run.u_lo, run.u_hi, run.codes,
                                        run.delta, rows), "start");
    svg += Axes(f, "intermediate code u (red: candidate; blue: canonical; shaded: the worse run)", "error (LSB)");
    svg += XTicks(f, first, last, x_of, 6) + YTicks(f, static_cast<double>(e_lo), static_cast<double>(e_hi), y_of);
    out += svg + "</svg>\n";
  }
  return out;
}

}  // namespace fusediff::reports

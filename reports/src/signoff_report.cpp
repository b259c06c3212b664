// The sign-off report: one self-contained HTML page (inline SVG with explicit sizes, no script, no external
// asset) and the same tables in Markdown for pull-request comments.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fusediff/model/diagnostics.h"
#include "case_groups.h"
#include "fusediff/reports/reports.h"
#include "gate_summary.h"
#include "svg_plots.h"

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
    if (c.implementation.empty() && c.unsupported_samples == 0 && c.crashed.samples == 0 && c.timed_out.samples == 0)
      return rows;
  }
  rows.push_back({"comparison", std::string(to_string(c.spec.comparison))});
  rows.push_back({"reference runs", c.reference_convention});
  rows.push_back({"fused path declares", c.fused_convention});
  if (!c.implementation.empty()) rows.push_back({"implementations", c.implementation});
  if (c.unsupported_samples > 0) {
    rows.push_back({"samples not compared", fmt::format("{} (first at sample {}): {}", c.unsupported_samples,
                                                        c.first_unsupported_sample, c.unsupported_sample_reason)});
  }
  for (const LostSamples* lost : {&c.crashed, &c.timed_out}) {
    if (lost->samples == 0) continue;
    rows.push_back({lost == &c.crashed ? "samples crashed" : "samples timed out",
                    fmt::format("{} (first at sample {}): {}; fusediff replay '{}'", lost->samples, lost->first_sample,
                                lost->reason, lost->replay)});
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
  for (const BackendProvenance& b : run.provenance.backends) {
    // "oneDNN: 2.6.3, dispatching to avx2"; a backend without those keys shows its pairs.
    const std::string library = provenance_value(run.provenance, b.backend, "library");
    const std::string version = provenance_value(run.provenance, b.backend, "version");
    const std::string isa = provenance_value(run.provenance, b.backend, "isa");
    std::string text = version.empty() || isa.empty() ? "" : version + ", dispatching to " + isa;
    if (text.empty()) {
      for (const auto& [key, value] : b.fields) text += (text.empty() ? "" : ", ") + key + " " + value;
    }
    rows.push_back({library.empty() ? b.backend : library, text});
  }
  if (run.gate) {
    rows.push_back({"gate descriptor", run.gate->descriptor_path});
    rows.push_back({"table file", run.gate->table_path + " (" + run.gate->table_kind + ")"});
    rows.push_back({"table SHA-256", run.gate->table_sha256});
    rows.push_back({"tolerance", run.gate->tolerance_source});
  }
  return rows;
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
  if (!k.worse_rows.empty()) {
    out += fmt::format("<h3>The {} {}{} that make{} the table worse</h3>\n<table><tr><th>{}</th><th>value</th><th>canonical "
                       "value</th><th>signed error e at its worst code</th><th>canonical e there</th><th>worst code u</th>"
                       "<th style=\"text-align:left\">codes it feeds</th><th>of them worse</th></tr>",
                       k.worse_rows.size(), k.rows, k.worse_rows.size() == 1 ? "" : "s",
                       k.worse_rows.size() == 1 ? "s" : "", k.rows);
    for (const WorseRow& r : k.worse_rows) {
      out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"fail\">{:+d}</td><td>{:+d}</td><td>{}</td>"
                         "<td style=\"text-align:left\">[{}, {}]</td><td>{}</td></tr>",
                         r.index, HtmlEscape(r.value), HtmlEscape(r.canonical_value), r.error, r.canonical_error, r.worst_u,
                         r.u_lo, r.u_hi, r.worse_codes);
    }
    out += "</table>\n<h3>Each worse run, code by code</h3>\n" + CanonicalPanelsSvg(sweep, k);
  }
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

// The cases that are not a plain pass, each with why, before the summary of every case.
std::string NeedsAttentionHtml(const RunResult& run) {
  std::string items;
  for (const CaseResult& c : run.cases) {
    if (c.verdict == Verdict::pass || c.verdict == Verdict::cross_convention) continue;
    items += fmt::format("<li><a href=\"#{}\">{}</a>: <span class=\"{}\">{}</span>: {}</li>", Anchor(c.spec.name),
                         HtmlEscape(c.spec.name), to_string(c.verdict), to_string(c.verdict), HtmlEscape(c.reason));
  }
  return items.empty() ? "" : "<h2>Cases that are not a plain pass</h2>\n<ul>" + items + "</ul>\n";
}

// The page's title and first line: a gate's verdict and mode, then the reason; a run's counts.
struct Headline {
  std::string title, reason;
};
Headline HeadlineOf(const RunResult& run) {
  if (run.gate) {
    const GateSummary g = SummarizeGate(run);
    return {fmt::format("fusediff gate: {} ({})", g.accept ? "ACCEPT" : "REJECT", g.mode), g.reason};
  }
  const std::string closing = ClosingLine(run);
  return {"fusediff sign-off report: " + closing.substr(0, closing.find(';')),
          closing.substr(closing.find(';') + 2, closing.size() - closing.find(';') - 3) +
              (run.complete ? "" : " (INCOMPLETE: partial result)")};
}

}  // namespace

std::string ToHtml(const RunResult& run) {
  const Headline headline = HeadlineOf(run);
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>" + HtmlEscape(headline.title + ": " + headline.reason) + "</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}h1{font-size:1.6em}"
      "td.name{text-align:left;word-break:break-all;max-width:420px}"
      "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;font-size:13px}"
      "table.kv th,table.kv td{text-align:left}th{background:#f4f4f4}"
      ".pass{color:#185}.fail,.nondeterministic,.crashed,.timeout{color:#b22;font-weight:bold}.unsupported{color:#777}.known_defect,.documented_behaviour{color:#a60}"
      "code{font-size:12px;word-break:break-all}section{border-top:2px solid #ddd;margin-top:2em}"
      "svg.plot{display:block;margin:.5em 0;border:1px solid #ddd}"
      "</style></head><body>\n";
  out += fmt::format("<h1 class=\"{}\">{}</h1>\n<p class=\"{}\">{}</p>\n", run.any_failure() ? "fail" : "pass",
                     HtmlEscape(headline.title), run.any_failure() ? "fail" : "pass", HtmlEscape(headline.reason));
  out += "<h2>Provenance</h2>\n" + HtmlTable(ProvenanceRows(run));
  out += CanonicalHtml(run);

  out += NeedsAttentionHtml(run);
  out += "<h2>Summary</h2>\n<table><tr><th style=\"text-align:left\">case</th><th>verdict</th><th>evidence</th><th>samples</th>"
         "<th>exact %</th><th>bias</th><th>std</th><th>p99 |e|</th><th>max |e|</th><th>tolerance</th></tr>";
  for (const CaseResult& c : run.cases) {
    const ErrorStats& s = c.stats.overall;
    const Evidence e = EvidenceOf(c);
    const std::string name = fmt::format("<td class=\"name\"><a href=\"#{}\">{}</a></td><td class=\"{}\">{}</td>",
                                         Anchor(c.spec.name), HtmlEscape(c.spec.name), to_string(c.verdict), to_string(c.verdict));
    if (c.verdict == Verdict::unsupported) {
      out += "<tr>" + name + "<td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td></tr>";
      continue;
    }
    out += fmt::format("<tr>{}<td>{}</td><td>{}</td><td>{}</td><td>{:+.5f}</td><td>{:.5f}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                       name, e.kind.substr(0, e.kind.find(':')), s.count(), Percent(s.exact_fraction()), s.mean(),
                       s.stddev(), s.p99(), s.max_abs(), c.tolerance.max_abs_lsb);
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
    out += "<h3>Statistics (output LSB)</h3>\n";
    // A case where every sample is exact has nothing to tabulate, plot or replay (its samples per region are above):
    // one sentence instead.
    const bool all_exact = c.stats.overall.max_abs() == 0;
    if (all_exact) {
      out += fmt::format("<p>Every one of the {} judged samples is exact (e = 0): no statistics table, plot or worst "
                         "case.</p>\n", c.stats.overall.count());
    } else {
      out += HtmlStatsTable(c) + "<h3>Plots</h3>\n" + HistogramSvg(c.stats.overall) + "\n" + CodeErrorSvg(c) + "\n" + RegionSvg(c) + "\n";
    }
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
    const auto worst_table = [&](const std::string& title, const std::vector<const WorstCaseReport*>& list) {
      if (list.empty()) return;
      out += fmt::format("<h3>{}</h3>\n<table><tr><th>e</th><th>sample</th><th>acc</th><th>u</th><th>y_ref</th>"
                         "<th>y_fused</th><th>repetitions</th><th style=\"text-align:left\">implementation [formulation]</th>"
                         "<th style=\"text-align:left\">replay</th></tr>", title);
      for (const WorstCaseReport* report : list) {
        const WorstCaseReport& w = *report;
        out += fmt::format("<tr><td>{:+d}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                           "<td style=\"text-align:left\"><code>{}</code></td>"
                           "<td style=\"text-align:left\"><code>fusediff replay '{}'</code></td></tr>",
                           w.sample.error, w.sample.sample, w.sample.acc, w.sample.u, w.sample.y_ref, w.sample.y_fused,
                           Repetitions(w.sample), HtmlEscape(Attribution(w.sample)), HtmlEscape(w.replay));
      }
      out += "</table>\n";
    };
    std::vector<const WorstCaseReport*> nondeterministic;
    for (const WorstCaseReport& w : c.nondeterministic) nondeterministic.push_back(&w);
    worst_table("Nondeterministic samples (outputs of every repetition)", nondeterministic);
    if (!all_exact) {
      // A gate's page shows every worst sample, a run's the five worst: it must stay under 2 MB (docs/reports.md),
      // and the results file has them all.
      const std::vector<const WorstCaseReport*> shown = SpreadForDisplay(c, run, run.gate ? c.worst.size() : 5);
      worst_table(run.gate                        ? std::string("Worst cases (the worst of each worse row first)")
                  : shown.size() < c.worst.size() ? fmt::format("Worst cases (the {} worst of the {} in the results file)",
                                                                shown.size(), c.worst.size())
                                                  : std::string("Worst cases"),
                  shown);
    }
    out += "</section>\n";
  }
  out += "<p>Reviewed and signed: ______________________ date: __________</p>\n</body></html>\n";
  return out;
}

namespace {

// Markdown for pull-request comments (GitHub holds 65,536 characters): what changed or failed, the rest summed up,
// the worst cases, and a pointer to the HTML for everything else.
constexpr size_t kMarkdownLimit = 60000;
constexpr size_t kMarkdownCaseRows = 100;  // cases that are not a plain pass, one row each
constexpr size_t kMarkdownWorstRows = 10;
constexpr size_t kMarkdownRowsOfTable = 32;  // a gate's worse rows and runs

std::string Clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

std::string MdGate(const RunResult& run) {
  if (!run.gate || !run.gate->canonical || run.cases.empty()) return "";
  const CanonicalComparison& k = *run.gate->canonical;
  std::string out = fmt::format("\n## The table against the canonical table ({}, {} mode, k = {})\n\n"
                                "| every code | candidate | canonical |\n|---|--:|--:|\n",
                                MdCell(k.construction), k.mode, k.slack);
  for (const auto& row : SideBySideRows(run.cases.front().stats.overall, k.canonical)) {
    out += fmt::format("| {} | {} | {} |\n", row[0], row[1], row[2]);
  }
  out += fmt::format("\nWorse by more than k: {} codes. Better: {} codes.\n", k.worse_codes, k.better_codes);
  if (!k.worse_rows.empty()) {
    out += fmt::format("\n| {} | value | canonical value | signed error e | canonical e | at u | codes it feeds | worse |\n"
                       "|--:|--:|--:|--:|--:|--:|---|--:|\n", k.rows);
    for (size_t i = 0; i < k.worse_rows.size() && i < kMarkdownRowsOfTable; ++i) {
      const WorseRow& r = k.worse_rows[i];
      out += fmt::format("| {} | {} | {} | **{:+d}** | {:+d} | {} | [{}, {}] | {} |\n", r.index, MdCell(r.value),
                         MdCell(r.canonical_value), r.error, r.canonical_error, r.worst_u, r.u_lo, r.u_hi, r.worse_codes);
    }
    if (k.worse_rows.size() > kMarkdownRowsOfTable) out += fmt::format("\n{} more in the HTML report.\n", k.worse_rows.size() - kMarkdownRowsOfTable);
  }
  for (size_t i = 0; i < k.worse.size() && i < kMarkdownRowsOfTable; ++i) out += "- worse: " + MdCell(RunRowText(k.worse[i], k.rows)) + "\n";
  return out;
}

std::string MdCaseRow(const std::string& name, const std::string& verdict, const ErrorStats& s, const std::string& tolerance) {
  if (verdict == "unsupported") return fmt::format("| {} | unsupported | - | - | - | - | - | - |\n", name);
  return fmt::format("| {} | {} | {} | {} | {:+.5f} | {} | {} | {} |\n", name, verdict, s.count(), Percent(s.exact_fraction()),
                     s.mean(), s.p99(), s.max_abs(), tolerance);
}

// Every case that is not a plain pass, then one row per pattern x fused path for the rest.
std::string MdSummary(const RunResult& run) {
  std::string out = "\n## Summary\n\n| case | verdict | samples | exact % | bias | p99 | max abs e | tolerance |\n"
                    "|---|---|--:|--:|--:|--:|--:|--:|\n";
  std::map<std::string, std::pair<ErrorStats, std::map<std::string, size_t>>> groups;
  size_t listed = 0, unlisted = 0;
  for (const CaseResult& c : run.cases) {
    const bool plain = c.verdict == Verdict::pass || c.verdict == Verdict::cross_convention;
    if (plain && !run.gate) {
      auto& [stats, verdicts] = groups[CaseGroup(c.spec)];
      stats.merge(c.stats.overall);
      ++verdicts[c.verdict == Verdict::pass ? "pass" : "cross_convention"];
      continue;
    }
    if (listed++ >= kMarkdownCaseRows) {
      ++unlisted;
      continue;
    }
    const bool failing = fails_run(c.verdict);
    out += MdCaseRow(MdCell(c.spec.name), failing ? "**" + std::string(to_string(c.verdict)) + "**" : std::string(to_string(c.verdict)),
                     c.stats.overall, std::to_string(c.tolerance.max_abs_lsb));
  }
  for (const auto& [group, entry] : groups) {
    std::string verdicts;
    for (const auto& [verdict, n] : entry.second) verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", n, verdict);
    out += MdCaseRow(MdCell(group) + " (every other case)", verdicts, entry.first, "-");
  }
  if (unlisted > 0) out += fmt::format("\n{} more cases that are not a plain pass: the HTML report lists every one.\n", unlisted);
  return out;
}

std::string MdFailures(const RunResult& run) {
  std::string out;
  size_t shown = 0;
  for (const CaseResult& c : run.cases) {
    if (!fails_run(c.verdict) && c.verdict != Verdict::unsupported) continue;
    if (out.empty()) out = "\n## Failing and unsupported cases\n\n| case | verdict | why |\n|---|---|---|\n";
    if (shown++ == kMarkdownCaseRows) break;
    out += fmt::format("| {} | {} | {} |\n", MdCell(c.spec.name), to_string(c.verdict), MdCell(Clip(c.reason, 240)));
  }
  for (const CaseResult& c : run.cases) {
    for (const KnownDefectTally& t : c.known_defects) {
      out += fmt::format("\n{}{} {} in {}: {}; {} draws, {} samples met its conditions, its model differs from the "
                         "reference on {}, explains {} (max |e| {}).\n",
                         static_cast<char>(std::toupper(describe(t.kind)[0])), describe(t.kind).substr(1), MdCell(t.id),
                         MdCell(c.spec.name), t.no_longer_reproduces() ? "**no longer reproduces**" : "reproduces", t.draws,
                         t.samples, t.predicted_samples, t.stats.overall.count(), t.stats.overall.max_abs());
    }
  }
  return out;
}

// The worst samples of the run: the failing cases' first (a gate's spread over its worse rows), then the others' by |e|.
std::string MdWorst(const RunResult& run) {
  std::vector<std::pair<const CaseResult*, const WorstCaseReport*>> all;
  for (const CaseResult& c : run.cases) {
    for (const WorstCaseReport* w : SpreadForDisplay(c, run, run.gate ? kMarkdownWorstRows : 1)) {
      if (w->sample.error != 0) all.push_back({&c, w});
    }
  }
  const auto failing = [](const CaseResult* c) { return fails_run(c->verdict); };
  std::stable_sort(all.begin(), all.end(), [&](const auto& a, const auto& b) {
    if (failing(a.first) != failing(b.first)) return failing(a.first);
    return run.gate ? false : std::llabs(a.second->sample.error) > std::llabs(b.second->sample.error);
  });
  if (all.empty()) return "";
  std::string out = "\n## Worst cases\n\n| case | e | u | y_ref | y_fused | replay |\n|---|--:|--:|--:|--:|---|\n";
  for (size_t i = 0; i < all.size() && i < kMarkdownWorstRows; ++i) {
    const WorstCase& w = all[i].second->sample;
    out += fmt::format("| {} | {:+d} | {} | {} | {} | {} |\n", MdCell(all[i].first->spec.name), w.error, w.u, w.y_ref,
                       w.y_fused, MdCode("fusediff replay '" + all[i].second->replay + "'"));
  }
  return out;
}

}  // namespace

std::string ToMarkdown(const RunResult& run) {
  const Headline headline = HeadlineOf(run);
  std::string out = fmt::format("# {}\n\n**{}**\n", MdCell(headline.title), MdCell(headline.reason));
  out += "\n| provenance | |\n|---|---|\n";
  for (const auto& [k, v] : ProvenanceRows(run)) out += fmt::format("| {} | {} |\n", k, MdCell(v));
  out += MdGate(run) + MdSummary(run) + MdFailures(run) + MdWorst(run);
  out += "\nEvery case's convention, tolerance, statistics per region, plots and worst cases with their replay lines: "
         "the HTML report (`fusediff report RESULTS.json --html report.html`).\n";
  if (out.size() > kMarkdownLimit) {  // long case names or reasons: cut at a line, and say so
    out.resize(out.rfind('\n', kMarkdownLimit - 200) + 1);
    out += "\n(cut to fit a pull-request comment: the HTML report has the rest)\n";
  }
  return out;
}

}  // namespace fusediff::reports

#include "fusediff/bisect/bisect_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fusediff/reports/reports.h"

namespace fusediff::bisect {

namespace {

nlohmann::ordered_json PerfJson(const Perf& p) {
  return {{"repeats", p.repeats}, {"median_ms", p.median_ms}, {"q1_ms", p.q1_ms},
          {"q3_ms", p.q3_ms},     {"min_ms", p.min_ms},       {"max_ms", p.max_ms}};
}

nlohmann::ordered_json DeltaJson(const OutputDelta& d) {
  nlohmann::ordered_json o = {{"output", d.output},       {"unit", d.unit},         {"step", d.step},
                              {"elements", d.elements},   {"differing", d.differing}, {"max", d.max_units},
                              {"max_abs", d.max_abs},     {"max_rel", d.max_rel}};
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  for (const auto& [k, n] : d.histogram) h[std::to_string(k)] = n;
  o["histogram"] = h;
  o["criterion"] = d.criterion;
  if (!d.uncovered.empty()) o["uncovered"] = d.uncovered;
  if (d.criterion == "bound") {
    o["bound"] = {{"r", d.r}, {"delta", d.r_delta}, {"bound_baseline", d.r_bound_baseline},
                  {"bound_step", d.r_bound_step}, {"value", d.r_value}, {"at", d.r_at}};
  }
  o["beyond"] = d.beyond;
  o["waived"] = d.waived;
  o["waived_by_tolerance"] = d.waived_by_tolerance;
  return o;
}

nlohmann::ordered_json DivergenceJson(const Divergence& d) {
  nlohmann::ordered_json j = {{"tensor", d.tensor}, {"producer", d.producer}, {"is_output", d.is_output},
                              {"candidates", d.candidates}, {"fetched", d.fetched}, {"skipped", d.skipped},
                              {"sessions", d.sessions}, {"input_sets", d.sets}};
  if (!d.note.empty()) j["note"] = d.note;
  if (d.delta) j["delta"] = DeltaJson(*d.delta);
  j["paths_to_outputs"] = d.paths;
  return j;
}

nlohmann::ordered_json StepJson(const Step& s) {
  nlohmann::ordered_json j;
  j["kind"] = s.kind;
  if (!s.subject.empty()) j["transformer"] = s.subject;
  j["level"] = s.level;
  j["disabled_count"] = s.disabled.size();
  j["fired"] = s.fired;
  j["nodes_changed"] = s.nodes_changed;
  j["node_delta"] = s.node_delta;
  nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
  for (const auto& d : s.deltas) outputs.push_back(DeltaJson(d));
  j["delta_acc"] = {{"max", s.max_units}, {"r", s.r}, {"outputs", outputs}};
  j["differing_by_family"] = s.differing_by_family;
  if (s.perf) {
    j["delta_perf"] = {{"latency", PerfJson(*s.perf)}, {"time_saved", s.time_saved}, {"within_noise", s.within_noise}};
    if (s.baseline_perf) {
      j["delta_perf"]["baseline_latency"] = PerfJson(*s.baseline_perf);
      j["delta_perf"]["time_saved_interval"] = {s.time_saved_lo, s.time_saved_hi};
      j["delta_perf"]["interval"] = "95% percentile bootstrap of the median ratio: 1000 resamplings of session pairs, then rounds (Philox)";
      j["delta_perf"]["noise_reason"] = s.noise_reason;
      j["delta_perf"]["same_graph"] = s.same_graph;
    }
  }
  j["loss"] = s.loss;
  j["over"] = s.over;
  if (!s.verdict.empty()) j["verdict"] = s.verdict;
  if (!s.refusal.empty()) j["refusal"] = {{"phase", s.refusal_phase}, {"message", s.refusal}};
  if (s.kind == "one_on" && !s.refusal.empty()) {
    j["dependency"] = {{"names", s.dependency}, {"sessions_tried", s.dependency_sessions}};
  }
  if (!s.reproduction.empty()) j["reproduction"] = s.reproduction;
  if (s.divergence) j["first_divergent_boundary"] = DivergenceJson(*s.divergence);
  return j;
}

nlohmann::ordered_json ExpectedJson(const ExpectedCheck& c) {
  nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
  for (const ExpectedOutput& e : c.outputs) {
    nlohmann::ordered_json o = {{"set", e.set}, {"output", e.output}, {"elements", e.elements},
                                {"mismatched", e.mismatched}, {"max_abs", e.max_abs}};
    if (!e.problem.empty()) o["problem"] = e.problem;
    outputs.push_back(o);
  }
  return {{"rtol", c.rtol}, {"atol", c.atol}, {"tolerance_source", c.tolerance_source}, {"agree", c.agree},
          {"outputs", outputs}};
}

std::string NodesText(const Step& s) {
  std::string t;
  for (const auto& [op, d] : s.node_delta) t += fmt::format("{}{}{} ", op, d > 0 ? "+" : "", d);
  if (!t.empty()) t.pop_back();
  return t.empty() ? "-" : t;
}

// The largest delta with its unit ("2.5 f32_ulp_of_max"), "-" for a refused step.
std::string AccText(const Step& s) {
  const OutputDelta* d = LargestDelta(s);
  return s.verdict == "refused" || d == nullptr ? "-" : fmt::format("{:.4g} {}", s.max_units, d->unit);
}

// That delta relative to its output's largest baseline magnitude.
std::string RelText(const Step& s) {
  const OutputDelta* d = LargestDelta(s);
  return s.verdict == "refused" || d == nullptr ? "-" : fmt::format("{:.3g}", d->max_rel);
}

std::string VerdictText(const Step& s) {
  return s.verdict == "refused" ? "refused (" + s.refusal_phase + ")" : s.verdict;
}

std::string PerfText(const Step& s) {
  if (!s.perf) return "-";
  // Microseconds: in process a small model's run takes a few of them. The interval: BootstrapMedianRatio's.
  if (!s.baseline_perf) return fmt::format("{:.1f} us", 1000.0 * s.perf->median_ms);
  if (s.same_graph) return fmt::format("same graph ({:.1f} us) noise", 1000.0 * s.perf->median_ms);
  return fmt::format("{:+.1f}% [{:+.1f},{:+.1f}] ({:.1f} us){}", 100.0 * s.time_saved, 100.0 * s.time_saved_lo,
                     100.0 * s.time_saved_hi, 1000.0 * s.perf->median_ms, s.within_noise ? " noise" : "");
}

// The rows a user reads: baseline, all on, every one-on step that fired or moved an output, pairs, the blacklist.
std::vector<const Step*> TableRows(const BisectResult& r) {
  std::vector<const Step*> rows;
  for (const Step& s : r.steps) {
    if (s.kind == "completeness" || s.kind == "leave_one_out") continue;
    if (s.kind == "one_on" && s.verdict == "not_fired") continue;
    rows.push_back(&s);
  }
  return rows;
}

std::string Label(const Step& s) { return s.subject.empty() ? s.kind : s.kind + " " + s.subject; }

// The refused sessions: each shown step's message, what it needs and its reproduction.
std::string RefusalsText(const BisectResult& r) {
  if (r.refused_steps == 0) return "";
  std::string t = fmt::format("refused steps: {}\n", r.refused_steps);
  for (const Step* s : TableRows(r)) {
    if (s->verdict != "refused") continue;
    t += "  " + Label(*s) + " (at " + s->refusal_phase + "): " + s->refusal + "\n";
    if (s->kind == "one_on") {
      t += s->dependency.empty()
               ? fmt::format("    needs: nothing found in {} sessions (singles, then pairs of the names that act)\n",
                             s->dependency_sessions)
               : fmt::format("    needs: {} (found in {} sessions)\n", fused::ort::DisableOptimizersValue(s->dependency),
                             s->dependency_sessions);
    }
    if (!s->reproduction.empty()) t += "    reproduction: " + s->reproduction + "\n";
  }
  return t;
}

std::string ExpectedText(const ExpectedCheck& c) {
  if (!c.checked) return "";
  size_t bad = 0;
  for (const ExpectedOutput& e : c.outputs) bad += !e.problem.empty() || e.mismatched > 0;
  std::string t = fmt::format("expected outputs (the test data's, rtol {:g}, atol {:g}, {}): ", c.rtol, c.atol,
                              c.tolerance_source);
  t += bad == 0 ? fmt::format("level disabled agrees ({} outputs)\n", c.outputs.size())
                : fmt::format("{} of {} outputs disagree\n", bad, c.outputs.size());
  for (const ExpectedOutput& e : c.outputs) {
    if (!e.problem.empty()) t += "  " + e.output + " (" + e.set + "): " + e.problem + "\n";
    if (e.problem.empty() && e.mismatched > 0) {
      t += fmt::format("  {} ({}): {} of {} elements beyond the tolerance (max |delta| {:.4g})\n", e.output, e.set,
                       e.mismatched, e.elements, e.max_abs);
    }
  }
  return t;
}

// "c2_bn (BatchNormalization): 3 f32_ulp_of_max, r 0.031" for a step's first divergent boundary.
std::string DivergenceText(const Divergence& d) {
  if (!d.delta) return d.note.empty() ? "-" : d.note;
  std::string t = d.tensor + " (" + (d.producer.empty() ? "?" : d.producer) + (d.is_output ? ", an output" : "") + "): " +
                  fmt::format("{:.4g} {}", d.delta->max_units, d.delta->unit);
  if (d.delta->criterion == "bound") t += fmt::format(", r {:.3g}", d.delta->r);
  if (!d.skipped.empty()) t += fmt::format(" ({} of {} tensors skipped: fetching them changes the graph)", d.skipped.size(), d.candidates);
  return t;
}

// How an output was judged: r against its bound, or its units against the named tolerance.
std::string JudgedText(const OutputDelta& d) {
  std::string t;
  if (d.criterion == "bound") {
    t = fmt::format("|delta| {:.3g}, B_baseline {:.3g}, B_step {:.3g}, r {:.3g}", d.r_delta, d.r_bound_baseline,
                    d.r_bound_step, d.r);
  } else if (d.criterion == "fallback tolerance") {
    t = fmt::format("{:.4g} {} against the fallback tolerance (--threshold; no bound: {})", d.max_units, d.unit, d.uncovered);
  } else {
    t = fmt::format("{:.4g} {} against --threshold", d.max_units, d.unit);
  }
  if (d.waived_by_tolerance) t += ", waived by tolerance (--atol/--rtol)";
  return t;
}

// Per step that moves an output: how each moved output was judged, and where the difference starts.
std::string AccuracyText(const BisectResult& r) {
  std::string t;
  for (const Step* s : TableRows(r)) {
    if (s->verdict == "refused" || s->max_units == 0 || s->kind == "pair") continue;
    for (const OutputDelta& d : s->deltas) {
      if (d.differing == 0) continue;
      t += fmt::format("  {:<42} {:<10} {}\n", Label(*s), d.output, JudgedText(d));
    }
    if (s->divergence) t += fmt::format("  {:<42} {:<10} first divergent boundary: {}\n", "", "", DivergenceText(*s->divergence));
  }
  if (t.empty()) return "";
  return "accuracy (r = |delta| / (B_baseline + B_step), the rounding-error bounds of the graph as written and of any "
         "legal rewrite; r > 1: beyond them):\n" + t;
}

std::string TimingControlText(const BisectResult& r) {
  for (const Step& s : r.steps) {
    if (s.kind != "completeness" || !s.perf) continue;
    return fmt::format("timing control (the baseline's graph in sessions of its own): {:+.1f}% [{:+.1f},{:+.1f}]: {}\n",
                       100.0 * (1 - s.perf->median_ms / s.baseline_perf->median_ms), 100.0 * s.time_saved_lo,
                       100.0 * s.time_saved_hi, r.timing_control_agrees ? "agrees (the interval holds 0)"
                                                                        : "DISAGREES: the timings are not to be trusted");
  }
  return "";
}

// "r1 &rarr; Conv &rarr; c2_conv ... &rarr; logits", one line per output the boundary reaches.
std::string PathsHtml(const Divergence& d) {
  std::string h;
  for (const auto& path : d.paths) {
    std::string line;
    for (size_t k = 0; k < path.size(); ++k) {
      line += (k == 0 ? "" : " &rarr; ") + std::string(k % 2 == 1 ? "<b>" : "<code>") + reports::HtmlEscape(path[k]) +
              (k % 2 == 1 ? "</b>" : "</code>");
    }
    h += (h.empty() ? "" : "<br>") + line;
  }
  return h.empty() ? "-" : h;
}

// Per step that moves an output: how each output was judged, the first divergent boundary, its path to the outputs.
std::string DivergenceHtml(const BisectResult& r) {
  std::string rows;
  for (const Step* s : TableRows(r)) {
    if (s->verdict == "refused" || s->max_units == 0 || s->kind == "pair") continue;
    std::string judged;
    for (const OutputDelta& d : s->deltas) {
      if (d.differing > 0) judged += (judged.empty() ? "" : "<br>") + reports::HtmlEscape(d.output + ": " + JudgedText(d));
    }
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", reports::HtmlEscape(Label(*s)), judged,
                        s->divergence ? reports::HtmlEscape(DivergenceText(*s->divergence)) : "-",
                        s->divergence ? PathsHtml(*s->divergence) : "-");
  }
  if (rows.empty()) return "";
  return "<h3>Where each difference starts</h3><p>r = |&Delta;| / (B<sub>baseline</sub> + B<sub>step</sub>): the "
         "rounding-error bounds of the graph as written and of any legal rewrite; r &gt; 1 is beyond them. The first "
         "divergent boundary: of the tensors both optimized graphs hold, the first in topological order whose values "
         "differ, and its path to the outputs.</p><table><tr><th>step</th><th>outputs</th><th>first divergent "
         "boundary</th><th>path to the outputs</th></tr>" + rows + "</table>";
}

}  // namespace

nlohmann::ordered_json ToJson(const BisectResult& r, const Provenance& p, const BisectReportOptions& o) {
  nlohmann::ordered_json j;
  j["format"] = kBisectFormat;
  j["tool"] = {{"name", p.tool_name}, {"version", p.tool_version}, {"git_commit", p.git_commit}};
  j["platform"] = {{"compiler", p.compiler}, {"libc", p.libc}, {"isa", p.isa}};
  j["command_line"] = p.command_line;
  j["created"] = p.created;
  j["runtime"] = r.runtime_version;
  j["optimizer_list"] = r.optimizer_list;
  j["model"] = r.model;
  j["seed"] = o.seed;
  j["threshold"] = o.threshold;
  j["perf_weight"] = o.perf_weight;
  j["loss"] = "max|delta| (output units) - perf_weight * time_saved / baseline time";
  nlohmann::ordered_json fam = nlohmann::ordered_json::object();
  for (const auto& f : r.families) fam[f] = r.sets_per_family.at(f);
  j["input_sets"] = fam;
  j["input_ranges"] = r.input_notes;
  j["max_bytes"] = o.max_bytes;
  if (r.expected.checked) j["expected_outputs"] = ExpectedJson(r.expected);
  j["refused_steps"] = r.refused_steps;
  if (!r.repro_dir.empty()) j["reproductions"] = r.repro_dir;
  j["explained_by_singles"] = r.explained_by_singles;
  j["timing_control_agrees"] = r.timing_control_agrees;
  j["bounds"] = {{"covered_ops", CoveredOps()}, {"legal_rewrites", LegalRewrites()},
                 {"verdict", "float outputs with a bound: r = |delta| / (B_baseline + B_step) > 1 blacklists; others: "
                             "max|delta| in their units > threshold"}};
  j["pairs"] = {{"run", r.pairs_run}, {"skipped_over_cap", r.pairs_skipped}};
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const Step& s : r.steps) steps.push_back(StepJson(s));
  j["steps"] = steps;
  j["blacklist"] = {{"names", r.blacklist},
                    {"session_config", {{"key", fused::ort::kDisableOptimizersKey},
                                        {"value", fused::ort::DisableOptimizersValue(r.blacklist)}}},
                    {"reasons", r.blacklist_reasons},
                    {"dependency_notes", r.dependency_notes},
                    {"builds", r.blacklist_builds},
                    {"each_name_changes_optimized_model", r.blacklist_name_effective},
                    {"rerun_within_tolerance", r.blacklist_within_tolerance}};
  if (!r.blacklist_builds) j["blacklist"]["refusal"] = r.blacklist_refusal;
  // fusediff's overhead: the wall time from starting the runtime to closing it outside ONNX Runtime's own calls
  // (loading the library, creating its environment and sessions, runs, releases), as a fraction of that time.
  const double total = r.runtime_start_seconds + r.total_seconds + r.runtime_close_seconds;
  const double inside = r.runtime_start_inside_ort_seconds + r.inside_ort_seconds + r.runtime_close_inside_ort_seconds;
  j["timing"] = {{"runtime_start_s", r.runtime_start_seconds},
                 {"runtime_start_inside_onnxruntime_s", r.runtime_start_inside_ort_seconds},
                 {"bisect_s", r.total_seconds},
                 {"runtime_calls_s", r.ort_seconds},
                 {"runtime_close_s", r.runtime_close_seconds},
                 {"runtime_close_inside_onnxruntime_s", r.runtime_close_inside_ort_seconds},
                 {"total_s", total},
                 {"inside_onnxruntime_s", inside},
                 {"fusediff_overhead", total > 0 ? (total - inside) / total : 0}};
  j["verdict"] = r.blacklist.empty() ? "pass" : "blacklist";
  return j;
}

namespace {
// The one-on steps by outcome: what the JUnit file and the closing line count.
struct OneOnCounts {
  std::vector<const Step*> listed;  // fired, blacklisted or refused: one test case each
  std::vector<std::string> not_fired;
  size_t kept = 0, blacklisted = 0, refused = 0;
};
OneOnCounts CountOneOn(const BisectResult& r) {
  OneOnCounts c;
  for (const Step& s : r.steps) {
    if (s.kind != "one_on") continue;
    if (s.verdict == "not_fired") {
      c.not_fired.push_back(s.subject);
      continue;
    }
    c.listed.push_back(&s);
    c.blacklisted += s.verdict == "blacklist";
    c.refused += s.verdict == "refused";
    c.kept += s.verdict != "blacklist" && s.verdict != "refused";
  }
  return c;
}
}  // namespace

std::string ToJUnit(const BisectResult& r) {
  // One test case per transformer that fired, was refused or was blacklisted; the ones that never fired are counted
  // (and named) in the suite's properties, so a pinned list of 80 names does not bury the few that act.
  const OneOnCounts c = CountOneOn(r);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites><testsuite name=\"fusediff.bisect\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
                   c.listed.size(), c.blacklisted, c.refused);
  std::string names;
  for (const std::string& n : c.not_fired) names += (names.empty() ? "" : ",") + n;
  x += fmt::format("  <properties><property name=\"transformers\" value=\"{}\"/><property name=\"not_fired\" value=\"{}\"/>"
                   "<property name=\"not_fired.names\" value=\"{}\"/></properties>\n",
                   c.listed.size() + c.not_fired.size(), c.not_fired.size(), reports::XmlEscape(names));
  for (const Step* s : c.listed) {
    x += fmt::format("  <testcase classname=\"bisect\" name=\"{}\"", reports::XmlEscape(s->subject));
    if (s->verdict == "refused") {
      x += fmt::format("><skipped message=\"ONNX Runtime refused it at {}: {}\"/></testcase>\n",
                       reports::XmlEscape(s->refusal_phase), reports::XmlEscape(s->refusal));
    } else if (s->verdict == "blacklist") {
      x += fmt::format("><failure message=\"max {:.6g} output units, loss {:.6g}\"/></testcase>\n", s->max_units,
                       s->loss);
    } else {
      x += "/>\n";
    }
  }
  x += "</testsuite></testsuites>\n";
  return x;
}

std::string ToText(const BisectResult& r) {
  std::string t = fmt::format("{}: {}\n", r.model, r.runtime_version);
  // Every column names its unit: dacc in its output's unit (lsb, int, fNN_ulp_of_max), rel as a fraction of the
  // output's largest baseline magnitude, the time saved in % of the baseline's median with the step's median in us,
  // the loss in dacc's units.
  t += fmt::format("{:<44} {:<5} {:<34} {:>24} {:>10} {:>26} {:>12}  {}\n", "step", "fired", "nodes changed",
                   "dacc max (unit)", "rel (of max)", "time saved % (median us)", "loss (units)", "verdict");
  for (const Step* s : TableRows(r)) {
    t += fmt::format("{:<44} {:<5} {:<34} {:>24} {:>10} {:>26} {:>12.4g}  {}\n", Label(*s), s->fired ? "yes" : "no",
                     NodesText(*s), AccText(*s), RelText(*s), PerfText(*s), s->loss, VerdictText(*s));
  }
  size_t restores = 0, loo_refused = 0;
  for (const Step& s : r.steps) {
    restores += s.kind == "leave_one_out" && (s.verdict == "restores" || s.verdict == "restores_build");
    loo_refused += s.kind == "leave_one_out" && s.verdict == "refused";
  }
  t += AccuracyText(r);
  t += TimingControlText(r);
  t += fmt::format("leave-one-out: {} of the names restore the baseline{} alone{}; singles explain all-on: {}; pairs {}\n",
                   restores, r.steps.size() > 2 && r.steps[2].verdict == "refused" ? " build" : "",
                   loo_refused > 0 ? fmt::format(" ({} refused)", loo_refused) : "", r.explained_by_singles ? "yes" : "no",
                   r.pairs_run);
  t += RefusalsText(r);
  for (const auto& note : r.input_notes) t += "generated " + note + "\n";
  t += ExpectedText(r.expected);
  t += "blacklist: " + (r.blacklist.empty() ? std::string("(empty)") : r.blacklist_config) + "\n";
  for (const auto& name : r.blacklist) t += "  " + name + ": " + r.blacklist_reasons.at(name) + "\n";
  for (const auto& note : r.dependency_notes) t += "  keep: " + note + "\n";
  if (!r.blacklist_builds) t += "  the blacklist's own session is refused too: " + r.blacklist_refusal + "\n";
  // The closing line: transformers kept (passed) and blacklisted (failed), then the others.
  const OneOnCounts c = CountOneOn(r);
  t += fmt::format("{} passed, {} failed, {} refused, {} did not fire ({} transformers)\n", c.kept, c.blacklisted,
                   c.refused, c.not_fired.size(), c.listed.size() + c.not_fired.size());
  return t;
}

std::string ToHtml(const BisectResult& r) {
  std::string h = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>fusediff bisect</title><style>"
                  "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #bbb;"
                  "padding:2px 8px;font-size:13px}th{background:#eee}.blacklist{background:#fdd}</style></head><body>";
  h += "<section id=\"bisect\"><h2>Which fusion moves the outputs</h2>";
  h += "<p>" + reports::HtmlEscape(r.model) + " on " + reports::HtmlEscape(r.runtime_version) + "</p>";
  h += "<table><tr><th>transformer</th><th>fired</th><th>nodes changed</th><th>&Delta;acc (max, unit)</th>"
       "<th>rel (of max)</th><th>time saved % (median us)</th><th>loss (units)</th><th>verdict</th></tr>";
  for (const Step* s : TableRows(r)) {
    const std::string verdict = s->verdict == "refused" ? VerdictText(*s) + ": " + s->refusal : s->verdict;
    h += fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4g}</td><td>{}</td></tr>",
                     s->verdict == "blacklist" ? " class=\"blacklist\"" : "", reports::HtmlEscape(Label(*s)),
                     s->fired ? "yes" : "no", reports::HtmlEscape(NodesText(*s)), reports::HtmlEscape(AccText(*s)),
                     RelText(*s), reports::HtmlEscape(PerfText(*s)), s->loss, reports::HtmlEscape(verdict));
  }
  h += "</table>";
  // Delta acc (y) against time saved (x), one point per one-on step that fired.
  const double w = 480, ht = 300, m = 40;
  double max_acc = 1, min_saved = -0.1, max_saved = 0.1;
  for (const Step& s : r.steps) {
    if (s.kind != "one_on" || !s.fired) continue;
    max_acc = std::max(max_acc, s.max_units);
    min_saved = std::min(min_saved, s.time_saved);
    max_saved = std::max(max_saved, s.time_saved);
  }
  const double pad = 0.2 * (max_saved - min_saved);  // room for the labels at either end
  min_saved -= pad;
  max_saved += pad;
  max_acc *= 1.1;
  h += fmt::format("<h3>&Delta;acc against &Delta;perf</h3><svg width=\"{}\" height=\"{}\" "
                   "xmlns=\"http://www.w3.org/2000/svg\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                   "fill=\"none\" stroke=\"#888\"/>",
                   w, ht, m, 10, w - m - 10, ht - m - 10);
  h += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">time saved (fraction of baseline)</text>", m, ht - 8);
  h += fmt::format("<text x=\"4\" y=\"20\" font-size=\"11\">max |&Delta;| {:.3g}</text>", max_acc);
  for (const Step& s : r.steps) {
    if (s.kind != "one_on" || !s.fired) continue;
    const double x = m + (s.time_saved - min_saved) / (max_saved - min_saved) * (w - m - 10);
    const double y = 10 + (1 - s.max_units / max_acc) * (ht - m - 10);
    h += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>", x, y,
                     s.verdict == "blacklist" ? "#c00" : "#06c", reports::HtmlEscape(s.subject));
    h += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">{}</text>", x + 5, y - 4, reports::HtmlEscape(s.subject));
  }
  h += "</svg>";
  h += DivergenceHtml(r);
  h += "<p>blacklist: <code>" + reports::HtmlEscape(r.blacklist.empty() ? std::string("(empty)") : r.blacklist_config) +
       "</code></p></section></body></html>\n";
  return h;
}

}  // namespace fusediff::bisect

// `fusediff bisect --shapes N=1,8,32`: one bisect per shape, and what changes between shapes. A fusion can pay at one
// batch size and cost at another; a decision taken at one shape does not hold for the others unless this says so.
#include <fmt/format.h>

#include <algorithm>

#include "fusediff/bisect/bisect_report.h"
#include "fusediff/reports/reports.h"

namespace fusediff::bisect {

namespace {

const Step* OneOn(const BisectResult& r, const std::string& name) {
  for (const Step& s : r.steps) {
    if (s.kind == "one_on" && s.subject == name) return &s;
  }
  return nullptr;
}

// faster | slower | noise (by the step's interval) | untimed
std::string PerfCall(const Step* s) {
  if (s == nullptr || !s->perf || !s->baseline_perf) return "untimed";
  if (s->within_noise) return "noise";
  return s->time_saved > 0 ? "faster" : "slower";
}

std::string Decision(const Step* s) { return s == nullptr ? "-" : s->verdict; }

// "keep r 0.031 +8.2% [+6.7,+10.3]" for one shape's step.
std::string Cell(const Step* s) {
  if (s == nullptr) return "-";
  std::string acc = s->r > 0 ? fmt::format("r {:.3g}", s->r) : fmt::format("{:.3g} units", s->max_units);
  std::string perf = !s->perf || !s->baseline_perf
                         ? "untimed"
                         : fmt::format("{:+.1f}% [{:+.1f},{:+.1f}]", 100 * s->time_saved, 100 * s->time_saved_lo,
                                       100 * s->time_saved_hi);
  return s->verdict + " " + acc + " " + perf;
}

}  // namespace

ShapeResults PerShape(const std::vector<std::map<std::string, int64_t>>& shapes, std::vector<BisectResult> results) {
  ShapeResults out;
  for (const auto& shape : shapes) {
    std::string label;
    for (const auto& [name, v] : shape) label += (label.empty() ? "" : ",") + name + "=" + std::to_string(v);
    out.labels.push_back(label);
  }
  out.results = std::move(results);
  for (const BisectResult& r : out.results) {
    for (const Step& s : r.steps) {
      if (s.kind == "one_on" && s.fired && std::find(out.transformers.begin(), out.transformers.end(), s.subject) == out.transformers.end()) {
        out.transformers.push_back(s.subject);
      }
    }
  }
  for (const std::string& name : out.transformers) {
    std::vector<std::string> decisions, calls;
    for (const BisectResult& r : out.results) {
      decisions.push_back(Decision(OneOn(r, name)));
      calls.push_back(PerfCall(OneOn(r, name)));
    }
    const auto differ = [](const std::vector<std::string>& v) { return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) != v.end(); };
    if (differ(decisions)) out.decision_changes.push_back(name);
    if (differ(calls)) out.perf_changes.push_back(name);
  }
  return out;
}

std::string ToText(const ShapeResults& s) {
  std::string t;
  for (size_t k = 0; k < s.results.size(); ++k) t += "== shape " + s.labels[k] + "\n" + ToText(s.results[k]);
  t += "per shape: decision, accuracy (r, or max |delta| in the output's units), time saved [95% interval]\n";
  t += fmt::format("  {:<36}", "transformer");
  for (const auto& label : s.labels) t += fmt::format(" {:<40}", label);
  t += "\n";
  for (const std::string& name : s.transformers) {
    t += fmt::format("  {:<36}", name);
    for (const BisectResult& r : s.results) t += fmt::format(" {:<40}", Cell(OneOn(r, name)));
    t += "\n";
  }
  const auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& n : v) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? std::string("none") : out;
  };
  t += "decision changes with shape: " + list(s.decision_changes) + "\n";
  t += "latency call (faster, slower, noise) changes with shape: " + list(s.perf_changes) + "\n";
  return t;
}

nlohmann::ordered_json ToJson(const ShapeResults& s, const Provenance& provenance, const BisectReportOptions& o) {
  nlohmann::ordered_json j;
  j["format"] = "fusediff-bisect-shapes/1";
  nlohmann::ordered_json shapes = nlohmann::ordered_json::array();
  for (size_t k = 0; k < s.results.size(); ++k) {
    shapes.push_back({{"shape", s.labels[k]}, {"bisect", ToJson(s.results[k], provenance, o)}});
  }
  j["shapes"] = shapes;
  nlohmann::ordered_json per = nlohmann::ordered_json::object();
  for (const std::string& name : s.transformers) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (size_t k = 0; k < s.results.size(); ++k) {
      const Step* st = OneOn(s.results[k], name);
      row.push_back({{"shape", s.labels[k]}, {"verdict", Decision(st)}, {"r", st != nullptr ? st->r : 0},
                     {"max_units", st != nullptr ? st->max_units : 0},
                     {"time_saved", st != nullptr ? st->time_saved : 0}, {"latency_call", PerfCall(st)}});
    }
    per[name] = row;
  }
  j["per_transformer"] = per;
  j["decision_changes"] = s.decision_changes;
  j["perf_changes"] = s.perf_changes;
  return j;
}

// Each shape's own JUnit document, its testsuite renamed after the shape and put under one <testsuites>.
std::string ToJUnit(const ShapeResults& s) {
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>";
  for (size_t k = 0; k < s.results.size(); ++k) {
    std::string one = ToJUnit(s.results[k]);
    const size_t begin = one.find("<testsuite "), end = one.rfind("</testsuites>");
    one = one.substr(begin, end - begin);
    const std::string name = "name=\"fusediff.bisect\"";
    const size_t at = one.find(name);
    if (at != std::string::npos) one.replace(at, name.size(), "name=\"fusediff.bisect[" + reports::XmlEscape(s.labels[k]) + "]\"");
    x += one;
  }
  return x + "</testsuites>\n";
}

std::string ToHtml(const ShapeResults& s) {
  std::string h = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>fusediff bisect per shape</title></head><body>";
  h += "<h2>Per shape</h2><table border=\"1\"><tr><th>transformer</th>";
  for (const auto& label : s.labels) h += "<th>" + reports::HtmlEscape(label) + "</th>";
  h += "</tr>";
  for (const std::string& name : s.transformers) {
    h += "<tr><td>" + reports::HtmlEscape(name) + "</td>";
    for (const BisectResult& r : s.results) h += "<td>" + reports::HtmlEscape(Cell(OneOn(r, name))) + "</td>";
    h += "</tr>";
  }
  h += "</table>";
  for (size_t k = 0; k < s.results.size(); ++k) {
    std::string page = ToHtml(s.results[k]);
    const size_t begin = page.find("<section"), end = page.rfind("</section>");
    h += "<h2>" + reports::HtmlEscape(s.labels[k]) + "</h2>" + page.substr(begin, end + 10 - begin);
  }
  return h + "</body></html>\n";
}

}  // namespace fusediff::bisect

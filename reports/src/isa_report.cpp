// `fusediff run --isa`: the per-ISA table and its JSON.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {
std::string Cell(const CaseResult& c) {
  if (c.verdict == Verdict::unsupported) return "unsupported";
  const ErrorStats& s = c.stats.overall;
  const std::string verdict = c.verdict == Verdict::cross_convention ? "-" : std::string(to_string(c.verdict));
  return fmt::format("{:.3f} / {} / {}", 100.0 * s.exact_fraction(), s.max_abs(), verdict);
}
}  // namespace

std::string RenderIsaMatrix(const std::vector<IsaRun>& runs, std::string_view backend, std::string_view cap_variable) {
  std::vector<const IsaRun*> shown;
  for (const IsaRun& r : runs) {
    if (r.available) shown.push_back(&r);
  }
  // Rows: the cases in the first available run's order, then any case only a later run has.
  std::vector<std::string> names;
  std::map<std::string, std::vector<const CaseResult*>> cells;
  for (size_t i = 0; i < shown.size(); ++i) {
    for (const CaseResult& c : shown[i]->run.cases) {
      std::vector<const CaseResult*>& row = cells[c.spec.name];
      if (row.empty()) {
        names.push_back(c.spec.name);
        row.assign(shown.size(), nullptr);
      }
      row[i] = &c;
    }
  }
  size_t name_width = 4;
  for (const std::string& n : names) name_width = std::max(name_width, n.size());
  std::vector<size_t> widths;
  for (const IsaRun* r : shown) {
    size_t w = std::max(r->cap.size(), r->effective_isa.size());
    for (const CaseResult& c : r->run.cases) w = std::max(w, Cell(c).size());
    widths.push_back(w);
  }
  std::string out = fmt::format("exact % / max |e| / verdict per {} ISA cap ({}; '-': cross-convention, no verdict)\n",
                                backend, cap_variable);
  std::string header = fmt::format("{:<{}}", "case", name_width), dispatch = fmt::format("{:<{}}", "dispatched to", name_width);
  for (size_t i = 0; i < shown.size(); ++i) {
    header += fmt::format("  {:<{}}", shown[i]->cap, widths[i]);
    dispatch += fmt::format("  {:<{}}", shown[i]->effective_isa, widths[i]);
  }
  out += header + "\n" + dispatch + "\n";
  size_t total = name_width;
  for (size_t w : widths) total += 2 + w;
  out += std::string(total, '-') + "\n";
  for (const std::string& n : names) {
    std::string line = fmt::format("{:<{}}", n, name_width);
    const std::vector<const CaseResult*>& row = cells[n];
    for (size_t i = 0; i < shown.size(); ++i) line += fmt::format("  {:<{}}", row[i] ? Cell(*row[i]) : "(absent)", widths[i]);
    out += line + "\n";
  }
  std::string exits = fmt::format("{:<{}}", "exit code", name_width);
  for (size_t i = 0; i < shown.size(); ++i) exits += fmt::format("  {:<{}}", shown[i]->exit_code, widths[i]);
  out += std::string(total, '-') + "\n" + exits + "\n";
  for (const IsaRun* r : shown) {
    // Each case's implementations are " | "-joined (join_implementations): one line per distinct one.
    std::vector<std::string> implementations;
    for (const CaseResult& c : r->run.cases) {
      for (size_t start = 0; start < c.implementation.size();) {
        const size_t end = std::min(c.implementation.find(" | ", start), c.implementation.size());
        const std::string one = c.implementation.substr(start, end - start);
        if (std::find(implementations.begin(), implementations.end(), one) == implementations.end()) {
          implementations.push_back(one);
        }
        start = end + 3;
      }
    }
    std::sort(implementations.begin(), implementations.end());
    std::map<Verdict, size_t> verdicts;
    for (const CaseResult& c : r->run.cases) ++verdicts[c.verdict];
    out += fmt::format("\n{} ({}): {} pass, {} documented_behaviour, {} known_defect, {} fail", r->cap, r->effective_isa,
                       verdicts[Verdict::pass], verdicts[Verdict::documented_behaviour], verdicts[Verdict::known_defect],
                       verdicts[Verdict::fail] + verdicts[Verdict::nondeterministic] + verdicts[Verdict::crashed] +
                           verdicts[Verdict::timeout]);
    out += fmt::format(" ({} unsupported, {} without a verdict):\n", verdicts[Verdict::unsupported],
                       verdicts[Verdict::cross_convention]);
    if (implementations.empty()) out += "  no implementation ran\n";
    for (const std::string& i : implementations) out += "  " + i + "\n";
  }
  for (const IsaRun& r : runs) {
    if (!r.available) {
      out += fmt::format("\n{}: not available on this CPU ({} dispatches to {} under it)\n", r.cap, backend,
                         r.effective_isa.empty() ? std::string("nothing") : r.effective_isa);
    }
  }
  return out;
}

nlohmann::ordered_json IsaMatrixToJson(const std::vector<IsaRun>& runs, const Provenance& provenance) {
  nlohmann::ordered_json j;
  j["format"] = kIsaMatrixFormat;
  RunResult header;
  header.provenance = provenance;
  const nlohmann::ordered_json whole = ToJson(header);
  for (const char* key : {"tool", "platform", "command_line", "created"}) j[key] = whole[key];
  nlohmann::ordered_json isas = nlohmann::ordered_json::array();
  for (const IsaRun& r : runs) {
    nlohmann::ordered_json e;
    e["cap"] = r.cap;
    e["effective_isa"] = r.effective_isa;
    e["available"] = r.available;
    e["exit_code"] = r.exit_code;
    if (r.available) e["results"] = ToJson(r.run);
    isas.push_back(std::move(e));
  }
  j["isas"] = std::move(isas);
  return j;
}

}  // namespace fusediff::reports

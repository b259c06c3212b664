// Nightly regression: a current run against a stored baseline, case by case.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "fusediff/json/strict_parse.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

bool RunComparison::any_regression() const {
  for (const CaseComparison& c : cases) {
    if (c.regression) return true;
  }
  return false;
}

CompareRules ReadCompareRules(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open the rules file");
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = strict_json::Parse(text.str(), path);  // a duplicate rule: InputError with its line
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {}): expected an object of compare rules", path, e.byte));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number beyond double's range
    throw InputError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw InputError(path + ": expected a JSON object of compare rules");
  CompareRules rules;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    auto need = [&](bool ok, const char* what) {
      if (!ok) throw InputError(fmt::format("{}: {}: expected {}", path, key, what));
    };
    if (key == "max_abs_growth_lsb") {
      need(v.is_number_integer() && v.get<int64_t>() >= 0, "a non-negative integer (LSB)");
      rules.max_abs_growth_lsb = v.get<int64_t>();
    } else if (key == "exact_fraction_drop") {
      need(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1, "a number in [0, 1]");
      rules.exact_fraction_drop = v.get<double>();
    } else if (key == "abs_bias_growth_lsb") {
      need(v.is_number() && v.get<double>() >= 0, "a non-negative number (LSB)");
      rules.abs_bias_growth_lsb = v.get<double>();
    } else if (key == "missing_case_is_regression") {
      need(v.is_boolean(), "true or false");
      rules.missing_case_is_regression = v.get<bool>();
    } else if (key == "convention_change_is_regression") {
      need(v.is_boolean(), "true or false");
      rules.convention_change_is_regression = v.get<bool>();
    } else if (key == "resampled_is_regression") {
      need(v.is_boolean(), "true or false");
      rules.resampled_is_regression = v.get<bool>();
    } else {
      throw InputError(fmt::format("{}: {}: unknown rule (expected max_abs_growth_lsb, exact_fraction_drop, "
                                   "abs_bias_growth_lsb, missing_case_is_regression, convention_change_is_regression, "
                                   "resampled_is_regression)", path, key));
    }
  }
  return rules;
}

namespace {
// The convention as the nightly sees it: everything but the sample count.
std::string ConventionKey(const CaseSpec& s) { return canonical_key(s) + ";mutant=" + std::string(to_string(s.mutant)); }

void CompareCase(CaseComparison& out, uint64_t baseline_seed, uint64_t current_seed, const CompareRules& rules) {
  const CaseResult& b = *out.baseline;
  const CaseResult& c = *out.current;
  auto flag = [&](std::string finding) {
    out.findings.push_back(std::move(finding));
    out.regression = true;
  };
  if (ConventionKey(b.spec) != ConventionKey(c.spec)) {
    if (rules.convention_change_is_regression) flag("convention changed: " + describe(b.spec.convention) + " -> " + describe(c.spec.convention));
    else out.notes.push_back("convention changed");
    return;  // different conventions: their statistics are not comparable
  }
  if (!c.complete) flag("current run of this case is incomplete (interrupted)");
  if (CaseSampleSetId(baseline_seed, b.spec) != CaseSampleSetId(current_seed, c.spec)) {
    if (rules.resampled_is_regression) flag("sample set changed");
    else out.notes.push_back("sample set changed (seed or sample count): differences may come from the samples");
  }
  if ((b.verdict == Verdict::unsupported) != (c.verdict == Verdict::unsupported)) {
    if (c.verdict == Verdict::unsupported) flag("now unsupported: " + c.reason);
    else out.notes.push_back("now supported");
    return;
  }
  if (c.verdict == Verdict::unsupported) return;
  const ErrorStats& bs = b.stats.overall;
  const ErrorStats& cs = c.stats.overall;
  if (cs.max_abs() > bs.max_abs() + rules.max_abs_growth_lsb) {
    flag(fmt::format("max |e| {} -> {} LSB (allowed growth {})", bs.max_abs(), cs.max_abs(), rules.max_abs_growth_lsb));
  }
  if (cs.exact_fraction() < bs.exact_fraction() - rules.exact_fraction_drop) {
    flag(fmt::format("exact {:.4f}% -> {:.4f}% (allowed drop {:.4f} points)", 100 * bs.exact_fraction(),
                     100 * cs.exact_fraction(), 100 * rules.exact_fraction_drop));
  }
  if (std::abs(cs.mean()) > std::abs(bs.mean()) + rules.abs_bias_growth_lsb) {
    flag(fmt::format("|bias| {:.5f} -> {:.5f} LSB (allowed growth {})", std::abs(bs.mean()), std::abs(cs.mean()),
                     rules.abs_bias_growth_lsb));
  }
  if ((b.verdict == Verdict::pass || b.verdict == Verdict::known_defect || b.verdict == Verdict::documented_behaviour) &&
      (c.verdict == Verdict::fail || c.verdict == Verdict::nondeterministic)) {
    flag("verdict " + std::string(to_string(b.verdict)) + " -> " + std::string(to_string(c.verdict)) + ": " + c.reason);
  }
  // The ledger's view: a known defect or documented behaviour that appears or disappears is a change to look at (a
  // new library bug the ledger explains, a fixed library, a changed entry, another CPU), whichever way it goes.
  std::map<std::string, std::pair<LedgerKind, uint64_t>> before, after;
  for (const KnownDefectTally& t : b.known_defects) before[t.id] = {t.kind, t.stats.overall.count()};
  for (const KnownDefectTally& t : c.known_defects) after[t.id] = {t.kind, t.stats.overall.count()};
  for (const auto& [id, was] : before) {
    const uint64_t now = after.count(id) ? after[id].second : 0;
    if (was.second > 0 && now == 0) {
      flag(fmt::format("{} {} disappeared ({} -> 0 samples){}", describe(was.first), id, was.second,
                       after.count(id) ? ": its conditions were met and nothing showed it (fixed library?)" : ""));
    }
  }
  for (const auto& [id, now] : after) {
    const uint64_t was = before.count(id) ? before[id].second : 0;
    if (now.second > 0 && was == 0) flag(fmt::format("{} {} appeared (0 -> {} samples)", describe(now.first), id, now.second));
  }
}
}  // namespace

RunComparison Compare(const RunResult& baseline, const RunResult& current, const CompareRules& rules) {
  RunComparison result;
  result.sample_set_changed = SampleSetId(baseline) != SampleSetId(current);
  std::map<std::string, const CaseResult*> current_by_name;
  for (const CaseResult& c : current.cases) current_by_name[c.spec.name] = &c;
  std::map<std::string, bool> in_baseline;
  for (const CaseResult& b : baseline.cases) {
    in_baseline[b.spec.name] = true;
    CaseComparison cc;
    cc.name = b.spec.name;
    cc.baseline = &b;
    auto it = current_by_name.find(b.spec.name);
    if (it == current_by_name.end()) {
      if (rules.missing_case_is_regression) {
        cc.findings.push_back("case disappeared");
        cc.regression = true;
      } else {
        cc.notes.push_back("case disappeared");
      }
    } else {
      cc.current = it->second;
      CompareCase(cc, baseline.seed, current.seed, rules);
    }
    result.cases.push_back(std::move(cc));
  }
  for (const CaseResult& c : current.cases) {
    if (in_baseline.count(c.spec.name)) continue;
    CaseComparison cc;
    cc.name = c.spec.name;
    cc.current = &c;
    cc.notes.push_back("new case (no baseline)");
    result.cases.push_back(std::move(cc));
  }
  return result;
}

std::string RenderComparison(const RunComparison& comparison, const RunResult& baseline, const RunResult& current) {
  size_t width = 4;
  for (const CaseComparison& c : comparison.cases) width = std::max(width, c.name.size());
  auto cells = [](const CaseResult* r) -> std::string {
    if (!r) return fmt::format("{:>5} {:>9} {:>9}", "-", "-", "-");
    if (r->verdict == Verdict::unsupported) return fmt::format("{:>5} {:>9} {:>9}", "unsup", "-", "-");
    const ErrorStats& s = r->stats.overall;
    return fmt::format("{:>5} {:>9.4f} {:>+9.5f}", s.max_abs(), 100 * s.exact_fraction(), s.mean());
  };
  std::string out = fmt::format("{:<{}}  {:^25}  {:^25}  {}\n", "", width, "baseline", "current", "");
  out += fmt::format("{:<{}}  {:>5} {:>9} {:>9}  {:>5} {:>9} {:>9}  {}\n", "case", width, "max", "exact %", "bias", "max",
                     "exact %", "bias", "status");
  out += std::string(width + 70, '-') + "\n";
  size_t regressions = 0;
  for (const CaseComparison& c : comparison.cases) {
    regressions += c.regression;
    const std::string status = c.regression ? "REGRESSION" : (c.notes.empty() ? "ok" : "note");
    out += fmt::format("{:<{}}  {}  {}  {}\n", c.name, width, cells(c.baseline), cells(c.current), status);
    for (const std::string& f : c.findings) out += fmt::format("{:<{}}    ! {}\n", "", width, f);
    for (const std::string& n : c.notes) out += fmt::format("{:<{}}    ~ {}\n", "", width, n);
  }
  if (comparison.sample_set_changed) {
    out += fmt::format("\nsample set changed: baseline {} (seed {}), current {} (seed {}); cases marked '~ sample set "
                       "changed' compare different samples\n",
                       SampleSetId(baseline).substr(0, 12), baseline.seed, SampleSetId(current).substr(0, 12), current.seed);
  }
  if (!current.complete) out += "\ncurrent run is incomplete (interrupted, or a merge of some shards)\n";
  out += fmt::format("\n{} cases compared: {} regression{}\n", comparison.cases.size(), regressions,
                     regressions == 1 ? "" : "s");
  return out;
}

}  // namespace fusediff::reports

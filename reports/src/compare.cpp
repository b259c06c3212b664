// Nightly regression: a current run against a stored baseline, case by case (reports.h, docs/reports.md).
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "case_groups.h"
#include "compare_stats.h"
#include "fusediff/json/strict_parse.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

bool RunComparison::any_regression() const {
  for (const CaseComparison& c : cases) {
    if (c.regression || !c.ledger.empty()) return true;
  }
  return false;
}

namespace {
nlohmann::json ParseRulesFile(const std::string& path) {
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
  return j;
}
}  // namespace

CompareRules ReadCompareRules(const std::string& path) {
  const nlohmann::json j = ParseRulesFile(path);
  CompareRules rules;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    auto need = [&](bool ok, const char* what) {
      if (!ok) throw InputError(fmt::format("{}: {}: expected {}", path, key, what));
    };
    const auto flag = [&](bool& into) {
      need(v.is_boolean(), "true or false");
      into = v.get<bool>();
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
    } else if (key == "level") {
      need(v.is_number() && v.get<double>() > 0 && v.get<double>() < 1, "a number in (0, 1): the family-wise level");
      rules.level = v.get<double>();
    } else if (key == "min_draws") {
      need(v.is_number_integer() && v.get<int64_t>() >= 2, "an integer >= 2");
      rules.min_draws = v.get<uint64_t>();
    } else if (key == "missing_case_is_regression") {
      flag(rules.missing_case_is_regression);
    } else if (key == "convention_change_is_regression") {
      flag(rules.convention_change_is_regression);
    } else if (key == "resampled_is_regression") {
      flag(rules.resampled_is_regression);
    } else {
      throw InputError(fmt::format("{}: {}: unknown rule (expected max_abs_growth_lsb, exact_fraction_drop, "
                                   "abs_bias_growth_lsb, level, min_draws, missing_case_is_regression, "
                                   "convention_change_is_regression, resampled_is_regression)", path, key));
    }
  }
  return rules;
}

namespace {

// ---- what changed in a case's definition --------------------------------------------------------------------

void Flatten(const nlohmann::ordered_json& j, const std::string& path, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) Flatten(*it, path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) Flatten(j[i], fmt::format("{}[{}]", path, i), out);
  } else {
    out[path] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

// "FIELD: BEFORE -> AFTER" per field that differs. `subject`: the mutant and the table (what the case tests, its
// convention unchanged); `samples`: the requested sample count; `convention`: everything else.
struct DefinitionDiff {
  std::vector<std::string> subject, samples, convention;
};
DefinitionDiff DiffDefinitions(const CaseSpec& b, const CaseSpec& c) {
  std::map<std::string, std::string> before, after;
  Flatten(CaseDefinitionToJson(b), "", before);
  Flatten(CaseDefinitionToJson(c), "", after);
  for (const auto& [key, value] : after) before.emplace(key, "(none)");
  DefinitionDiff diff;
  for (const auto& [key, value] : before) {
    const std::string now = after.count(key) ? after[key] : "(none)";
    if (now == value) continue;
    const std::string text = key + ": " + value + " -> " + now;
    if (key == "mutant" || key == "table") diff.subject.push_back(text);
    else if (key == "requested_samples") diff.samples.push_back(text);
    else diff.convention.push_back(text);
  }
  return diff;
}

std::string Join(const std::vector<std::string>& items, const char* separator = "; ") {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// ---- one case -------------------------------------------------------------------------------------------------

// A test over draws that Holm decides later: its finding when rejected, and whether that finding is a regression.
struct PendingTest {
  size_t case_index;
  double p;
  std::string finding;
  bool regression;
};

struct CaseContext {
  CaseComparison& out;
  const CompareRules& rules;
  bool verdictless;  // a cross-convention measurement: it moves, it never regresses
};

void Report(CaseContext& ctx, const std::string& finding, bool regression = true) {
  if (regression && !ctx.verdictless) {
    ctx.out.findings.push_back(finding);
    ctx.out.regression = true;
  } else {
    ctx.out.moved.push_back(finding);
  }
}

bool Exhaustive(const CaseResult& r) {
  return r.spec.source == SampleSource::sweep && r.complete && r.intermediate_codes_covered == r.per_code.code_count() &&
         r.per_code.code_count() > 0;
}

// The same samples: same seed, the same sample stream and count (the mutant and a library's comparison kind do not
// move the stream), or both exhaustive sweeps.
bool SameSamples(const CaseResult& b, uint64_t b_seed, const CaseResult& c, uint64_t c_seed) {
  if (Exhaustive(b) && Exhaustive(c)) return true;
  return b_seed == c_seed && b.spec.source == c.spec.source && case_stream_id(b.spec) == case_stream_id(c.spec) &&
         effective_samples(b.spec) == effective_samples(c.spec);
}

// Same samples: today's thresholds, and every code that errs more than before at the same samples.
void CompareSameSamples(CaseContext& ctx, const CaseResult& b, const CaseResult& c) {
  const ErrorStats& bs = b.stats.overall;
  const ErrorStats& cs = c.stats.overall;
  const CompareRules& rules = ctx.rules;
  if (cs.max_abs() > bs.max_abs() + rules.max_abs_growth_lsb) {
    Report(ctx, fmt::format("max |e| {} -> {} LSB (allowed growth {})", bs.max_abs(), cs.max_abs(), rules.max_abs_growth_lsb));
  }
  if (cs.exact_fraction() < bs.exact_fraction() - rules.exact_fraction_drop) {
    Report(ctx, fmt::format("exact {:.4f}% -> {:.4f}% (allowed drop {:.4f} points)", 100 * bs.exact_fraction(),
                            100 * cs.exact_fraction(), 100 * rules.exact_fraction_drop));
  }
  if (std::abs(cs.mean()) > std::abs(bs.mean()) + rules.abs_bias_growth_lsb) {
    Report(ctx, fmt::format("|bias| {:.5f} -> {:.5f} LSB (allowed growth {})", std::abs(bs.mean()), std::abs(cs.mean()),
                            rules.abs_bias_growth_lsb));
  }
  if (b.per_code.code_count() == 0 || b.per_code.code_count() != c.per_code.code_count()) return;
  uint64_t worse = 0;
  std::string first;
  const auto abs_max = [](const CodeErrors& codes, int32_t u) {
    const auto it = codes.nonzero().find(u);
    return it == codes.nonzero().end() ? int64_t{0} : std::max(std::llabs(it->second.min), std::llabs(it->second.max));
  };
  for (const auto& [u, range] : c.per_code.nonzero()) {
    if (!b.per_code.covered(u) || abs_max(c.per_code, u) <= abs_max(b.per_code, u)) continue;
    if (worse++ == 0) first = fmt::format("u = {}: |e| {} -> {}", u, abs_max(b.per_code, u), abs_max(c.per_code, u));
  }
  if (worse > 0) Report(ctx, fmt::format("{} codes err more than before at the same samples (first {})", worse, first));
}

std::string Percent(double f) { return fmt::format("{:.3f}%", 100 * f); }

// Different samples: the tests over draws, decided by Holm over the whole comparison.
void CompareOverDraws(CaseContext& ctx, const CaseResult& b, const CaseResult& c, size_t index,
                      std::vector<PendingTest>& tests) {
  const std::vector<DrawTally>& bd = b.stats.draws.draws();
  const std::vector<DrawTally>& cd = c.stats.draws.draws();
  if (bd.empty() || cd.empty()) {
    ctx.out.notes.push_back("different samples without per-draw data on both sides (results before "
                            "fusediff-results/6, or not a conv case): not judged statistically");
    return;
  }
  if (bd.size() < ctx.rules.min_draws || cd.size() < ctx.rules.min_draws) {
    ctx.out.notes.push_back(fmt::format("{} and {} draws: too few (< {}) to judge over draws", bd.size(), cd.size(),
                                        ctx.rules.min_draws));
    return;
  }
  const std::string draws = fmt::format(" over {} / {} draws", bd.size(), cd.size());
  const auto add = [&](double p, std::string finding, bool regression) {
    tests.push_back(PendingTest{index, p, std::move(finding), regression && !ctx.verdictless});
  };
  const auto bin = [](size_t k) { return [k](const DrawTally& d) { return static_cast<double>(d.bins[k]); }; };
  const DrawEstimate be = EstimateOverDraws(bd, bin(2)), ce = EstimateOverDraws(cd, bin(2));
  add(WelchPValue(be, ce, Tail::lower), fmt::format("exact {} -> {}{}", Percent(be.value), Percent(ce.value), draws), true);
  const auto sum = [](const DrawTally& d) { return static_cast<double>(d.sum); };
  const DrawEstimate bb = EstimateOverDraws(bd, sum), cb = EstimateOverDraws(cd, sum);
  add(WelchPValue(bb, cb, Tail::both), fmt::format("bias {:+.5f} -> {:+.5f} LSB{}", bb.value, cb.value, draws),
      std::abs(cb.value) > std::abs(bb.value));
  constexpr const char* kBinNames[kDrawBins] = {"e <= -2", "e = -1", "e = 0", "e = +1", "e >= +2"};
  for (size_t k : {size_t{0}, size_t{1}, size_t{3}, size_t{4}}) {
    const DrawEstimate bk = EstimateOverDraws(bd, bin(k)), ck = EstimateOverDraws(cd, bin(k));
    if (bk.value == 0 && ck.value == 0) continue;
    add(WelchPValue(bk, ck, Tail::upper),
        fmt::format("histogram: share of {} {} -> {}{}", kBinNames[k], Percent(bk.value), Percent(ck.value), draws), true);
  }
  const int64_t bmax = b.stats.overall.max_abs(), cmax = c.stats.overall.max_abs();
  if (cmax > bmax + ctx.rules.max_abs_growth_lsb) {
    uint64_t exceeding = 0;
    for (const DrawTally& d : cd) exceeding += d.max_abs > bmax;
    const double unseen = UnseenProbability(exceeding, cd.size(), bd.size());
    add(unseen, fmt::format("max |e| {} -> {} LSB: {} of {} current draws exceed {}; the baseline's {} draws would have "
                            "shown it (P(unseen) = {:.2g})", bmax, cmax, exceeding, cd.size(), bmax, bd.size(), unseen),
        true);
    ctx.out.notes.push_back(fmt::format("max |e| {} -> {} LSB in {} of {} draws", bmax, cmax, exceeding, cd.size()));
  }
}

// The ledger's view, apart from the statistics: an entry that appears or disappears at the same samples, or that
// stops (or starts) reproducing where its conditions were met, needs a look (a fixed library, a changed entry,
// another CPU); with different samples, an entry whose conditions only one side's draws met has only moved.
void CompareLedger(CaseContext& ctx, const CaseResult& b, const CaseResult& c, bool same) {
  std::map<std::string, const KnownDefectTally*> before, after;
  for (const KnownDefectTally& t : b.known_defects) before[t.id] = &t;
  for (const KnownDefectTally& t : c.known_defects) after[t.id] = &t;
  std::map<std::string, bool> ids;
  for (const auto& [id, t] : before) ids[id] = true;
  for (const auto& [id, t] : after) ids[id] = true;
  for (const auto& [id, unused] : ids) {
    const KnownDefectTally* was = before.count(id) ? before[id] : nullptr;
    const KnownDefectTally* now = after.count(id) ? after[id] : nullptr;
    // Withheld samples (model not_executed: the library would crash on the draw) count as the entry's.
    const uint64_t w = was ? was->stats.overall.count() + was->withheld_samples : 0;
    const uint64_t n = now ? now->stats.overall.count() + now->withheld_samples : 0;
    const LedgerKind kind = (now ? now : was)->kind;
    if (w == n || (w > 0 && n > 0 && !same)) continue;
    const std::string text = fmt::format("{} {} {} ({} -> {} samples)", describe(kind), id,
                                         n == 0 ? "disappeared" : w == 0 ? "appeared" : "changed", w, n);
    const KnownDefectTally* silent = n == 0 ? now : was;  // the side where it explains nothing
    const bool conditions_met = silent && silent->draws > 0 && silent->predicted_samples > 0;
    if (same || conditions_met) {
      ctx.out.ledger.push_back(text + (n == 0 && now ? ": its conditions were met and nothing showed it (fixed library?)" : ""));
    } else {
      ctx.out.ledger_moved.push_back(std::string(describe(kind)) + " " + id);
    }
  }
}

bool Passed(Verdict v) {
  return v == Verdict::pass || v == Verdict::known_defect || v == Verdict::documented_behaviour;
}

void CompareCase(CaseComparison& out, const RunResult& baseline, const RunResult& current, const CompareRules& rules,
                 size_t index, std::vector<PendingTest>& tests) {
  const CaseResult& b = *out.baseline;
  const CaseResult& c = *out.current;
  const DefinitionDiff diff = DiffDefinitions(b.spec, c.spec);
  CaseContext ctx{out, rules, b.verdict == Verdict::cross_convention && c.verdict == Verdict::cross_convention};
  out.subject = Join(diff.subject);
  if (!diff.convention.empty()) {
    const std::string text = "convention changed: " + Join(diff.convention);
    if (rules.convention_change_is_regression) Report(ctx, text);
    else out.notes.push_back(text);
    return;  // different conventions: their statistics are not comparable
  }
  if (!c.complete) Report(ctx, "current run of this case is incomplete (interrupted)");
  if ((b.verdict == Verdict::unsupported) != (c.verdict == Verdict::unsupported)) {
    if (c.verdict == Verdict::unsupported) Report(ctx, "now unsupported: " + c.reason);
    else out.notes.push_back("now supported");
    return;
  }
  if (c.verdict == Verdict::unsupported) {
    out.samples = "unsupported";
    return;
  }
  // A lost draw (the path's process crashed or hung) is a regression whatever the baseline's verdict but the same.
  const bool lost = c.verdict == Verdict::crashed || c.verdict == Verdict::timeout;
  if ((Passed(b.verdict) && fails_run(c.verdict)) || (lost && b.verdict != c.verdict)) {
    Report(ctx, "verdict " + std::string(to_string(b.verdict)) + " -> " + std::string(to_string(c.verdict)) + ": " + c.reason);
  }
  const bool same = SameSamples(b, baseline.seed, c, current.seed);
  out.samples = same ? (Exhaustive(b) ? "exhaustive" : "same samples") : "different samples";
  if (same) {
    CompareSameSamples(ctx, b, c);
  } else {
    if (rules.resampled_is_regression) Report(ctx, "sample set changed");
    else out.notes.push_back("sample set changed: judged over draws");
    CompareOverDraws(ctx, b, c, index, tests);
  }
  CompareLedger(ctx, b, c, same);
}

void Decide(RunComparison& result, const std::vector<PendingTest>& tests, double level) {
  std::vector<double> p;
  for (const PendingTest& t : tests) p.push_back(t.p);
  const std::vector<bool> reject = HolmReject(p, level);
  result.tests = tests.size();
  for (size_t i = 0; i < tests.size(); ++i) {
    if (!reject[i]) continue;
    ++result.significant;
    CaseComparison& c = result.cases[tests[i].case_index];
    const std::string finding = fmt::format("{} (p = {:.2g})", tests[i].finding, tests[i].p);
    if (tests[i].regression) {
      c.findings.push_back(finding);
      c.regression = true;
    } else {
      c.moved.push_back(finding);
    }
  }
}

}  // namespace

RunComparison Compare(const RunResult& baseline, const RunResult& current, const CompareRules& rules) {
  RunComparison result;
  result.level = rules.level;
  result.missing_is_regression = rules.missing_case_is_regression;
  result.sample_set_changed = SampleSetId(baseline) != SampleSetId(current);
  std::map<std::string, const CaseResult*> current_by_name;
  for (const CaseResult& c : current.cases) current_by_name[c.spec.name] = &c;
  std::map<std::string, bool> in_baseline;
  std::vector<PendingTest> tests;
  for (const CaseResult& b : baseline.cases) {
    in_baseline[b.spec.name] = true;
    CaseComparison cc;
    cc.name = b.spec.name;
    cc.baseline = &b;
    auto it = current_by_name.find(b.spec.name);
    if (it == current_by_name.end()) {
      (rules.missing_case_is_regression ? cc.findings : cc.notes).push_back("case disappeared");
      cc.regression = rules.missing_case_is_regression;
    } else {
      cc.current = it->second;
      CompareCase(cc, baseline, current, rules, result.cases.size(), tests);
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
  Decide(result, tests, rules.level);
  return result;
}

namespace {

std::string SideBySide(const RunComparison& comparison) {
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
  for (const CaseComparison& c : comparison.cases) {
    const std::string status = c.regression ? "REGRESSION" : !c.ledger.empty() ? "LEDGER" : !c.moved.empty() ? "moved" : "ok";
    out += fmt::format("{:<{}}  {}  {}  {}\n", c.name, width, cells(c.baseline), cells(c.current), status);
    for (const std::string& f : c.findings) out += fmt::format("{:<{}}    ! {}\n", "", width, f);
    for (const std::string& f : c.ledger) out += fmt::format("{:<{}}    ! ledger: {}\n", "", width, f);
    for (const std::string& m : c.moved) out += fmt::format("{:<{}}    ~ moved: {}\n", "", width, m);
    for (const std::string& n : c.notes) out += fmt::format("{:<{}}    ~ {}\n", "", width, n);
  }
  return out + "\n";
}

std::string Subject(const CaseComparison& c) { return c.subject.empty() ? "" : " (" + c.subject + ")"; }

// One line per case that changed. Missing cases and ledger entries met on one side's draws only are gathered: one
// line per pattern x fused path, and one per entry.
std::string ChangedLines(const RunComparison& comparison) {
  std::string out;
  std::map<std::string, std::vector<std::string>> missing, fresh, ledger_moved;
  for (const CaseComparison& c : comparison.cases) {
    if (!c.current) {
      missing[CaseGroup(c.baseline->spec)].push_back(c.name);
      continue;
    }
    if (!c.baseline) {
      fresh[CaseGroup(c.current->spec)].push_back(c.name);
      continue;
    }
    if (c.regression) out += c.name + ": REGRESSION" + Subject(c) + ": " + Join(c.findings) + "\n";
    if (!c.ledger.empty()) out += c.name + ": LEDGER: " + Join(c.ledger) + "\n";
    if (!c.moved.empty()) out += c.name + ": moved, not a regression" + Subject(c) + ": " + Join(c.moved) + "\n";
    if (c.samples.empty() && !c.regression && !c.notes.empty()) out += c.name + ": " + Join(c.notes) + "\n";
    for (const std::string& entry : c.ledger_moved) ledger_moved[entry].push_back(c.name);
  }
  const auto gathered = [&](const std::map<std::string, std::vector<std::string>>& by, const std::string& what) {
    for (const auto& [key, names] : by) {
      out += fmt::format("{}: {} case{} {} ({}{})\n", key, names.size(), names.size() == 1 ? "" : "s", what, names.front(),
                         names.size() > 1 ? fmt::format(" and {} more", names.size() - 1) : "");
    }
  };
  gathered(missing, comparison.missing_is_regression ? "missing from CURRENT: REGRESSION" : "missing from CURRENT");
  gathered(fresh, "new (no baseline)");
  gathered(ledger_moved, "whose draws met its conditions on one side only (different samples: moved, not a regression)");
  return out;
}

// The unchanged cases, one line per pattern x fused path.
std::string UnchangedGroups(const RunComparison& comparison) {
  std::map<std::string, std::map<std::string, size_t>> groups;  // group -> samples kind -> count
  for (const CaseComparison& c : comparison.cases) {
    if (c.regression || !c.ledger.empty() || !c.moved.empty() || c.samples.empty()) continue;
    ++groups[CaseGroup(c.current->spec)][c.samples];
  }
  std::string out;
  for (const auto& [group, kinds] : groups) {
    std::string parts;
    size_t n = 0;
    for (const auto& [kind, count] : kinds) {
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", count, kind);
      n += count;
    }
    out += fmt::format("{}: {} unchanged ({})\n", group, n, parts);
  }
  return out;
}

std::string RuleLine(const RunComparison& comparison, const RunResult& baseline, const RunResult& current) {
  size_t same = 0, exhaustive = 0, different = 0;
  for (const CaseComparison& c : comparison.cases) {
    same += c.samples == "same samples";
    exhaustive += c.samples == "exhaustive";
    different += c.samples == "different samples";
  }
  std::string out = fmt::format("baseline seed {} (sample set {}), current seed {} ({}){}\n", baseline.seed,
                                SampleSetId(baseline).substr(0, 12), current.seed, SampleSetId(current).substr(0, 12),
                                current.complete ? "" : ", current INCOMPLETE (interrupted, or a merge of some shards)");
  out += fmt::format("rule: {} cases on the same samples and {} exhaustive sweeps: any change is real (thresholds, and "
                     "every code that errs more than before)\n", same, exhaustive);
  out += fmt::format("rule: {} cases on different samples: exact %, bias and the histogram's bins judged over draws "
                     "(cluster-robust Welch t), max |e| only where the baseline's draws would have shown it; {} tests, "
                     "Holm at family-wise level {}: {} significant\n",
                     different, comparison.tests, comparison.level, comparison.significant);
  return out;
}

std::string ClosingLine(const RunComparison& comparison) {
  size_t regressions = 0, ledger = 0, moved = 0, fresh = 0, missing = 0;
  for (const CaseComparison& c : comparison.cases) {
    regressions += c.regression;
    ledger += !c.ledger.empty();
    moved += !c.regression && c.ledger.empty() && (!c.moved.empty() || !c.ledger_moved.empty());
    fresh += !c.baseline;
    missing += !c.current;
  }
  const size_t compared = comparison.cases.size() - fresh;
  return fmt::format("{} passed, {} failed; {} regression{}, {} ledger change{}, {} moved (not regressions), {} new, "
                     "{} missing ({} cases compared)\n",
                     compared - regressions, regressions, regressions, regressions == 1 ? "" : "s", ledger,
                     ledger == 1 ? "" : "s", moved, fresh, missing, compared);
}

}  // namespace

std::string RenderComparison(const RunComparison& comparison, const RunResult& baseline, const RunResult& current,
                             CompareView view) {
  if (view == CompareView::only_regressions) {
    std::string out;
    for (const CaseComparison& c : comparison.cases) {
      if (c.regression) out += c.name + ": REGRESSION" + Subject(c) + ": " + Join(c.findings) + "\n";
    }
    return out;
  }
  std::string out = view == CompareView::all ? SideBySide(comparison) : "";
  out += ChangedLines(comparison);
  out += UnchangedGroups(comparison);
  out += RuleLine(comparison, baseline, current);
  return out + ClosingLine(comparison);
}

}  // namespace fusediff::reports

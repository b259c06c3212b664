#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "fusediff/model/diagnostics.h"
#include "fusediff/model/mutants.h"
#include "case_groups.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {
std::string RegionNames(RegionSet regions) {
  std::string out;
  for (Region r : kAllRegions) {
    FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
    if (regions & region_bit(r)) out += (out.empty() ? "" : ",") + std::string(to_string(r));
    FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
  }
  return out.empty() ? std::string(to_string(Region::bulk)) : out;
}

// "not failing", or for documented behaviour under --strict "FAILING (--strict)".
std::string_view NotFailing(const RunResult& run, LedgerKind kind) {
  const bool strict = std::any_of(run.cases.begin(), run.cases.end(),
                                  [](const CaseResult& c) { return c.tolerance.documented_behaviour_fails; });
  return kind == LedgerKind::documented_behaviour && strict ? "FAILING (--strict)" : "not failing";
}
}  // namespace

namespace {

bool PlainPass(const CaseResult& c) { return c.verdict == Verdict::pass || c.verdict == Verdict::cross_convention; }

// Today's table: a row per case.
std::string FullTable(const RunResult& run, bool show_timing) {
  size_t name_width = 4;
  for (const CaseResult& c : run.cases) name_width = std::max(name_width, c.spec.name.size());
  std::string out = fmt::format("{:<{}}  {:>9}  {:>8}  {:>9}  {:>5}  {:>5}  {:>4}  {:>7}  {:<12}{}\n", "case", name_width,
                                "samples", "exact %", "bias", "p99", "max", "tol", "known", "verdict",
                                show_timing ? "   time" : "");
  out += std::string(name_width + 81 + (show_timing ? 7 : 0), '-') + "\n";
  for (const CaseResult& c : run.cases) {
    const ErrorStats& s = c.stats.overall;
    const uint64_t known = compared_samples(c) - s.count();  // explained by a ledger entry, either kind
    std::string timing = show_timing ? fmt::format("  {:>5.2f}s", c.seconds) : "";
    if (c.verdict == Verdict::unsupported) {
      out += fmt::format("{:<{}}  {:>9}  {:>8}  {:>9}  {:>5}  {:>5}  {:>4}  {:>7}  {:<12}{}\n", c.spec.name, name_width, "-",
                         "-", "-", "-", "-", "-", "-", "unsupported", timing);
      continue;
    }
    out += fmt::format("{:<{}}  {:>9}  {:>8.3f}  {:>+9.4f}  {:>5}  {:>5}  {:>4}  {:>7}  {:<12}{}\n", c.spec.name, name_width,
                       s.count(), 100.0 * s.exact_fraction(), s.mean(), s.p99(), s.max_abs(), c.tolerance.max_abs_lsb,
                       known > 0 ? std::to_string(known) : std::string("-"),
                       c.verdict == Verdict::cross_convention ? "no verdict" : to_string(c.verdict), timing);
  }
  return out;
}

// The cases that pass plainly (or measure without a verdict), one line per pattern x fused path.
std::string GroupLines(const RunResult& run) {
  struct Group {
    size_t passed = 0, crossed = 0;
    uint64_t samples = 0;
    double exact_lo = 1, exact_hi = 0;
    int64_t max_abs = 0;
  };
  std::map<std::string, Group> groups;
  for (const CaseResult& c : run.cases) {
    if (!PlainPass(c)) continue;
    Group& g = groups[CaseGroup(c.spec)];
    (c.verdict == Verdict::pass ? g.passed : g.crossed) += 1;
    g.samples += c.stats.overall.count();
    g.exact_lo = std::min(g.exact_lo, c.stats.overall.exact_fraction());
    g.exact_hi = std::max(g.exact_hi, c.stats.overall.exact_fraction());
    g.max_abs = std::max(g.max_abs, c.stats.overall.max_abs());
  }
  std::string out;
  for (const auto& [name, g] : groups) {
    out += fmt::format("{}: {} passed{}; {} samples, exact {:.3f}..{:.3f}%, max |e| {}\n", name, g.passed,
                       g.crossed ? fmt::format(", {} cross-convention (no verdict)", g.crossed) : "", g.samples,
                       100 * g.exact_lo, 100 * g.exact_hi, g.max_abs);
  }
  return out;
}

// One line per case that is not a plain pass (a documented behaviour's only with `verbose`: the ledger's lines count
// them); `verbose`: the failing ones with three worst replays each.
std::string CaseLines(const RunResult& run, bool verbose) {
  std::string out;
  for (const CaseResult& c : run.cases) {
    if (PlainPass(c)) continue;
    if (c.verdict == Verdict::unsupported) {
      out += fmt::format("{}: unsupported: {}\n", c.spec.name, c.reason);
    } else if (c.verdict == Verdict::documented_behaviour && !verbose) {
      continue;  // counted per ledger entry (LedgerLines): a CPU without VNNI meets it in most oneDNN cases
    } else if (c.verdict == Verdict::known_defect || c.verdict == Verdict::documented_behaviour) {
      out += fmt::format("{}: {} (not failing)\n", c.spec.name, c.reason);
    } else if (c.verdict == Verdict::fail && !verbose) {
      // One line per failing case: why, and the first replay.
      out += fmt::format("{}: FAIL: {}{}\n", c.spec.name, c.reason,
                         c.worst.empty() ? std::string()
                                         : fmt::format("; e={:+d}: fusediff replay '{}'", c.worst.front().sample.error,
                                                       c.worst.front().replay));
    } else if (c.verdict == Verdict::crashed || c.verdict == Verdict::timeout) {
      // The path's process lost draws: why, and the first lost sample's replay (each kind).
      out += fmt::format("{}: {}: {}\n", c.spec.name, c.verdict == Verdict::crashed ? "CRASHED" : "TIMEOUT", c.reason);
      for (const LostSamples* lost : {&c.crashed, &c.timed_out}) {
        if (lost->samples > 0) out += fmt::format("  fusediff replay '{}'\n", lost->replay);
      }
    } else if (c.verdict == Verdict::nondeterministic && !verbose) {
      // One line: why, and the first differing sample's replay (which shows every repetition).
      out += fmt::format("{}: NONDETERMINISTIC: {}{}\n", c.spec.name, c.reason,
                         c.nondeterministic.empty() ? std::string()
                                                    : fmt::format(": fusediff replay '{}'", c.nondeterministic.front().replay));
    } else if (c.verdict == Verdict::nondeterministic) {
      out += fmt::format("{}: NONDETERMINISTIC: {} ({})\n", c.spec.name, c.reason, c.reference_convention);
      const size_t shown = std::min<size_t>(c.nondeterministic.size(), 3);
      for (size_t i = 0; i < shown; ++i) {
        const WorstCaseReport& w = c.nondeterministic[i];
        std::string outputs;
        for (int32_t y : w.sample.repetitions) outputs.append(outputs.empty() ? "" : ", ").append(std::to_string(y));
        out += fmt::format("  sample {}: y_ref={}, repetitions give {} ({})\n    fusediff replay '{}'\n", w.sample.sample,
                           w.sample.y_ref, outputs, w.sample.implementation, w.replay);
      }
    } else {
      out += fmt::format("{}: FAIL: {} ({})\n", c.spec.name, c.reason, c.reference_convention);
      const size_t shown = std::min<size_t>(c.worst.size(), 3);
      for (size_t i = 0; i < shown; ++i) {
        const WorstCaseReport& w = c.worst[i];
        out += fmt::format("  e={:+d} at sample {} (u={}, y_ref={}, y_fused={}, {})\n    fusediff replay '{}'\n",
                           w.sample.error, w.sample.sample, w.sample.u, w.sample.y_ref, w.sample.y_fused,
                           RegionNames(w.sample.regions), w.replay);
      }
    }
  }
  return out;
}

// A float output's r against its rounding-error bound (model/results.h BoundRatio): one line per such case.
std::string BoundLines(const RunResult& run) {
  std::string out;
  for (const CaseResult& c : run.cases) {
    if (!c.bound_ratio) continue;
    const BoundRatio& b = *c.bound_ratio;
    out += fmt::format("{}: r = |dy| / bound: ", c.spec.name);
    if (b.samples > 0) {
      out += fmt::format("max {:.4g} at sample {} (|dy| {:.3g}, bound {:.3g}), {} of {} samples over 1", b.max_r,
                         b.max_sample, b.max_delta, b.max_bound, b.over, b.samples);
    }
    if (b.unbounded > 0) {
      out += fmt::format("{}{} samples without a bound{}", b.samples > 0 ? "; " : "", b.unbounded,
                         b.unbounded_reason.empty() ? "" : ": " + b.unbounded_reason);
    }
    out += "\n";
  }
  return out;
}

// Samples the library rejected: a line per case with --verbose, else one summary line.
std::string RejectedLines(const RunResult& run, bool verbose) {
  std::string out;
  uint64_t rejected_cases = 0, rejected_samples = 0;
  std::string first_rejected;
  for (const CaseResult& c : run.cases) {
    if (c.unsupported_samples == 0 || c.verdict == Verdict::unsupported) continue;
    ++rejected_cases;
    rejected_samples += c.unsupported_samples;
    if (first_rejected.empty()) first_rejected = c.spec.name + ": " + c.unsupported_sample_reason;
    if (verbose) out += fmt::format("{}: {} samples not compared: {}\n", c.spec.name, c.unsupported_samples, c.unsupported_sample_reason);
  }
  if (!verbose && rejected_cases > 0) {
    out += fmt::format("{} samples in {} cases not compared (the library rejected their draws; --verbose lists each), "
                       "e.g. {}\n", rejected_samples, rejected_cases, first_rejected);
  }
  return out;
}

// The ledger's entries: per entry its explained samples over all cases, or that it no longer reproduces; the first
// replay with `replays`, every case's tally and three worst replays with `verbose`.
std::string LedgerLines(const RunResult& run, bool replays, bool verbose) {
  struct EntryTotals {
    LedgerKind kind = LedgerKind::known_defect;
    uint64_t cases = 0, draws = 0, samples = 0, explained = 0, predicted = 0, withheld = 0;
    int64_t max_abs = 0;
    std::string first_replay;
  };
  std::string out;
  std::map<std::string, EntryTotals> entries;
  for (const CaseResult& c : run.cases) {
    for (const KnownDefectTally& t : c.known_defects) {
      EntryTotals& e = entries[t.id];
      e.kind = t.kind;
      ++e.cases;
      e.draws += t.draws;
      e.samples += t.samples;
      e.explained += t.stats.overall.count();
      e.predicted += t.predicted_samples;
      e.withheld += t.withheld_samples;
      e.max_abs = std::max(e.max_abs, t.stats.overall.max_abs());
      if (e.first_replay.empty() && !t.worst.empty()) e.first_replay = t.worst.front().replay;
      if (!verbose) continue;
      if (t.withheld_samples > 0) {
        out += fmt::format("{}: {} {}: {} samples in {} draws not executed (the library crashes on them)\n", c.spec.name,
                           describe(t.kind), t.id, t.withheld_samples, t.draws);
      }
      if (t.withheld_samples == t.samples) continue;
      out += fmt::format("{}: {} {}: {} of {} samples explained ({} predicted) in {} draws, max |e| {}\n", c.spec.name,
                         describe(t.kind), t.id, t.stats.overall.count(), t.samples, t.predicted_samples, t.draws,
                         t.stats.overall.max_abs());
      for (size_t i = 0; i < std::min<size_t>(t.worst.size(), 3); ++i) {
        const WorstCaseReport& w = t.worst[i];
        out += fmt::format("  e={:+d} at sample {} (y_ref={}, y_fused={})\n    fusediff replay '{}'\n", w.sample.error,
                           w.sample.sample, w.sample.y_ref, w.sample.y_fused, w.replay);
      }
    }
  }
  for (const auto& [id, e] : entries) {
    if (e.withheld > 0) {
      out += fmt::format("{} {}: {} samples in {} cases not executed (the library crashes on their draws), {}; {} draws "
                         "met its conditions\n", describe(e.kind), id, e.withheld, e.cases, NotFailing(run, e.kind), e.draws);
    } else if (e.explained > 0) {
      out += fmt::format("{} {}: {} samples in {} cases (max |e| {}), {}; {} draws met its conditions{}\n", describe(e.kind),
                         id, e.explained, e.cases, e.max_abs, NotFailing(run, e.kind), e.draws,
                         replays && !e.first_replay.empty() ? "; first: fusediff replay '" + e.first_replay + "'" : "");
    } else if (e.predicted > 0) {
      out += fmt::format("{} {}: NO LONGER REPRODUCES: {} draws ({} samples, {} where its model differs from the "
                         "reference) in {} cases met its conditions and none shows it: update the ledger\n",
                         describe(e.kind), id, e.draws, e.samples, e.predicted, e.cases);
    }
  }
  return out;
}

// Per name its statistics over the same-convention library cases: every row with `all`, else one line for the rows
// that are exact and one per row that is not.
std::string AttributionTable(const std::map<std::string, ErrorStats>& rows, const std::string& title, bool all) {
  if (rows.empty()) return "";
  const auto line = [](const ErrorStats& st) {
    return fmt::format("{:>9}  {:>8.3f}  {:>5}", st.count(), 100.0 * st.exact_fraction(), st.max_abs());
  };
  std::string out = all ? fmt::format("{:>9}  {:>8}  {:>5}  {} (same-convention library cases)\n", "samples", "exact %", "max", title) : "";
  size_t exact = 0;
  for (const auto& [name, st] : rows) {
    const bool plain = st.max_abs() == 0;
    exact += plain;
    if (all || !plain) out += line(st) + "  " + name + (all ? "\n" : fmt::format(" ({})\n", title));
  }
  if (!all) out += fmt::format("{}: {} of {} exact on every same-convention library sample (--all lists each)\n", title, exact, rows.size());
  return out;
}

// A library path's attribution: over the same-convention cases (the judged ones; a cross-convention case's
// error is fusion's own), per implementation and per formulation choice, and the paired output padding.
std::string AttributionLines(const RunResult& run, bool all, bool verbose) {
  std::map<std::string, ErrorStats> by_implementation, by_formulation;
  PairedFormulations paired;
  uint64_t nondeterministic = 0;
  std::string out;
  for (const CaseResult& c : run.cases) {
    nondeterministic += c.stats.nondeterministic;
    if (c.spec.comparison != Comparison::same_convention) continue;
    // By the producer's primitive (the string up to its first ';'); --verbose and the JSON keep the whole strings.
    for (const auto& [name, stats] : c.stats.by_implementation) by_implementation[name.substr(0, name.find(';'))].merge(stats);
    for (const auto& [name, stats] : c.stats.by_formulation) by_formulation[name].merge(stats);
    if (!c.stats.paired.dimension.empty() && (paired.dimension.empty() || paired.dimension == c.stats.paired.dimension)) {
      paired.merge(c.stats.paired);
    }
    if (!verbose) continue;
    for (const auto& [name, st] : c.stats.by_implementation) {
      out += fmt::format("{}: implementation {}: {} samples, {:.3f}% exact, max |e| {}\n", c.spec.name, name, st.count(),
                         100.0 * st.exact_fraction(), st.max_abs());
    }
    for (const auto& [name, st] : c.stats.by_formulation) {
      out += fmt::format("{}: formulation {}: {} samples, {:.3f}% exact, max |e| {}\n", c.spec.name, name, st.count(),
                         100.0 * st.exact_fraction(), st.max_abs());
    }
  }
  out += AttributionTable(by_implementation, "producer implementation", all);
  out += AttributionTable(by_formulation, "formulation choice", all);
  if (!paired.dimension.empty()) {
    out += fmt::format("{} on the same {} draws:", paired.dimension, paired.draws);
    for (size_t i = 0; i < paired.values.size(); ++i) {
      out += fmt::format(" {} {:.3f}% exact (max |e| {}, {} samples rejected);", paired.values[i],
                         100.0 * paired.errors[i].exact_fraction(), paired.errors[i].max_abs(), paired.rejected[i]);
    }
    out += fmt::format(" outputs differ on {} of {} samples where both ran (max |difference| {})\n",
                       paired.differing_samples, paired.both_samples, paired.max_abs_difference);
  }
  if (nondeterministic > 0) out += fmt::format("{} samples differ between repetitions (--repeat)\n", nondeterministic);
  return out;
}

// Which kernels a library case ran depends on the CPU: say which ISA each backend with a dispatch dispatched to.
std::string DispatchLine(const RunResult& run) {
  const bool library_cases = std::any_of(run.cases.begin(), run.cases.end(),
                                         [](const CaseResult& c) { return !c.implementation.empty(); });
  if (!library_cases) return "";
  std::string out;
  for (const BackendProvenance& b : run.provenance.backends) {
    const std::string isa = provenance_value(run.provenance, b.backend, "isa");
    if (isa.empty()) continue;
    const std::string library = provenance_value(run.provenance, b.backend, "library");
    out += fmt::format("{} {} dispatched to {} (backend {}; its dispatch cap decides)\n", library.empty() ? b.backend : library,
                       provenance_value(run.provenance, b.backend, "version"), isa, b.backend);
  }
  return out;
}

// A backend that declares its arithmetic (a plugin): the declaration beside the verdicts, because it is a claim.
std::string DeclarationLine(const RunResult& run) {
  std::string out;
  for (const BackendProvenance& b : run.provenance.backends) {
    const std::string declaration = provenance_value(run.provenance, b.backend, "declaration");
    if (declaration.empty()) continue;
    const std::string library = provenance_value(run.provenance, b.backend, "library");
    out += fmt::format("{} {} declares {} (the verdicts judge that claim; another convention is a cross-convention "
                       "measurement)\n", library.empty() ? b.backend : library,
                       provenance_value(run.provenance, b.backend, "version"), declaration);
  }
  return out;
}

}  // namespace

std::string ClosingLine(const RunResult& run) {
  size_t passed = 0, failed = 0, unsupported = 0, crossed = 0, known_cases = 0, documented_cases = 0;
  for (const CaseResult& c : run.cases) {
    passed += c.verdict == Verdict::pass;
    failed += fails_run(c.verdict);
    unsupported += c.verdict == Verdict::unsupported;
    crossed += c.verdict == Verdict::cross_convention;
    known_cases += c.verdict == Verdict::known_defect;
    documented_cases += c.verdict == Verdict::documented_behaviour;
  }
  std::string out = fmt::format("{} passed, {} failed", passed, failed);
  if (known_cases > 0) out += fmt::format(", {} known defect (not failing)", known_cases);
  if (documented_cases > 0) out += fmt::format(", {} documented behaviour (not failing)", documented_cases);
  out += fmt::format(", {} unsupported", unsupported);
  if (crossed > 0) out += fmt::format(", {} cross-convention measurements (no verdict)", crossed);
  return out + fmt::format("; {} cases, seed {}\n", run.cases.size(), run.seed);
}

std::string RenderTable(const RunResult& run, const TableOptions& options) {
  std::string out = options.all ? FullTable(run, options.timing) : "";
  out += CaseLines(run, options.verbose);
  out += BoundLines(run);
  if (!options.all) out += GroupLines(run);
  out += RejectedLines(run, options.verbose);
  out += LedgerLines(run, options.all || options.verbose, options.verbose);
  out += AttributionLines(run, options.all, options.verbose);
  out += DispatchLine(run);
  out += DeclarationLine(run);
  return out + options.before_closing + ClosingLine(run);
}

std::string RenderReplay(const ReplayTrace& t) {
  std::string out;
  out += fmt::format("case        {} ({}, {}, mutant {})\n", t.key.spec.name, to_string(t.key.spec.source),
                     fused_path_name(t.key.spec), to_string(t.key.spec.mutant));
  out += fmt::format("convention  {}{}\n", t.convention, t.fused_convention.empty() ? "" : "  (reference)");
  if (!t.fused_convention.empty()) out += fmt::format("            {}  (declared by the fused path)\n", t.fused_convention);
  if (!t.key.spec.table_file.empty()) {
    out += fmt::format("table       {} (sha256 {}, fingerprint {})\n", t.key.spec.table_file, t.key.spec.table_sha256,
                       t.key.spec.table_fingerprint);
  }
  if (!t.implementation.empty()) out += fmt::format("library     {}\n", t.implementation);
  if (!t.implementation_of_draw.empty()) out += fmt::format("ran         {}\n", t.implementation_of_draw);
  if (!t.formulation.empty()) out += fmt::format("formulation {}\n", t.formulation);
  out += fmt::format("seed        {}  sample {}\n", t.key.seed, t.key.sample);
  if (t.key.spec.source == SampleSource::conv) {
    out += fmt::format("conv        draw {}: {}\n", t.draw, t.conv_shape);
    out += fmt::format("            input {}  sw[k]={}  bias[k]={}\n", t.input_quant, format_float32(t.weight_scale), t.bias);
    out += fmt::format("coordinates n={} oy={} ox={} k={}\n", t.n, t.oy, t.ox, t.k);
    if (t.black_box) {
      out += fmt::format("acc         reference {}  ({})\n", t.acc_reference,
                         t.implementation.empty() ? "the fused path's is not traced" : "the library's is internal");
    } else {
      out += fmt::format("acc         reference {}  fused {}{}\n", t.acc_reference, t.acc_fused,
                         t.acc_reference == t.acc_fused ? "" : "  (DIFFERENT)");
    }
    if (t.f32_intermediate) {
      out += fmt::format("v (f32)     {} = {}\n",
                         t.key.spec.convention.float_conv.enabled ? "fl32(fl32(sum of x*w, exact) + b)" : "fl32(fl32(acc) * fl32(sx*sw[k]))",
                         t.requant_exact);
    } else {
      out += fmt::format("requant     value rounded last = {}\n", t.requant_exact);
      if (t.black_box) out += fmt::format("u           reference {}\n", t.u);
      else out += fmt::format("u           reference {}  fused {}{}\n", t.u, t.u_fused, t.u == t.u_fused ? "" : "  (DIFFERENT)");
    }
  } else {
    out += fmt::format("u           {} (sweep)\n", t.u);
  }
  for (const std::string& line : t.pattern_stages) out += fmt::format("stage       {}\n", line);
  if (!t.f_exact.empty()) {  // an activation whose input the element is (not behind a pool or a layer)
    out += fmt::format("v           {:.17g}\n", t.v);
    out += fmt::format("f(v)        {}\n", t.f_exact);
    out += fmt::format("t           {:.17g}  (value the output rounding rounds)\n", t.t);
  }
  out += fmt::format("y           reference {}  fused {}  error {:+d} LSB  [{}]\n", t.y_reference, t.y_fused, t.error,
                     RegionNames(t.regions));
  if (t.repeat > 1) {
    if (t.y_repetitions.empty()) {
      out += fmt::format("repetitions {} runs over different poison, all {}\n", t.repeat, t.y_fused);
    } else {
      out += fmt::format("repetitions {} runs over different poison DIFFER:", t.repeat);
      for (size_t r = 0; r < t.y_repetitions.size(); ++r) out += fmt::format(" run {}: {}", r, t.y_repetitions[r]);
      out += "  (NONDETERMINISTIC)\n";
    }
  }
  return out;
}

}  // namespace fusediff::reports

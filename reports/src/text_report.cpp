#include <fmt/format.h>

#include <string>

#include "fusediff/model/diagnostics.h"
#include "fusediff/model/mutants.h"
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
}  // namespace

std::string RenderTable(const RunResult& run, bool show_timing) {
  size_t name_width = 4;
  for (const CaseResult& c : run.cases) name_width = std::max(name_width, c.spec.name.size());
  std::string out = fmt::format("{:<{}}  {:>9}  {:>8}  {:>9}  {:>5}  {:>5}  {:>4}  {:<11}{}\n", "case", name_width,
                                "samples", "exact %", "bias", "p99", "max", "tol", "verdict", show_timing ? "   time" : "");
  out += std::string(name_width + 71 + (show_timing ? 7 : 0), '-') + "\n";
  size_t passed = 0, failed = 0, unsupported = 0, crossed = 0;
  for (const CaseResult& c : run.cases) {
    const ErrorStats& s = c.stats.overall;
    passed += c.verdict == Verdict::pass;
    failed += c.verdict == Verdict::fail;
    unsupported += c.verdict == Verdict::unsupported;
    crossed += c.verdict == Verdict::cross_convention;
    std::string timing = show_timing ? fmt::format("  {:>5.2f}s", c.seconds) : "";
    if (c.verdict == Verdict::unsupported) {
      out += fmt::format("{:<{}}  {:>9}  {:>8}  {:>9}  {:>5}  {:>5}  {:>4}  {:<11}{}\n", c.spec.name, name_width, "-", "-",
                         "-", "-", "-", "-", "unsupported", timing);
      continue;
    }
    out += fmt::format("{:<{}}  {:>9}  {:>8.3f}  {:>+9.4f}  {:>5}  {:>5}  {:>4}  {:<11}{}\n", c.spec.name, name_width,
                       s.count(), 100.0 * s.exact_fraction(), s.mean(), s.p99(), s.max_abs(), c.tolerance.max_abs_lsb,
                       c.verdict == Verdict::cross_convention ? "no verdict" : to_string(c.verdict), timing);
  }
  for (const CaseResult& c : run.cases) {
    if (c.unsupported_samples > 0 && c.verdict != Verdict::unsupported) {
      out += fmt::format("\n{}: {} samples not compared: {}\n", c.spec.name, c.unsupported_samples,
                         c.unsupported_sample_reason);
    }
    if (c.verdict == Verdict::unsupported) {
      out += fmt::format("\n{}: unsupported: {}\n", c.spec.name, c.reason);
    } else if (c.verdict == Verdict::fail) {
      out += fmt::format("\n{}: FAIL: {} ({})\n", c.spec.name, c.reason, c.reference_convention);
      const size_t shown = std::min<size_t>(c.worst.size(), 3);
      for (size_t i = 0; i < shown; ++i) {
        const WorstCaseReport& w = c.worst[i];
        out += fmt::format("  e={:+d} at sample {} (u={}, y_ref={}, y_fused={}, {})\n    fusediff replay '{}'\n",
                           w.sample.error, w.sample.sample, w.sample.u, w.sample.y_ref, w.sample.y_fused,
                           RegionNames(w.sample.regions), w.replay);
      }
    }
  }
  out += fmt::format("\n{} cases: {} passed, {} failed, {} unsupported", run.cases.size(), passed, failed, unsupported);
  if (crossed > 0) out += fmt::format(", {} cross-convention measurements (no verdict)", crossed);
  out += fmt::format(" (seed {})\n", run.seed);
  return out;
}

std::string RenderReplay(const ReplayTrace& t) {
  std::string out;
  out += fmt::format("case        {} ({}, {}, mutant {})\n", t.key.spec.name, to_string(t.key.spec.source),
                     fused_path_name(t.key.spec), to_string(t.key.spec.mutant));
  out += fmt::format("convention  {}{}\n", t.convention, t.fused_convention.empty() ? "" : "  (reference)");
  if (!t.fused_convention.empty()) out += fmt::format("            {}  (declared by the fused path)\n", t.fused_convention);
  if (!t.implementation.empty()) out += fmt::format("library     {}\n", t.implementation);
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
      out += fmt::format("v (f32)     fl32(fl32(acc) * fl32(sx*sw[k])) = {}\n", t.requant_exact);
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
  return out;
}

}  // namespace fusediff::reports

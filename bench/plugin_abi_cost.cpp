// The plugin ABI's cost (docs/plugins.md, "Cost"): end-to-end samples/s of `run` over the default suite's int8
// conv2d+act cases, the built-in LUT kernel called directly (--fused lut) against the same kernel wrapped as a plugin
// (bench/builtin_lut_plugin.cpp, --fused plugin:...), interleaved, one thread, the best of several rounds each. Both
// sides compare the same number of samples against the same reference; only the path differs. A measurement, not a
// benchmark; the target is an overhead <= 5 %. Run: build/bench/plugin_abi_cost [samples per case] [rounds].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/fused/plugin_backend.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/suite_options.h"

namespace {
using namespace fusediff;
using Clock = std::chrono::steady_clock;

// One pass over the cases: samples compared per second.
double SamplesPerSecond(const std::vector<CaseSpec>& cases, driver::ReferenceCache& cache) {
  driver::RunOptions options;
  options.threads = 1;
  uint64_t samples = 0;
  const Clock::time_point start = Clock::now();
  for (const CaseSpec& spec : cases) {
    const CaseResult r = driver::RunCase(spec, options, cache);
    if (r.verdict != Verdict::pass) {
      std::fprintf(stderr, "plugin_abi_cost: case %s did not pass (%s)\n", spec.name.c_str(), r.reason.c_str());
      std::exit(1);
    }
    samples += compared_samples(r);
  }
  return double(samples) / std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
  RegisterBackend(fused::BuiltInBackend());
  RegisterBackend(fused::plugin::PluginBackend());
  const uint64_t samples = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  SuiteOptions options;
  options.samples = samples;
  options.table_kind = TableKind::lut;
  std::vector<CaseSpec> direct;
  for (CaseSpec& spec : driver::BuildSuite(options)) {
    if (spec.source == SampleSource::conv && is_conv_act(spec.pattern) && spec.fusion == Fusion::keep_all &&
        spec.comparison == Comparison::same_convention && spec.convention.intermediate.q.type.bits() == 8) {
      direct.push_back(std::move(spec));
    }
  }
  std::vector<CaseSpec> wrapped;
  CaseSpec path;
  parse_fused_path(std::string("plugin:") + FUSEDIFF_BUILTIN_LUT_PLUGIN, "plugin", path);
  for (const CaseSpec& spec : direct) {
    for (CaseSpec& c : BackendOf(path).SuiteCases(spec, path)) wrapped.push_back(std::move(c));
  }
  driver::ReferenceCache cache;
  (void)SamplesPerSecond(direct, cache);  // the reference tables built once, outside the timings
  (void)SamplesPerSecond(wrapped, cache);
  double best_direct = 0, best_wrapped = 0;
  for (int r = 0; r < rounds; ++r) {
    best_direct = std::max(best_direct, SamplesPerSecond(direct, cache));
    best_wrapped = std::max(best_wrapped, SamplesPerSecond(wrapped, cache));
  }
  const double overhead = best_direct / best_wrapped - 1;
  std::printf("cases: %zu int8 conv2d+act, %llu samples each, best of %d rounds, 1 thread\n", direct.size(),
              static_cast<unsigned long long>(samples), rounds);
  std::printf("direct  (--fused lut):            %.0f samples/s\n", best_direct);
  std::printf("plugin  (builtin_lut through ABI): %.0f samples/s\n", best_wrapped);
  std::printf("ABI overhead: %+.2f %% (target <= 5 %%): %s\n", 100 * overhead, overhead <= 0.05 ? "PASS" : "FAIL");
  return overhead <= 0.05 ? 0 : 1;
}

// The plugin ABI's cost (docs/plugins.md, "Cost"): end-to-end samples/s of `run` over the default suite's int8
// conv2d+act cases, the built-in LUT kernel called directly (--fused lut) against the same kernel wrapped as a plugin
// (bench/builtin_lut_plugin.cpp, --fused plugin:...), interleaved, one thread, the best of several rounds each. Both
// sides compare the same draws (the plugin cases' stream) against the same reference; only the path differs. A measurement, not a
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

// One case's run: seconds, and the samples it compared. `direct`: the built-in kernel called directly, on the very
// draws the plugin case gets (its spec and sample stream; only the path differs).
std::pair<double, uint64_t> TimeCase(const CaseSpec& spec, driver::ReferenceCache& cache, bool direct) {
  driver::RunOptions options;
  options.threads = 1;
  if (direct) {
    options.fused_path = [](const CaseSpec& s, std::string* why) {
      CaseSpec builtin = s;
      builtin.backend = std::string(kBuiltInPath);
      builtin.backend_arg.clear();
      builtin.table_kind = TableKind::lut;
      return fused::CreateBuiltInPath(builtin, why);
    };
  }
  const Clock::time_point start = Clock::now();
  const CaseResult r = driver::RunCase(spec, options, cache);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (r.verdict != Verdict::pass) {
    std::fprintf(stderr, "plugin_abi_cost: case %s did not pass (%s)\n", spec.name.c_str(), r.reason.c_str());
    std::exit(1);
  }
  return {seconds, compared_samples(r)};
}
}  // namespace

int main(int argc, char** argv) {  // [samples per case = 200000] [rounds = 5]
  RegisterBackend(fused::BuiltInBackend());
  RegisterBackend(fused::plugin::PluginBackend());
  const uint64_t samples = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
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
  // Per case the best time of each side over the rounds, the two sides alternating case by case (and which goes
  // first, round by round), so that a change in the machine's load between rounds touches both alike.
  driver::ReferenceCache cache;
  for (const CaseSpec& spec : wrapped) (void)TimeCase(spec, cache, true);  // reference tables built outside the timings
  std::vector<double> best_direct_s(wrapped.size(), 1e300), best_wrapped_s(wrapped.size(), 1e300);
  uint64_t samples_total = 0;
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < wrapped.size(); ++i) {
      for (int side = 0; side < 2; ++side) {
        const bool direct_side = (side + r) % 2 == 0;
        const auto [seconds, compared] = TimeCase(wrapped[i], cache, direct_side);
        double& best = direct_side ? best_direct_s[i] : best_wrapped_s[i];
        best = std::min(best, seconds);
        if (r == 0 && direct_side) samples_total += compared;
      }
    }
  }
  double direct_seconds = 0, wrapped_seconds = 0;
  for (size_t i = 0; i < wrapped.size(); ++i) {
    direct_seconds += best_direct_s[i];
    wrapped_seconds += best_wrapped_s[i];
  }
  const double best_direct = double(samples_total) / direct_seconds;
  const double best_wrapped = double(samples_total) / wrapped_seconds;
  const double overhead = best_direct / best_wrapped - 1;
  std::printf("cases: %zu int8 conv2d+act, %llu samples each, best of %d rounds per case, 1 thread\n", direct.size(),
              static_cast<unsigned long long>(samples), rounds);
  std::printf("direct  (--fused lut):            %.0f samples/s\n", best_direct);
  std::printf("plugin  (builtin_lut through ABI): %.0f samples/s\n", best_wrapped);
  std::printf("ABI overhead: %+.2f %% (target <= 5 %%): %s\n", 100 * overhead, overhead <= 0.05 ? "PASS" : "FAIL");
  return overhead <= 0.05 ? 0 : 1;
}

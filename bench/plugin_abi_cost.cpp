// The plugin ABI's cost (docs/plugins.md, "Cost"): end-to-end samples/s of `run` over the default suite's int8
// conv2d+act cases, the built-in LUT kernel called directly (--fused lut) against the same kernel wrapped as a plugin
// (bench/builtin_lut_plugin.cpp, --fused plugin:...), interleaved, one thread, the best of several rounds each. Both
// sides compare the same draws (the plugin cases' stream) against the same reference; only the path differs. A measurement, not a
// benchmark; the target is an overhead <= 5 %. Run: build/bench/plugin_abi_cost [samples per case] [rounds].
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
#include "paired_timing.h"

namespace {
using namespace fusediff;

// The built-in kernel called directly, on the very draws the plugin case gets (its spec and sample stream; only the
// path differs).
driver::RunOptions Direct() {
  driver::RunOptions options;
  options.threads = 1;
  options.fused_path = [](const CaseSpec& s, std::string* why) {
    CaseSpec builtin = s;
    builtin.backend = std::string(kBuiltInPath);
    builtin.backend_arg.clear();
    builtin.table_kind = TableKind::lut;
    return fused::CreateBuiltInPath(builtin, why);
  };
  return options;
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
  driver::RunOptions one_thread;
  one_thread.threads = 1;
  const bench::PairedRate rate = bench::TimePaired(
      wrapped.size(), rounds,
      [&](size_t i, bool direct_side) { return std::pair{wrapped[i], direct_side ? Direct() : one_thread}; },
      "plugin_abi_cost");
  const double best_direct = rate.a, best_wrapped = rate.b, overhead = rate.overhead();
  std::printf("cases: %zu int8 conv2d+act, %llu samples each, best of %d rounds per case, 1 thread\n", direct.size(),
              static_cast<unsigned long long>(samples), rounds);
  std::printf("direct  (--fused lut):            %.0f samples/s\n", best_direct);
  std::printf("plugin  (builtin_lut through ABI): %.0f samples/s\n", best_wrapped);
  std::printf("ABI overhead: %+.2f %% (target <= 5 %%): %s\n", 100 * overhead, overhead <= 0.05 ? "PASS" : "FAIL");
  return overhead <= 0.05 ? 0 : 1;
}

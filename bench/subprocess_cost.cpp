// The subprocess protocol's cost (docs/plugins.md, "Subprocess protocol"): end-to-end samples/s of `run` over the
// default suite's int8 conv2d+act cases, examples/plugins/conv_lut_plugin.c in process (--fused plugin:...) against
// the same library answering the same batches from a child (--fused exec:'fusediff plugin-host ...': every batch
// framed, sent over the socket, answered and read back), the two sides alternating case by case, one thread, each
// case's best of several rounds (paired_timing.h). Both sides compare the same samples against the same reference;
// only the transport differs. A measurement, not a benchmark; the target is an overhead <= 25 %. Run: build/bench/subprocess_cost [samples per case] [rounds].
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/fused/plugin_backend.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/suite_options.h"
#include "paired_timing.h"

namespace {
using namespace fusediff;

std::vector<CaseSpec> OnPath(const std::vector<CaseSpec>& suite, const std::string& word) {
  CaseSpec path;
  parse_fused_path(word, "fused", path);
  std::vector<CaseSpec> out;
  for (const CaseSpec& spec : suite) {
    for (CaseSpec& c : BackendOf(path).SuiteCases(spec, path)) out.push_back(std::move(c));
  }
  return out;
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
  std::vector<CaseSpec> suite;
  for (CaseSpec& spec : driver::BuildSuite(options)) {
    if (spec.source == SampleSource::conv && is_conv_act(spec.pattern) && spec.fusion == Fusion::keep_all &&
        spec.comparison == Comparison::same_convention && spec.convention.intermediate.q.type.bits() == 8 &&
        spec.convention.requant == RequantVariant::double_rounding) {
      suite.push_back(std::move(spec));
    }
  }
  const std::vector<CaseSpec> in_process = OnPath(suite, std::string("plugin:") + FUSEDIFF_CONV_LUT_PLUGIN);
  const std::vector<CaseSpec> child =
      OnPath(suite, std::string("exec:") + FUSEDIFF_FULL + " plugin-host " + FUSEDIFF_CONV_LUT_PLUGIN);
  driver::RunOptions one_thread;
  one_thread.threads = 1;
  const bench::PairedRate rate = bench::TimePaired(
      in_process.size(), rounds,
      [&](size_t i, bool in_process_side) { return std::pair{in_process_side ? in_process[i] : child[i], one_thread}; },
      "subprocess_cost");
  const double best_in = rate.a, best_child = rate.b, overhead = rate.overhead();
  std::printf("cases: %zu int8 conv2d+act (double rounding), %llu samples each, best of %d rounds per case, 1 thread\n",
              in_process.size(), static_cast<unsigned long long>(samples), rounds);
  std::printf("in process (plugin:conv_lut_plugin.so):          %.0f samples/s\n", best_in);
  std::printf("C child    (exec:fusediff plugin-host ...so):    %.0f samples/s\n", best_child);
  std::printf("subprocess overhead: %+.2f %% (target <= 25 %%): %s\n", 100 * overhead,
              overhead <= 0.25 ? "PASS" : "FAIL");
  return overhead <= 0.25 ? 0 : 1;
}

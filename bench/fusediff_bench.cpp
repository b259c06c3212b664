// fusediff's cost against the cost of the fused kernel alone, and the exact reference cache against plain
// double. Every benchmark reports `samples_per_second` (items processed per wall second); scripts/bench.sh
// turns them into the ratios of issue 7. Wall time (UseRealTime) throughout, so that thread counts compare.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/pattern.h"
#include "fusediff/reference/reference.h"

namespace fusediff {
namespace {

// The representative conventions: the default suite's quantization for each activation, int8 intermediate with
// a 256-entry lut, int16 intermediate with TFLite's interpolated lut_interp.
struct Variant {
  const char* name;
  ActivationKind activation;
  bool int16;
};
constexpr Variant kVariants[] = {
    {"gelu_erf/int8", ActivationKind::gelu_erf, false},  {"gelu_erf/int16", ActivationKind::gelu_erf, true},
    {"sigmoid/int8", ActivationKind::sigmoid, false},    {"sigmoid/int16", ActivationKind::sigmoid, true},
    {"hard_swish/int8", ActivationKind::hard_swish, false}, {"hard_swish/int16", ActivationKind::hard_swish, true},
};

CaseSpec FindCase(const Variant& v, SampleSource source, uint64_t samples) {
  driver::SuiteOptions options;
  options.activation = v.activation;
  options.intermediate = v.int16 ? "int16" : "int8";
  options.output = v.int16 ? "int16" : "int8";
  options.table_kind = v.int16 ? TableKind::lut_interp : TableKind::lut;
  options.samples = samples;
  for (const CaseSpec& spec : driver::BuildSuite(options)) {
    if (spec.source == source) return spec;
  }
  throw std::runtime_error(std::string("no case for ") + v.name);
}

unsigned AllThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

constexpr uint64_t kConvSamples = 1000000;  // per case: per-case fixed costs stay small, as in real runs

// End to end: generate + reference conv + fused op + exact requantization + cached y_ref + statistics, as
// `fusediff run` does per conv case. The reference cache is built before timing (once per convention per run).
void BM_EndToEnd(benchmark::State& state, Variant v, unsigned threads) {
  const CaseSpec spec = FindCase(v, SampleSource::conv, kConvSamples);
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.threads = threads == 0 ? AllThreads() : threads;
  (void)driver::RunCase(FindCase(v, SampleSource::sweep, 1), options, cache);
  uint64_t samples = 0;
  for (auto _ : state) {
    const CaseResult result = driver::RunCase(spec, options, cache);
    samples += result.stats.overall.count();
    benchmark::DoNotOptimize(result.stats.overall.max_abs());
  }
  state.counters["threads"] = options.threads;
  state.counters["samples_per_second"] = benchmark::Counter(double(samples), benchmark::Counter::kIsRate);
}

// The fused-only loop: draws 0, 1, ... of the case until kConvSamples outputs per iteration, as RunCase consumes
// them. `run(draw, y)` generates draw `draw` and writes the path's outputs to y (resized to the draw's).
template <typename RunDraw>
void FusedDraws(benchmark::State& state, RunDraw run) {
  std::vector<int32_t> y;
  uint64_t samples = 0;
  for (auto _ : state) {
    int64_t checksum = 0;
    uint64_t produced = 0;
    for (uint32_t draw = 0; produced < kConvSamples; ++draw) {
      run(draw, y);
      const uint64_t take = std::min<uint64_t>(y.size(), kConvSamples - produced);
      for (uint64_t j = 0; j < take; ++j) checksum += y[j];
      produced += take;
    }
    samples += produced;
    benchmark::DoNotOptimize(checksum);
  }
  state.counters["samples_per_second"] = benchmark::Counter(double(samples), benchmark::Counter::kIsRate);
}

// The floor: the same draws generated the same way, then the built-in fused op alone (its int32 conv, Q31
// requantization and table). One thread.
void BM_FusedOnly(benchmark::State& state, Variant v) {
  const CaseSpec spec = FindCase(v, SampleSource::conv, kConvSamples);
  std::string unsupported;
  const auto kernel = fused::FusedKernel::Create(spec.convention, spec.table_kind, Mutant::none, &unsupported);
  if (!kernel) throw std::runtime_error(unsupported);
  const uint64_t stream = case_stream_id(spec);
  FusedDraws(state, [&](uint32_t draw, std::vector<int32_t>& y) {
    const generators::TargetedDraw targeted =
        generators::GenerateTargetedDraw(1, stream, draw, spec.convention, spec.mix);
    y.assign(targeted.conv.output_elements(), 0);
    kernel->Run(targeted.conv, targeted.input, y);
  });
}

// Issue 11's patterns beyond conv2d+act: the default suite's first case of the pattern that keeps every boundary
// (TFLite's add and average-pool rules, the double-product multiplier), for one representative activation.
struct PatternVariant {
  const char* pattern;
  ActivationKind activation;
};
constexpr PatternVariant kPatternVariants[] = {
    {"conv2d+add+act", ActivationKind::gelu_erf}, {"conv2d+act+maxpool", ActivationKind::gelu_erf},
    {"conv2d+act+avgpool", ActivationKind::gelu_erf}, {"fc+act", ActivationKind::gelu_erf},
    {"fc+fc", ActivationKind::relu},  // no activation between: the suite names it "linear", its case list is relu's
    {"fc+act+fc", ActivationKind::relu},
};

CaseSpec FindPatternCase(const PatternVariant& v, uint64_t samples) {
  driver::SuiteOptions options;
  options.activation = v.activation;
  options.samples = samples;
  for (const CaseSpec& spec : driver::PatternCases(options, std::string(v.pattern))) {
    if (spec.fusion == Fusion::keep_all) return spec;
  }
  throw std::runtime_error(std::string("no keep_all case for ") + v.pattern);
}

// End to end on a pattern case, one thread: generate the pattern draw, the unfused-graph reference
// (reference::GraphReference), the built-in fused path, the comparison and statistics, as `fusediff run` does.
// The activation table is built before timing.
void BM_PatternEndToEnd(benchmark::State& state, PatternVariant v) {
  const CaseSpec spec = FindPatternCase(v, kConvSamples);
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.threads = 1;
  (void)driver::RunCase(FindPatternCase(v, 1), options, cache);
  uint64_t samples = 0;
  for (auto _ : state) {
    const CaseResult result = driver::RunCase(spec, options, cache);
    if (result.verdict == Verdict::unsupported) {
      state.SkipWithError(result.reason.c_str());
      break;
    }
    samples += result.stats.overall.count();
    benchmark::DoNotOptimize(result.stats.overall.max_abs());
  }
  state.counters["samples_per_second"] = benchmark::Counter(double(samples), benchmark::Counter::kIsRate);
}

// The pattern's floor: the same draws (generators::GeneratePatternDraw under the driver's draw limits), then the
// built-in fused path alone. One thread.
void BM_PatternFusedOnly(benchmark::State& state, PatternVariant v) {
  const CaseSpec spec = FindPatternCase(v, kConvSamples);
  std::string why;
  const std::unique_ptr<fused::FusedPath> path = fused::CreateBuiltInPath(spec, &why);
  if (!path) throw std::runtime_error(why);
  generators::ConvShapeLimits base;
  base.full_range_weights = path->weight_range() == WeightRange::full;
  const generators::ConvShapeLimits limits = generators::PatternDrawLimits(spec.pattern, base);
  const uint64_t stream = case_stream_id(spec);
  FusedDraws(state, [&](uint32_t draw, std::vector<int32_t>& y) {
    const PatternDraw d =
        generators::GeneratePatternDraw(1, stream, draw, spec.pattern, spec.convention, spec.mix, limits);
    y.assign(pattern_output_geometry(spec.pattern, d.conv).elements(), 0);
    if (!path->Run(d, y, &why)) throw std::runtime_error("the built-in path refused a draw: " + why);
  });
}

// Issue 7's representative layer: 3x3 conv, 16 -> 16 channels, 16x16 spatial (same padding), one image.
struct Layer {
  ConvCase conv;
  std::vector<int32_t> input;
};
Layer RepresentativeLayer() {
  Layer layer;
  std::vector<int8_t> weights(16 * 3 * 3 * 16);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<int8_t>(int(i * 37 % 255) - 127);
  layer.conv = ConvCase()
                   .batch(1)
                   .input_size(16, 16)
                   .input_channels(16)
                   .output_channels(16)
                   .kernel_size(3, 3)
                   .padding(1)
                   .input_quant(QuantParams{QuantType{ScalarType::int8, false}, 0.02f, 3})
                   .weight_scales(std::vector<float>(16, 0.001f))
                   .weights(std::move(weights))
                   .bias(std::vector<int32_t>(16, 100));
  layer.input.resize(16 * 16 * 16);
  for (size_t i = 0; i < layer.input.size(); ++i) layer.input[i] = int(i * 101 % 256) - 128;
  return layer;
}

// The fused op alone on the representative layer.
void BM_LayerFused(benchmark::State& state, Variant v) {
  const CaseSpec spec = FindCase(v, SampleSource::conv, 1);
  std::string unsupported;
  const auto kernel = fused::FusedKernel::Create(spec.convention, spec.table_kind, Mutant::none, &unsupported);
  const Layer layer = RepresentativeLayer();
  std::vector<int32_t> y(layer.conv.output_elements());
  for (auto _ : state) {
    kernel->Run(layer.conv, layer.input, y);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["samples_per_second"] =
      benchmark::Counter(double(state.iterations() * y.size()), benchmark::Counter::kIsRate);
}

// The reference's own conv (int64 plain loops) on the same layer: most of what end to end adds to the floor.
void BM_LayerReferenceConv(benchmark::State& state) {
  const Layer layer = RepresentativeLayer();
  for (auto _ : state) {
    const std::vector<int64_t> acc = reference::Conv2DAccumulators(layer.conv, layer.input);
    benchmark::DoNotOptimize(acc.data());
  }
  state.counters["samples_per_second"] =
      benchmark::Counter(double(state.iterations() * layer.conv.output_elements()), benchmark::Counter::kIsRate);
}

// The exact reference cache for one convention: y_ref for every intermediate code (256 or 65,536).
void BM_ReferenceCache(benchmark::State& state, Variant v) {
  const CaseSpec spec = FindCase(v, SampleSource::sweep, 1);
  size_t codes = 0;
  for (auto _ : state) {
    const reference::ActivationTable table(spec.convention);
    codes += table.size();
    benchmark::DoNotOptimize(table.at(0).y);
  }
  state.counters["samples_per_second"] = benchmark::Counter(double(codes), benchmark::Counter::kIsRate);
}

// What a plain double-precision script does for the same codes: x = (u - zu) su, f(x) with libm, y =
// sat(round(f / sy) + zy). Not exact; the baseline of the 3x target.
double PlainActivation(ActivationKind kind, double x) {
  switch (kind) {
    case ActivationKind::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ActivationKind::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ActivationKind::hard_swish: return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
    default: throw std::runtime_error("no plain formula");
  }
}
void BM_PlainDouble(benchmark::State& state, Variant v) {
  const Convention c = FindCase(v, SampleSource::sweep, 1).convention;
  const QuantParams& in = c.intermediate.q;
  const QuantParams& out = c.output.q;
  std::vector<int32_t> y(in.type.code_count());
  for (auto _ : state) {
    for (int32_t u = in.type.qmin(); u <= in.type.qmax(); ++u) {
      const double f = PlainActivation(c.activation.kind, double(u - in.zero_point) * double(in.scale));
      const double code = std::round(f / double(out.scale)) + out.zero_point;
      y[size_t(u - in.type.qmin())] = int32_t(std::clamp(code, double(out.type.qmin()), double(out.type.qmax())));
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["samples_per_second"] =
      benchmark::Counter(double(state.iterations() * y.size()), benchmark::Counter::kIsRate);
}

// `fusediff gate` on an int16 example, whole command in-process (load, reference cache, the canonical table,
// sweep of 65,536 codes, conv cases, comparison, report). scripts/bench.sh also times the binary as a process
// against NumPy/SciPy. `extra`: "--max-abs-lsb 2" runs the absolute mode (the canonical table is still built).
void BM_Gate(benchmark::State& state, const char* example, const char* extra) {
  const std::string descriptor = std::string(FUSEDIFF_SOURCE_DIR "/examples/") + example + ".json";
  std::vector<std::string> args = {"fusediff", "gate", descriptor, "--threads", "1"};
  if (*extra) args.insert(args.end(), {"--max-abs-lsb", "2"});
  for (auto _ : state) {
    std::ostringstream out, err;
    const int code = cli::Main(args, out, err);
    if (code != 0) state.SkipWithError(("gate exited " + std::to_string(code) + ": " + err.str()).c_str());
  }
}

void Register() {
  RegisterBackend(fused::BuiltInBackend());  // the driver's cases here run the built-in kernels
  for (const Variant& v : kVariants) {
    const std::string name = v.name;
    benchmark::RegisterBenchmark(("EndToEnd/" + name + "/threads:1").c_str(), BM_EndToEnd, v, 1u)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("EndToEnd/" + name + "/threads:all").c_str(), BM_EndToEnd, v, 0u)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("FusedOnly/" + name).c_str(), BM_FusedOnly, v)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("LayerFused/" + name).c_str(), BM_LayerFused, v)->UseRealTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("ReferenceCache/" + name).c_str(), BM_ReferenceCache, v)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("PlainDouble/" + name).c_str(), BM_PlainDouble, v)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  for (const PatternVariant& v : kPatternVariants) {
    const std::string name = std::string(v.pattern) + "/" + std::string(to_string(v.activation));
    benchmark::RegisterBenchmark(("EndToEnd/" + name + "/threads:1").c_str(), BM_PatternEndToEnd, v)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("FusedOnly/" + name).c_str(), BM_PatternFusedOnly, v)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("LayerReferenceConv", BM_LayerReferenceConv)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Gate/gelu_erf_int16_lut_interp", BM_Gate, "gelu_erf_int16_lut_interp", "")
      ->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Gate/gelu_erf_int16_lut_interp/absolute", BM_Gate, "gelu_erf_int16_lut_interp", "abs")
      ->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Gate/tanh_int16_lut_interp", BM_Gate, "tanh_int16_lut_interp", "")
      ->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Gate/gelu_tanh_int16_pwl", BM_Gate, "gelu_tanh_int16_pwl", "")
      ->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace fusediff

int main(int argc, char** argv) {
  fusediff::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

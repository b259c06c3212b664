// The cost of XNNPACK's path (docs/xnnpack.md, "Cost"): per sample, on the same draws, the path's Run (input
// conversion, operator creation and weight packing, setup, run, read-back, the activation operator) against
// XNNPACK's own calls made directly: xnn_create_* + setup (creation and packing, counted apart) and
// xnn_run_operator. The draws are conv2d ones with per-channel scales (the path's convolution2d_nhwc_qc8); every draw
// of the path is counted, a rejected one too (none are: no transposed draws here). A measurement, not a benchmark. Run:
// build/bench/xnnpack_cost [draws].
#include <xnnpack.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fusediff/fused/xnnpack_backend.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/suite_options.h"

namespace {
using Clock = std::chrono::steady_clock;
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// XNNPACK's own calls for one int8 conv2d draw (qc8: per-channel scales): created, its weights packed and set up
// (input and output buffers of the draw's own).
struct Direct {
  std::vector<int8_t> x, y;
  xnn_operator_t op = nullptr;
};
void CreateDirect(const fusediff::ConvCase& conv, const std::vector<int32_t>& input, const fusediff::QuantParams& u,
                  Direct& d) {
  const size_t C = static_cast<size_t>(conv.input_channels()), K = static_cast<size_t>(conv.output_channels());
  d.x.assign(input.size() + XNN_EXTRA_BYTES, 0);
  d.y.assign(conv.output_elements() + XNN_EXTRA_BYTES, 0);
  const int32_t shift = conv.input_quant().type.scalar == fusediff::ScalarType::int8 ? 0 : -128;
  for (size_t i = 0; i < input.size(); ++i) d.x[i] = static_cast<int8_t>(input[i] + shift);
  xnn_create_convolution2d_nhwc_qc8(
      static_cast<uint32_t>(conv.padding_top()), static_cast<uint32_t>(conv.padding_right()),
      static_cast<uint32_t>(conv.padding_bottom()), static_cast<uint32_t>(conv.padding_left()),
      static_cast<uint32_t>(conv.kernel_height()), static_cast<uint32_t>(conv.kernel_width()),
      static_cast<uint32_t>(conv.stride_height()), static_cast<uint32_t>(conv.stride_width()),
      static_cast<uint32_t>(conv.dilation_height()), static_cast<uint32_t>(conv.dilation_width()), 1, C, K, C, K,
      static_cast<int8_t>(conv.input_quant().zero_point + shift), conv.input_quant().scale, conv.weight_scales().data(),
      conv.weights().data(), conv.bias().data(), static_cast<int8_t>(u.zero_point), u.scale, -128, 127, 0, &d.op);
  xnn_setup_convolution2d_nhwc_qc8(d.op, static_cast<size_t>(conv.batch()), static_cast<size_t>(conv.input_height()),
                                   static_cast<size_t>(conv.input_width()), d.x.data(), d.y.data(), nullptr);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace fusediff;
  const uint32_t draws = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 2000;
  if (xnn_initialize(nullptr) != xnn_status_success) return 1;
  const Backend& backend = fused::xnnpack::XnnpackBackend();
  std::printf(
      "activation  samples  path ns/sample  create+setup ns/sample  run ns/sample  path/(create+run)  path/run\n");
  for (const ActivationKind kind : {ActivationKind::relu, ActivationKind::sigmoid}) {
    SuiteOptions options;
    CaseSpec spec = backend.ActivationSuiteCases(options, kind, false).front();  // int8, fused, same convention
    std::string why;
    std::unique_ptr<FusedPath> path = backend.CreatePath(spec, &why);
    if (!path) {
      std::printf("%s: %s\n", std::string(to_string(kind)).c_str(), why.c_str());
      return 1;
    }
    generators::ConvShapeLimits limits;
    limits.max_batch = path->max_batch();
    limits.full_range_weights = true;
    limits.transposed_share = 0;  // the direct calls are conv2d's
    limits.per_tensor_weight_scale = false;
    std::vector<PatternDraw> set(draws);
    uint64_t samples = 0;
    for (uint32_t d = 0; d < draws; ++d) {
      set[d].conv = generators::GenerateConvCase(1, 28, d, spec.convention, limits);
      set[d].input = generators::GenerateConvInput(1, 28, d, set[d].conv);
      samples += set[d].conv.output_elements();
    }
    // Each phase over every draw, repeated: the least total of 5 (the machine is shared; the least is the cost).
    double path_s = 1e30, create_s = 1e30, run_s = 1e30;
    std::vector<int32_t> y;
    uint64_t ran = 0;
    for (int rep = 0; rep < 5; ++rep) {
      ran = 0;
      auto t0 = Clock::now();
      for (const PatternDraw& draw : set) {
        y.assign(draw.conv.output_elements(), 0);
        std::string rejected;
        if (path->Run(draw, y, &rejected)) ran += y.size();
      }
      path_s = std::min(path_s, Seconds(Clock::now() - t0));
      std::vector<Direct> direct(set.size());
      t0 = Clock::now();
      for (size_t d = 0; d < set.size(); ++d)
        CreateDirect(set[d].conv, set[d].input, spec.convention.intermediate.q, direct[d]);
      create_s = std::min(create_s, Seconds(Clock::now() - t0));
      t0 = Clock::now();
      for (Direct& d : direct) xnn_run_operator(d.op, nullptr);
      run_s = std::min(run_s, Seconds(Clock::now() - t0));
      for (Direct& d : direct) xnn_delete_operator(d.op);
    }
    const double n = static_cast<double>(ran);
    std::printf("%-10s  %7llu  %14.1f  %22.1f  %13.1f  %17.2f  %8.2f\n", std::string(to_string(kind)).c_str(),
                static_cast<unsigned long long>(ran), 1e9 * path_s / n, 1e9 * create_s / n, 1e9 * run_s / n,
                path_s / (create_s + run_s), path_s / run_s);
    (void)samples;
  }
  return 0;
}

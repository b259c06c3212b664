// How far ONNX Runtime's own float kernels are from the exact function, over every binary32 input: the runtime
// error the bisect's rounding-error bounds allow an activation (harness/bisect/src/bounds.cpp, kRuntimeError;
// docs/bisect.md, "Float verdicts"). Not a benchmark and not a test: an exhaustive measurement, printed as Markdown.
//
//   build/bench/ort_activation_error [--step S] [--op NAME]
//
// Each op runs as a one-node model at level disabled (the kernel a baseline runs) in ONNX Runtime in process, on
// every S-th binary32 bit pattern (S = 1, the default: all 2^32, NaN and infinities left out). The exact function is
// evaluated in double with glibc (exp, tanh, erf, erfc; the glibc manual's table of known maximum errors gives them a
// few ulps of binary64, below 2^-48 relative: a 2^-40 margin is added to what is printed). For a threshold t the
// table gives a and b such that |F(x) - f(x)| <= a |f(x)| + b for every input: a = max |F - f| / |f| over |f| >= t,
// b = max |F - f| over |f| < t.
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "fusediff/fused/ort_runtime.h"
#include "fusediff/onnx/onnx_io.h"

namespace {

using fusediff::onnx_io::DType;
using fusediff::onnx_io::ModelBuilder;
using fusediff::onnx_io::Tensor;

struct Op {
  const char* name;      // as the bounds table names it
  const char* op_type;
  const char* domain;
  double (*exact)(double);
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Tanh(double x) { return std::tanh(x); }
double Erf(double x) { return std::erf(x); }
// 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): no cancellation for negative x.
double Gelu(double x) { return 0.5 * x * std::erfc(-x * 0.70710678118654752440); }
double Square(double x) { return x * x; }  // exact in binary64 for a binary32 x

const Op kOps[] = {
    {"Sigmoid", "Sigmoid", "", Sigmoid},
    {"Tanh", "Tanh", "", Tanh},
    {"Erf", "Erf", "", Erf},
    {"com.microsoft.Gelu", "Gelu", "com.microsoft", Gelu},
    {"Pow2", "Pow", "", Square},
};

std::string Model(const Op& op, int64_t n) {
  ModelBuilder b("activation_error", 17);
  b.AddInput("x", DType::float32, {n});
  b.AddOutput("y", DType::float32, {n});
  std::vector<std::string> inputs{"x"};
  if (std::string(op.op_type) == "Pow") {
    b.AddInitializer(Tensor::FromFloats("two", {}, {2.0f}));
    inputs.push_back("two");
  }
  b.AddNode(op.op_type, inputs, {"y"}, {}, op.domain);
  return b.Serialize();
}

struct Tally {
  double rel = 0, abs = 0;  // a and b of the header
  float rel_at = 0, abs_at = 0;
};

void Measure(fusediff::fused::ort::Runtime& rt, const Op& op, uint32_t step, const std::vector<double>& thresholds) {
  constexpr int64_t kChunk = int64_t{1} << 22;
  char path[] = "/tmp/fusediff-activation-XXXXXX";
  const int fd = ::mkstemp(path);
  const std::string bytes = Model(op, kChunk);
  if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  ::close(fd);
  fusediff::fused::ort::SessionSpec spec;
  spec.model = path;
  spec.level = "disabled";
  const auto h = rt.Create(spec);
  std::vector<Tally> tallies(thresholds.size());
  uint64_t inputs = 0;
  std::vector<float> xs(kChunk);
  uint64_t bits = 0;
  while (bits <= 0xffffffffull) {
    size_t n = 0;
    for (; n < static_cast<size_t>(kChunk) && bits <= 0xffffffffull; bits += step) {
      const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
      if (std::isfinite(x)) xs[n++] = x;
    }
    for (size_t k = n; k < xs.size(); ++k) xs[k] = 0;
    const auto out = rt.Run(h, {Tensor::FromFloats("x", {kChunk}, xs)});
    for (size_t k = 0; k < n; ++k) {
      const double f = op.exact(xs[k]);
      const double F = out[0].value(k);
      if (std::fabs(f) > std::numeric_limits<float>::max()) continue;  // overflow: the bounds refuse it
      const double err = std::isfinite(F) ? std::fabs(F - f) : INFINITY;
      for (size_t t = 0; t < thresholds.size(); ++t) {
        Tally& y = tallies[t];
        if (std::fabs(f) >= thresholds[t]) {
          if (err / std::fabs(f) > y.rel) y.rel = err / std::fabs(f), y.rel_at = xs[k];
        } else if (err > y.abs) {
          y.abs = err, y.abs_at = xs[k];
        }
      }
    }
    inputs += n;
  }
  rt.Release(h);
  ::unlink(path);
  for (size_t t = 0; t < thresholds.size(); ++t) {
    const Tally& y = tallies[t];
    std::printf("| %s | 2^%d | %.4f u (at %a) | %.3e (at %a) | %" PRIu64 " |\n", op.name,
                static_cast<int>(std::log2(thresholds[t])), (y.rel + 0x1p-40) / 0x1p-24, static_cast<double>(y.rel_at),
                y.abs + 0x1p-40 * thresholds[t], static_cast<double>(y.abs_at), inputs);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t step = 1;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--step") == 0 && i + 1 < argc) {
      step = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--op") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: ort_activation_error [--step S] [--op NAME]\n");
      return 2;
    }
  }
  if (step == 0) step = 1;
  const auto rt = fusediff::fused::ort::StartRuntime();
  std::printf("%s, every %u-th binary32 input; |F - f| <= a |f| + b (u = 2^-24)\n\n", rt->version().c_str(), step);
  std::printf("| op | t | a = max rel over abs(f) >= t | b = max abs over abs(f) < t | inputs |\n|---|---|---|---|---|\n");
  for (const Op& op : kOps) {
    if (only.empty() || only == op.name) Measure(*rt, op, step, {0x1p-126, 0x1p-40, 0x1p-20, 0x1p-10, 0x1p-1, 0x1p+0, 0x1p+2});
  }
  return 0;
}

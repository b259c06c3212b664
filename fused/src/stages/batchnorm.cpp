// Fused kernel of stage kind `batchnorm` after another stage (Stage::bn_reads_codes): per channel k the affine map
// t = g[k] (s_in (x - z_in) - mean[k]) + beta[k], g[k] = gamma[k] / sqrt(var[k] + eps), in double, rounded into the
// stage's boundary by the convention's output rounding and saturated. (As the pattern's first stage the built-in
// path only folds BatchNorm into the producer: pattern_kernel.cpp.) Double is within 2^-50 of the exact value, so
// it rounds as the reference's exact BatchNorm does everywhere but within that distance of a tie.
#include <algorithm>
#include <cmath>
#include <string>

#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

double RoundBy(RoundingMode mode, double v) {
  switch (mode) {
    case RoundingMode::half_to_even: return std::nearbyint(v);  // the default rounding mode
    case RoundingMode::half_up: return std::floor(v + 0.5);
    case RoundingMode::half_away_from_zero: break;
  }
  return std::round(v);
}

class BatchNormKernel final : public StageKernel {
 public:
  BatchNormKernel(const Stage& s, const QuantParams& in, RoundingMode rounding)
      : eps_(s.bn_eps), in_(in), out_(s.out), rounding_(rounding) {}

  void Run(const StageOperands& operands, StageTensor& t) const override {
    const BatchNormParams& bn = operands.bn;
    const size_t channels = static_cast<size_t>(t.shape.channels);
    validate(bn, channels, eps_, "pattern draw: batchnorm");
    std::vector<double> gain(channels);
    for (size_t k = 0; k < channels; ++k) gain[k] = double(bn.gamma[k]) / std::sqrt(double(bn.var[k]) + double(eps_));
    for (size_t i = 0; i < t.codes.size(); ++i) {
      const size_t k = i % channels;
      const double x = double(in_.scale) * (t.codes[i] - in_.zero_point);
      const double v = (gain[k] * (x - double(bn.mean[k])) + double(bn.beta[k])) / double(out_.scale);
      const double code = std::clamp(RoundBy(rounding_, v), -1e9, 1e9) + out_.zero_point;
      t.codes[i] = static_cast<int32_t>(std::clamp(code, double(out_.type.qmin()), double(out_.type.qmax())));
    }
  }

 private:
  float eps_;
  QuantParams in_, out_;
  RoundingMode rounding_;
};

class BatchNormStage final : public FusedStage {
 public:
  StageKind kind() const override { return StageKind::batchnorm; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                      std::string* why) const override {
    if (!s.bn_reads_codes) {
      if (why) *why = "a BatchNorm on the producer's output is fused by folding it (conv2d+batchnorm+act, fold)";
      return nullptr;
    }
    return std::make_unique<BatchNormKernel>(s, in, spec.convention.output.rounding);
  }
};

}  // namespace

std::unique_ptr<const FusedStage> MakeBatchNormStage() { return std::make_unique<BatchNormStage>(); }

}  // namespace fusediff::fused

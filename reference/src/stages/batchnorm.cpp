// Reference of stage kind `batchnorm`, the unfolded graph: BatchNorm applied exactly to the producer's real output
// acc sx sw[k] (never rounded to a code in the graph), quantized into the producer's boundary u by the convention's
// intermediate rounding. It reads the accumulators, so the producer's own rounding of u is not on the path. (A fold
// reference replaces the producer instead: graph.cpp.) After another stage (Stage::bn_reads_codes) it reads that
// stage's codes instead (ApplyToCodes).
#include "fusediff/reference/batchnorm.h"
#include "fusediff/reference/stage_eval.h"

namespace fusediff::reference {
namespace {

class BatchNormReference final : public ReferenceStage {
 public:
  StageKind kind() const override { return StageKind::batchnorm; }
  void Apply(const Stage& stage, const StageInputs& in, GraphTensor& t) const override {
    const ConvCase& conv = in.draw.conv;
    const BatchNormParams& bn = in.operands.bn;
    const size_t channels = static_cast<size_t>(conv.output_channels());
    validate(bn, channels, stage.bn_eps, "pattern draw: batchnorm");
    if (stage.bn_reads_codes) return ApplyToCodes(stage, in, bn, channels, t);
    for (size_t i = 0; i < t.e.size(); ++i) {
      const size_t k = i % channels;
      GraphElement& e = t.e[i];
      const BatchNormCode code =
          BatchNormToCode(e.acc, conv.input_quant().scale, conv.weight_scales()[k], bn.gamma[k], bn.beta[k], bn.mean[k],
                          bn.var[k], stage.bn_eps, in.convention.intermediate);
      e.regions = RoundingRegions(code.saturated, code.tie_distance);
      e.y = code.u;
    }
  }

 private:
  // After an activation: x = s_in (code - z_in), the exact BatchNorm, rounded into the stage's own boundary by the
  // convention's output rounding (the BN is the graph's last quantizing op, as the activation was).
  static void ApplyToCodes(const Stage& stage, const StageInputs& in, const BatchNormParams& bn, size_t channels,
                           GraphTensor& t) {
    const IntermediateSpec out{IntermediateKind::quantized, stage.out, in.convention.output.rounding, {}};
    for (size_t i = 0; i < t.e.size(); ++i) {
      const size_t k = i % channels;
      GraphElement& e = t.e[i];
      const BatchNormCode code = BatchNormToCode(int64_t{e.y} - in.in.zero_point, in.in.scale, 1.0f, bn.gamma[k],
                                                 bn.beta[k], bn.mean[k], bn.var[k], stage.bn_eps, out);
      e.regions |= RoundingRegions(code.saturated, code.tie_distance);
      e.y = code.u;
    }
  }
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeBatchNormReference() { return std::make_unique<BatchNormReference>(); }

}  // namespace fusediff::reference

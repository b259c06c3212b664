// Reference of stage kind `batchnorm`, the unfolded graph: BatchNorm applied exactly to the producer's real output
// acc sx sw[k] (never rounded to a code in the graph), quantized into the producer's boundary u by the convention's
// intermediate rounding. It reads the accumulators, so the producer's own rounding of u is not on the path. (A fold
// reference replaces the producer instead: graph.cpp.)
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
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeBatchNormReference() { return std::make_unique<BatchNormReference>(); }

}  // namespace fusediff::reference

// Fused kernel of stage kind `fc`: a second fully connected layer over the flattened [N, K] codes, through the
// producer's own int32 kernel and requantization (fused_kernel.h) with the layer's boundary and multiplier rule.
#include <string>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/errors.h"
#include "stage_common.h"

namespace fusediff::fused {
namespace {

class FullyConnectedKernel final : public StageKernel {
 public:
  FullyConnectedKernel(std::unique_ptr<FusedKernel> layer, int32_t outputs, QuantParams in, MultiplierRule rule)
      : layer_(std::move(layer)), outputs_(outputs), in_(in), rule_(rule) {}
  void Run(const StageOperands& ops, StageTensor& t) const override {
    if (t.shape.height != 1 || t.shape.width != 1) {
      throw InputError(
          "pattern draw: a fully connected stage reads a flattened [N, K] tensor; the producer output is " +
          std::to_string(t.shape.height) + "x" + std::to_string(t.shape.width));
    }
    ConvCase fc;
    fc.batch(t.shape.batch)
        .input_size(1, 1)
        .input_channels(t.shape.channels)
        .output_channels(outputs_)
        .kernel_size(1, 1)
        .input_quant(in_)
        .weight_scales(ops.weight_scales)
        .weights(ops.weights)
        .bias(ops.bias);
    const ConvCase layer = WithMultiplierRule(fc, rule_);
    std::vector<int32_t> acc(layer.output_elements()), codes(layer.output_elements()), unused(layer.output_elements());
    layer_->Run(layer, t.codes, unused, acc, codes);
    t.shape = PatternGeometry{t.shape.batch, 1, 1, outputs_};
    t.codes = std::move(codes);
  }

 private:
  std::unique_ptr<FusedKernel> layer_;
  int32_t outputs_;
  QuantParams in_;
  MultiplierRule rule_;
};

class FullyConnectedStage final : public FusedStage {
 public:
  StageKind kind() const override { return StageKind::fully_connected; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                      std::string* why) const override {
    Convention layer = spec.convention;
    layer.intermediate.q = s.out;
    std::unique_ptr<FusedKernel> kernel = FusedKernel::Create(layer, TableKind::lut, Mutant::none, why);
    if (!kernel) return nullptr;
    return std::make_unique<FullyConnectedKernel>(std::move(kernel), s.fc_outputs, in, spec.pattern.multiplier);
  }
};

}  // namespace

std::unique_ptr<const FusedStage> MakeFullyConnectedStage() { return std::make_unique<FullyConnectedStage>(); }

}  // namespace fusediff::fused

// Reference of stage kind `fc`: a second fully connected layer over the flattened [N, K] tensor, its int64
// accumulators requantized into the stage's boundary by the convention's variant and the pattern's multiplier rule.
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/reference/stage_eval.h"

namespace fusediff::reference {
namespace {

class FullyConnectedReference final : public ReferenceStage {
 public:
  StageKind kind() const override { return StageKind::fully_connected; }

  void Apply(const Stage& stage, const StageInputs& in, GraphTensor& t) const override {
    const StageOperands& ops = in.operands;
    if (t.shape.height != 1 || t.shape.width != 1) {
      throw InputError(
          "pattern draw: a fully connected stage reads a flattened [N, K] tensor; the producer output is " +
          std::to_string(t.shape.height) + "x" + std::to_string(t.shape.width));
    }
    const int32_t inputs = t.shape.channels, outputs = stage.fc_outputs;
    if (ops.weights.size() != static_cast<size_t>(inputs) * static_cast<size_t>(outputs) ||
        ops.bias.size() != static_cast<size_t>(outputs) || ops.weight_scales.size() != static_cast<size_t>(outputs)) {
      throw InputError("pattern draw: FC stage tensors do not match [" + std::to_string(outputs) + ", " +
                       std::to_string(inputs) + "]");
    }
    GraphTensor next;
    next.shape = PatternGeometry{t.shape.batch, 1, 1, outputs};
    next.e.resize(next.shape.elements());
    for (int32_t n = 0; n < t.shape.batch; ++n) {
      RegionSet regions = 0;
      for (int32_t k = 0; k < inputs; ++k) regions |= t.e[static_cast<size_t>(n) * inputs + k].regions;
      for (int32_t j = 0; j < outputs; ++j) {
        // |acc| <= |bias| + 65535 * 127 * 64 < 2^30 + |bias|: exact in int64.
        int64_t sum = ops.bias[static_cast<size_t>(j)];
        for (int32_t k = 0; k < inputs; ++k) {
          sum += (int64_t{t.e[static_cast<size_t>(n) * inputs + k].y} - in.in.zero_point) *
                 ops.weights[static_cast<size_t>(j) * inputs + k];
        }
        GraphElement& e = next.e[static_cast<size_t>(n) * outputs + j];
        e.acc = sum;
        e.regions = regions;
      }
    }
    Convention layer = in.convention;
    layer.intermediate.q = stage.out;
    RequantizeTensor(next, layer, in.pattern.multiplier, in.in.scale, ops.weight_scales);
    t = std::move(next);
  }
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeFullyConnectedReference() {
  return std::make_unique<FullyConnectedReference>();
}

}  // namespace fusediff::reference

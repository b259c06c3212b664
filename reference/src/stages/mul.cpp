// Reference of stage kind `mul`: each code times its second input b (the element's, or its channel's), rounded into
// the product's boundary by the stage's mul rule (stages.h QuantizedMul).
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

class MulReference final : public ReferenceStage {
 public:
  StageKind kind() const override { return StageKind::mul; }
  void Apply(const Stage& stage, const StageInputs& in, GraphTensor& t) const override {
    const std::vector<int32_t>& b = in.operands.codes;
    const bool per_channel = stage.mul_operand == MulOperand::per_channel;
    const size_t channels = static_cast<size_t>(t.shape.channels);
    const size_t needed = per_channel ? channels : t.e.size();
    if (b.size() != needed) {
      throw InputError("pattern draw: mul's " + std::string(to_string(stage.mul_operand)) + " input has " +
                       std::to_string(b.size()) + " codes, expected " + std::to_string(needed));
    }
    for (size_t i = 0; i < t.e.size(); ++i) {
      GraphElement& e = t.e[i];
      const StageRounding r =
          QuantizedMul(stage.mul_rule, e.y, in.in, b[per_channel ? i % channels : i], stage.mul_input, stage.out);
      e.regions |= RoundingRegions(r.saturated, r.tie_distance);
      e.y = r.code;
    }
  }
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeMulReference() { return std::make_unique<MulReference>(); }

}  // namespace fusediff::reference

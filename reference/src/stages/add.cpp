// Reference of stage kind `add`: the residual r added to each code by the stage's add rule (stages.h QuantizedAdd),
// rounded into the sum's boundary s.
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

class AddReference final : public ReferenceStage {
 public:
  StageKind kind() const override { return StageKind::add; }
  void Apply(const Stage& stage, const StageInputs& in, GraphTensor& t) const override {
    const std::vector<int32_t>& residual = in.operands.codes;
    if (residual.size() != t.e.size()) {
      throw InputError("pattern draw: residual has " + std::to_string(residual.size()) + " codes, the sum has " +
                       std::to_string(t.e.size()) + " elements (no broadcast)");
    }
    for (size_t i = 0; i < t.e.size(); ++i) {
      GraphElement& e = t.e[i];
      if (!stage.residual.type.contains(residual[i])) {
        throw InputError("pattern draw: residual[" + std::to_string(i) + "] = " + std::to_string(residual[i]) +
                         " is outside " + to_string(stage.residual.type));
      }
      const StageRounding s = QuantizedAdd(stage.add_rule, e.y, in.in, residual[i], stage.residual, stage.out);
      e.regions |= RoundingRegions(s.saturated, s.tie_distance);
      e.y = s.code;
    }
  }
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeAddReference() { return std::make_unique<AddReference>(); }

}  // namespace fusediff::reference

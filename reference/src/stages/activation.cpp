// Reference of stage kind `act`: the exact per-code table over the codes it reads; the element's statistics key
// is the code it read.
#include "fusediff/reference/stage_eval.h"

namespace fusediff::reference {
namespace {

class ActivationReference final : public ReferenceStage {
 public:
  StageKind kind() const override { return StageKind::activation; }
  void Apply(const Stage&, const StageInputs& in, GraphTensor& t) const override {
    const ActivationLookup& a = in.activation;
    for (GraphElement& e : t.e) {
      const size_t i = static_cast<size_t>(e.y - a.qmin);
      e.key_code = e.y;
      e.regions |= a.regions_of[i];
      e.y = a.y_of[i];
    }
  }
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeActivationReference() { return std::make_unique<ActivationReference>(); }

}  // namespace fusediff::reference

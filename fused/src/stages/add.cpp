// Fused kernel of stage kind `add`: the add rule's production kernel (stages.h QuantizedAddKernel) on each code
// and the residual's. Mutant residual-output-scale is the same kernel constructed with the sum's scale for r.
#include <string>

#include "fusediff/fused/stage_kernel.h"
#include "fusediff/fused/stages.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

class AddKernel final : public StageKernel {
 public:
  explicit AddKernel(QuantizedAddKernel add) : add_(std::move(add)) {}
  void Run(const StageOperands& operands, StageTensor& t) const override {
    const std::vector<int32_t>& residual = operands.codes;
    if (residual.size() != t.codes.size()) {
      throw InputError("pattern draw: residual has " + std::to_string(residual.size()) + " codes, the sum has " +
                       std::to_string(t.codes.size()) + " elements (no broadcast)");
    }
    for (size_t i = 0; i < t.codes.size(); ++i) t.codes[i] = add_(t.codes[i], residual[i]);
  }

 private:
  QuantizedAddKernel add_;
};

class AddStage final : public FusedStage {
 public:
  StageKind kind() const override { return StageKind::add; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                      std::string*) const override {
    QuantParams residual = s.residual;
    if (spec.mutant == Mutant::residual_output_scale) residual.scale = s.out.scale;  // the mutant's variant
    return std::make_unique<AddKernel>(QuantizedAddKernel(s.add_rule, in, residual, s.out));
  }
};

}  // namespace

std::unique_ptr<const FusedStage> MakeAddStage() { return std::make_unique<AddStage>(); }

}  // namespace fusediff::fused

// Fused kernel of stage kind `act`: the 8-bit lut built for the boundary it reads (fused_kernel.h ApplyTable).
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/stage_kernel.h"

namespace fusediff::fused {
namespace {

class ActivationKernel final : public StageKernel {
 public:
  explicit ActivationKernel(std::unique_ptr<FusedKernel> table) : table_(std::move(table)) {}
  void Run(const StageOperands&, StageTensor& t) const override {
    for (int32_t& code : t.codes) code = table_->ApplyTable(code);
  }

 private:
  std::unique_ptr<FusedKernel> table_;
};

class ActivationStage final : public FusedStage {
 public:
  StageKind kind() const override { return StageKind::activation; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage&, const QuantParams& in,
                                      std::string* why) const override {
    Convention c = spec.convention;
    c.intermediate.q = in;
    c.intermediate.kind = IntermediateKind::quantized;
    std::unique_ptr<FusedKernel> table = FusedKernel::Create(c, TableKind::lut, Mutant::none, why);
    if (!table) return nullptr;
    return std::make_unique<ActivationKernel>(std::move(table));
  }
};

}  // namespace

std::unique_ptr<const FusedStage> MakeActivationStage() { return std::make_unique<ActivationStage>(); }

}  // namespace fusediff::fused

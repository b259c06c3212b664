#include "fusediff/fused/fused_path.h"

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/pattern_kernel.h"
#include "fusediff/model/mutants.h"

namespace fusediff::fused {

namespace {

class ConvActPath final : public FusedPath {
 public:
  explicit ConvActPath(std::unique_ptr<FusedKernel> kernel) : kernel_(std::move(kernel)) {}
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string*) override {
    kernel_->Run(draw.conv, draw.input, y);
    return true;
  }

 private:
  std::unique_ptr<FusedKernel> kernel_;
};

class PatternPath final : public FusedPath {
 public:
  explicit PatternPath(std::unique_ptr<PatternKernel> kernel) : kernel_(std::move(kernel)) {}
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    return kernel_->TryRun(draw, y, rejected);
  }

 private:
  std::unique_ptr<PatternKernel> kernel_;
};

}  // namespace

std::unique_ptr<FusedPath> CreateBuiltInPath(const CaseSpec& spec, std::string* unsupported_reason) {
  if (spec.backend != Backend::builtin) {
    if (unsupported_reason) {
      *unsupported_reason = "fused kind " + std::string(fused_path_name(spec)) + " is oneDNN's kernel, not a built-in table";
    }
    return nullptr;
  }
  const bool conv_act = is_conv_act(spec.pattern) && spec.fusion == Fusion::keep_all;
  if (spec.mutant != Mutant::none && is_pattern_mutant(spec.mutant) == conv_act) {
    if (unsupported_reason) {
      *unsupported_reason = "mutant " + std::string(to_string(spec.mutant)) + " is not injected into the " +
                            (conv_act ? "conv2d+act" : pattern_name(spec.pattern)) + " path";
    }
    return nullptr;
  }
  if (conv_act) {
    std::unique_ptr<FusedKernel> kernel =
        FusedKernel::Create(spec.convention, spec.table_kind, spec.mutant, unsupported_reason, spec.table);
    if (!kernel) return nullptr;
    return std::make_unique<ConvActPath>(std::move(kernel));
  }
  std::unique_ptr<PatternKernel> kernel = PatternKernel::Create(spec, unsupported_reason);
  if (!kernel) return nullptr;
  return std::make_unique<PatternPath>(std::move(kernel));
}

}  // namespace fusediff::fused

#include "fusediff/fused/fused_path.h"

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/pattern_kernel.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/mutants.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/model/tolerance.h"

namespace fusediff::fused {

namespace {

class ConvActPath final : public FusedPath, public CodeSteps {
 public:
  explicit ConvActPath(std::unique_ptr<FusedKernel> kernel) : kernel_(std::move(kernel)) {}
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string*) override {
    kernel_->Run(draw.conv, draw.input, y);
    return true;
  }
  const CodeSteps* code_steps() const override { return this; }
  int32_t ApplyTable(int32_t u) const override { return kernel_->ApplyTable(u); }
  int32_t Requantize(const ConvCase& conv, int32_t k, int32_t acc) const override {
    return kernel_->Requantize(conv, k, acc);
  }
  int32_t PostProcess(const ConvCase& conv, int32_t k, int32_t acc) const override {
    return kernel_->PostProcess(conv, k, acc);
  }
  void Trace(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y, std::span<int32_t> acc,
             std::span<int32_t> u) const override {
    kernel_->Run(conv, input, y, acc, u);
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

class BuiltIn final : public Backend {
 public:
  std::string_view name() const override { return kBuiltInPath; }
  std::vector<std::string> paths() const override { return {std::string(kBuiltInPath)}; }
  std::vector<std::string> words() const override { return {"lut", "lut_interp", "pwl"}; }
  void SelectPath(std::string_view word, CaseSpec& spec) const override {
    spec.backend = std::string(kBuiltInPath);
    spec.table_kind = parse_table_kind(word, "fused");
  }
  std::string PathWord(const CaseSpec& spec) const override { return std::string(to_string(spec.table_kind)); }
  std::vector<std::string> stage_kinds() const override {
    std::vector<std::string> names;
    // Every kind with a fused side (the built-ins and those registered later, fused/stage_kernel.h) and the batch
    // norm, which the built-in kernels fold into the conv.
    for (StageKind kind : known_stage_kinds()) {
      if (kind == StageKind::batchnorm || find_fused_stage(kind) != nullptr) names.emplace_back(to_string(kind));
    }
    return names;
  }
  std::vector<std::string> patterns() const override {
    std::vector<std::string> names;
    for (const PatternInfo& info : known_patterns()) names.emplace_back(info.name);
    return names;
  }
  Tolerance DefaultTolerance(const CaseSpec& spec) const override {
    return builtin_table_tolerance(spec.table_kind, spec.convention.activation.kind);
  }
  std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* why) const override {
    return CreateBuiltInPath(spec, why);
  }
};

}  // namespace

const Backend& BuiltInBackend() {
  static const BuiltIn backend;
  return backend;
}

std::unique_ptr<FusedPath> CreateBuiltInPath(const CaseSpec& spec, std::string* unsupported_reason) {
  if (spec.backend != kBuiltInPath) {
    if (unsupported_reason) {
      *unsupported_reason = "fused kind " + fused_path_name(spec) + " is another backend's path, not a built-in table";
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

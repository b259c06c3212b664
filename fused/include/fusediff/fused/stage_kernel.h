#pragma once
// The built-in fused side of a stage kind (model/stage_module.h): the production kernel that computes the stage on
// the codes of the tensor it reads. PatternKernel (pattern_kernel.h) runs a kept-whole pattern as the producer, then
// each stage's kernel in order; the fusions that remove a boundary (add in the accumulator, pool first, fold) are
// the pattern kernel's own. A mutant of a stage is a variant kernel its Create selects once, never a branch inside
// the arithmetic. A kind's fused side registers once (register_fused_stage); the built-ins are listed in
// stage_registry.cpp. No I/O.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused {

// The codes between two stages (NHWC).
struct StageTensor {
  PatternGeometry shape;
  std::vector<int32_t> codes;
};

class StageKernel {
 public:
  virtual ~StageKernel() = default;
  // Replaces `t` by the stage's output codes; `operands`: the stage's own tensors in the draw. Throws InputError
  // when they do not fit the stage.
  virtual void Run(const StageOperands& operands, StageTensor& t) const = 0;
};

class FusedStage {
 public:
  virtual ~FusedStage() = default;
  virtual StageKind kind() const = 0;
  // The kernel of stage `s` of spec.pattern reading codes quantized by `in` (spec.mutant selects a variant); null
  // with *why set where the built-in path has none.
  virtual std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                              std::string* why) const = 0;
};

// InputError when the kind has no model module or its fused side is registered twice.
void register_fused_stage(std::unique_ptr<const FusedStage> stage);
// Null when the kind has no built-in fused kernel.
const FusedStage* find_fused_stage(StageKind kind);

std::unique_ptr<const FusedStage> MakeActivationStage();
std::unique_ptr<const FusedStage> MakeAddStage();
std::unique_ptr<const FusedStage> MakePoolStage(bool average);
std::unique_ptr<const FusedStage> MakeFullyConnectedStage();
std::unique_ptr<const FusedStage> MakeMulStage();
std::unique_ptr<const FusedStage> MakeLayerNormStage();
std::unique_ptr<const FusedStage> MakeBatchNormStage();  // after another stage only (Stage::bn_reads_codes)

}  // namespace fusediff::fused

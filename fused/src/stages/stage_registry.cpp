// The built-in fused sides of the stage kinds, listed once here, and any registered at start-up. batchnorm's is for
// a BatchNorm after another stage: on the producer the built-in path folds it (pattern_kernel.cpp).
#include <string>
#include <vector>

#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff::fused {
namespace {

std::vector<std::unique_ptr<const FusedStage>>& Registry() {
  static std::vector<std::unique_ptr<const FusedStage>> stages = [] {
    std::vector<std::unique_ptr<const FusedStage>> s;
    s.push_back(MakeActivationStage());
    s.push_back(MakeAddStage());
    s.push_back(MakePoolStage(false));
    s.push_back(MakePoolStage(true));
    s.push_back(MakeFullyConnectedStage());
    s.push_back(MakeMulStage());
    s.push_back(MakeLayerNormStage());
    s.push_back(MakeBatchNormStage());
    return s;
  }();
  return stages;
}

}  // namespace

void register_fused_stage(std::unique_ptr<const FusedStage> stage) {
  stage_module(stage->kind());  // the model side first: it says what the stage is
  if (find_fused_stage(stage->kind())) {
    throw InputError("stage kind '" + std::string(stage->kind().token()) + "': fused kernel registered twice");
  }
  Registry().push_back(std::move(stage));
}

const FusedStage* find_fused_stage(StageKind kind) {
  for (const auto& s : Registry()) {
    if (s->kind() == kind) return s.get();
  }
  return nullptr;
}

}  // namespace fusediff::fused

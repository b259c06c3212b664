// The reference sides of the stage kinds: the built-ins, listed once here, and any registered at start-up.
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reference/stage_eval.h"

namespace fusediff::reference {
namespace {

std::vector<std::unique_ptr<const ReferenceStage>>& Registry() {
  static std::vector<std::unique_ptr<const ReferenceStage>> stages = [] {
    std::vector<std::unique_ptr<const ReferenceStage>> s;
    s.push_back(MakeActivationReference());
    s.push_back(MakeAddReference());
    s.push_back(MakePoolReference(false));
    s.push_back(MakePoolReference(true));
    s.push_back(MakeFullyConnectedReference());
    s.push_back(MakeBatchNormReference());
    s.push_back(MakeMulReference());
    s.push_back(MakeLayerNormReference());
    return s;
  }();
  return stages;
}

const ReferenceStage* Find(StageKind kind) {
  for (const auto& s : Registry()) {
    if (s->kind() == kind) return s.get();
  }
  return nullptr;
}

}  // namespace

void register_reference_stage(std::unique_ptr<const ReferenceStage> stage) {
  stage_module(stage->kind());  // the model side first: it says what the stage is
  if (Find(stage->kind())) {
    throw InputError("stage kind '" + std::string(stage->kind().token()) + "': reference registered twice");
  }
  Registry().push_back(std::move(stage));
}

const ReferenceStage& reference_stage(StageKind kind) {
  if (const ReferenceStage* s = Find(kind)) return *s;
  throw InputError("stage kind '" + std::string(kind.token()) + "' has no reference evaluation");
}

}  // namespace fusediff::reference

#pragma once
// A stage kind is one module: every side of it, registered by one call. The built-in kinds register themselves in
// each layer's stage_registry.cpp; a kind defined elsewhere (tests/stage_kind/test_stage_test.cpp) hands its parts
// to RegisterStageKind before the first run. What each part answers:
//   model      (model/stage_module.h):     token, boundary, shape, legality, elementwise, descriptor/results/replay
//                                          fields;
//   reference  (reference/stage_eval.h):   the exact evaluation;
//   fused      (fused/stage_kernel.h):     the built-in fused kernel (optional: without one, the built-in path
//                                          reports its patterns unsupported);
//   patterns   (model/pattern.h):          the stage orders it appears in, with the fusions offered;
//   mutants    (model/mutants.h):          the bugs of its kernel the mutant catalog searches for.
#include <memory>
#include <vector>

#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/mutants.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reference/stage_eval.h"

namespace fusediff::driver {

struct StageKindModules {
  std::unique_ptr<const StageKindModule> model;
  std::unique_ptr<const reference::ReferenceStage> reference;
  std::unique_ptr<const fused::FusedStage> fused;
  std::vector<PatternInfo> patterns;
  std::vector<RegisteredMutant> mutants;
};

// Registers every part. InputError when a part is missing (model, reference), names another kind, or is taken.
void RegisterStageKind(StageKindModules modules);

}  // namespace fusediff::driver

#include "fusediff/driver/stage_kinds.h"

#include <string>

#include "fusediff/model/errors.h"

namespace fusediff::driver {

void RegisterStageKind(StageKindModules m) {
  if (!m.model || !m.reference) throw InputError("stage kind: a model and a reference part are required");
  const StageKind kind = m.model->kind();
  const bool same = m.reference->kind() == kind && (!m.fused || m.fused->kind() == kind);
  if (!same) throw InputError("stage kind '" + std::string(kind.token()) + "': its parts name different kinds");
  register_stage_kind(std::move(m.model));
  reference::register_reference_stage(std::move(m.reference));
  if (m.fused) fused::register_fused_stage(std::move(m.fused));
  for (const PatternInfo& p : m.patterns) register_pattern(p);
  for (const RegisteredMutant& r : m.mutants) register_mutant(r);
}

}  // namespace fusediff::driver

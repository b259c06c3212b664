#pragma once
// The mutant catalog: fused-path bugs seen in practice, each defined precisely, with the part of the case space
// where it is NOT equivalent to the correct path (outside it the mutant computes the same outputs, so no
// harness could detect it there).
#include <span>
#include <string>
#include <string_view>

#include "fusediff/model/case_spec.h"

namespace fusediff {

struct MutantInfo {
  Mutant mutant;
  std::string_view name;        // kebab-case, as on the command line
  std::string_view definition;  // what the mutated fused path computes
  std::string_view space;       // where it differs from the correct path
  // Shows only at requantization ties, saturation edges or a single code: uniform sampling rarely finds it.
  bool needs_targeting;
};

// Every mutant but `none`, in catalog order: the built-ins, then the registered ones.
std::span<const MutantInfo> mutant_catalog();

// A mutant a stage kind's module brings (driver/stage_kinds.h): its catalog entry, its non-equivalent space, and
// how a mutant search places a case in that space (pattern, stages, boundaries) over the conv+act convention it
// drew. Its variant of the fused kernel is the stage's own (fused/stage_kernel.h), selected by name.
struct RegisteredMutant {
  MutantInfo info;  // info.mutant is assigned by register_mutant
  bool (*in_space)(const CaseSpec& spec) = nullptr;
  void (*place)(CaseSpec& spec) = nullptr;
};
// Its value (after the built-ins'); InputError when the name is taken or a function is missing.
Mutant register_mutant(const RegisteredMutant& m);
// Places spec.mutant's case when it is a registered mutant (the generators call it); false for a built-in one.
bool place_registered_mutant(CaseSpec& spec);
const MutantInfo& mutant_info(Mutant m);


// True when `spec` lies in the mutant's non-equivalent space (necessary, not sufficient: e.g. no-intermediate-
// saturation also needs an accumulator beyond the intermediate range to actually occur).
bool in_mutant_space(Mutant m, const CaseSpec& spec);

// A mutant of a pattern's fused path (pattern_kernel), as opposed to the conv2d+act kernel's.
bool is_pattern_mutant(Mutant m);

}  // namespace fusediff

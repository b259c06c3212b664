#pragma once
// A backend is one module: one registered object that tells the rest of fusediff everything it asks about a family
// of fused paths (the built-in fixed-point kernels, a library such as oneDNN, a test's own). The driver, replay, the
// mutant search, sweeps, thresholds, results and reports reach a path only through this interface and the registry
// below; none of them names a backend. docs/architecture.md, "Adding a backend", lists what a new one touches.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusediff/model/batchnorm.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/fused_path.h"
#include "fusediff/model/known_defects.h"
#include "fusediff/model/pattern.h"
#include "fusediff/model/results.h"
#include "fusediff/model/suite_options.h"
#include "fusediff/model/tolerance.h"

namespace fusediff {


// How the backend's dispatch is capped from outside the process (oneDNN: an environment variable read once, at the
// first dispatch), for `run --isa`, which runs its cases once per cap, each in its own process.
struct DispatchControl {
  std::string env_var;               // empty: the backend has no dispatch control
  std::vector<std::string> aliases;  // other variables with the same effect, removed from the child's environment
  std::vector<std::string> caps;     // the values it takes, lowest first
  std::string provenance_key;        // the provenance key that says where it dispatched ("isa")
};

// The names a backend gives to conventions the model defines by their arithmetic, as its cases, replay lines and
// results spell them (model/pattern.h RegisterAddRuleName, model/batchnorm.h RegisterFloatBoundaryPreset).
struct ConventionNames {
  std::vector<std::pair<std::string, AddRule>> add_rules;
  std::vector<std::pair<std::string, FloatBoundaryPreset>> float_boundary_presets;
};

class Backend;
// The default of Backend's SuiteCases (below).
std::vector<CaseSpec> DefaultSuiteCases(const Backend& backend, const CaseSpec& builtin_case, const CaseSpec& path);

class Backend {
 public:
  virtual ~Backend() = default;
  // The module's name ("builtin"): what its provenance is filed under.
  virtual std::string_view name() const = 0;
  // The paths it offers: each a CaseSpec::backend value ("builtin"; a library's fused and unfused graphs).
  virtual std::vector<std::string> paths() const = 0;
  // The words that name its paths wherever a path is text (--fused, replay `fused=`, results "fused"), and the
  // two directions: SelectPath sets spec.backend (and anything the word implies) for one of words(); PathWord is
  // the word of spec's path.
  virtual std::vector<std::string> words() const = 0;
  // Whether `word` names one of its paths: one of words() by default. A backend whose words carry an argument
  // (a plugin's "plugin:PATH.so,key=value") claims every word of its form; words() then shows the form.
  virtual bool ClaimsWord(std::string_view word) const;
  virtual void SelectPath(std::string_view word, CaseSpec& spec) const = 0;
  virtual std::string PathWord(const CaseSpec& spec) const = 0;
  // The word the sample key carries: paths that compare one graph with the same draws share it.
  virtual std::string SampleWord(const CaseSpec& spec) const { return PathWord(spec); }
  // The replay fields that name what stands behind a path word beyond the word itself (a plugin's name, version,
  // options digest and draw limits: CaseSpec::backend_facts), in the order a replay line writes them; parse_replay
  // keeps those it finds in backend_facts. CheckReplayFacts compares a replay line's facts with what the word names
  // now: a difference that changes the draws is an InputError; one that does not (another version) is a warning.
  virtual std::vector<std::string> ReplayFactKeys() const { return {}; }
  virtual void CheckReplayFacts(const CaseSpec& /*spec*/, std::vector<std::string>* /*warnings*/) const {}

  // Provenance of this process's backend (library, version, dispatch), ordered; empty for the built-in kernels.
  virtual KeyValues provenance() const { return {}; }
  // One line naming the library behind a path ("oneDNN 3.1, ISA avx2"); empty where there is none.
  virtual std::string LibraryDescription() const { return {}; }
  // Whether its paths are a black box: their accumulators and intermediates are not observable (a library).
  virtual bool black_box() const { return false; }
  // The stage kinds (to_string(StageKind)) and patterns (pattern_name) its paths implement.
  virtual std::vector<std::string> stage_kinds() const = 0;
  virtual std::vector<std::string> patterns() const = 0;
  // Its names for the conventions it declares, registered with the backend.
  virtual ConventionNames convention_names() const { return {}; }
  // The convention spec's path declares it implements (the graph's own unless the backend says otherwise).
  virtual Convention DeclaredConvention(const CaseSpec& spec) const { return spec.convention; }
  // Its default tolerance for a case (tolerance.h; the measurements in docs/tolerances.md).
  virtual Tolerance DefaultTolerance(const CaseSpec& spec) const = 0;
  // The known-defect ledger and documented behaviours that explain its paths' samples (model/known_defects.h JSON),
  // and where the text comes from; empty: none.
  virtual std::string_view KnownDefectsJson() const { return {}; }
  virtual std::string_view KnownDefectsName() const { return {}; }
  // The draw rules and models its ledger's entries name beyond the model's generic ones (model/known_defects.h),
  // registered with the backend.
  virtual std::vector<DefectRuleKind> DefectRules() const { return {}; }
  virtual std::vector<DefectModelKind> DefectModels() const { return {}; }
  virtual DispatchControl dispatch() const { return {}; }
  // Its share of the suite (`run`), for a backend with a suite of its own (has_own_suite), asked where the built-in
  // suite would have it: ActivationSuiteCases after the built-in conv2d+act cases of each activation,
  // PatternSuiteCases after the built-in pattern cases (`only`: one pattern). `selected`: --fused named one of its
  // paths (SuiteOptions::backend), else the default suite's share. Empty by default.
  virtual bool has_own_suite() const { return false; }
  virtual std::vector<CaseSpec> ActivationSuiteCases(const SuiteOptions&, ActivationKind, bool /*selected*/) const {
    return {};
  }
  virtual std::vector<CaseSpec> PatternSuiteCases(const SuiteOptions&, const std::optional<std::string>& /*only*/,
                                                  bool /*selected*/) const {
    return {};
  }
  // A backend without a suite of its own runs, under `run --fused WORD`, these cases for each case of the built-in
  // suite: by default the case itself on the path WORD selected (`path`: its backend and backend_arg), for a
  // conv-source, same-convention, keep_all case of a pattern it implements; none otherwise.
  virtual std::vector<CaseSpec> SuiteCases(const CaseSpec& builtin_case, const CaseSpec& path) const {
    return DefaultSuiteCases(*this, builtin_case, path);
  }
  // Its path for a case: null with *why set where it cannot run the case; InputError for an invalid one.
  virtual std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* why) const = 0;
};

// The registry. A backend lives as long as the process (a function-local static of its module); registering the
// same object again does nothing, a second object claiming a registered path, word, convention name, draw rule or
// model throws std::logic_error.
void RegisterBackend(const Backend& backend);
// Every registered backend, in registration order.
std::vector<const Backend*> RegisteredBackends();
// The backend that offers path `path` (a CaseSpec::backend value); null when none is registered.
const Backend* FindBackend(std::string_view path);
// The backend of spec's path; InputError naming `field` and the registered paths where none offers it.
const Backend& BackendOf(const CaseSpec& spec, std::string_view field = "fused");
// Every registered path word, "a, b or c" (error messages).
std::string KnownPathWords();
// Whether spec's backend implements every stage of its pattern (and the pattern); false with *why otherwise.
bool BackendImplements(const Backend& backend, const Pattern& pattern, std::string* why);

}  // namespace fusediff

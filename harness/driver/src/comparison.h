#pragma once
// Internal to the driver: the one comparison of a draw, for every backend's path and every caller (RunCase, replay, the mutant search). The reference side is reference::GraphReference,
// the fused side a FusedPath (model/fused_path.h); nothing else assembles either.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/backend.h"
#include "fusediff/model/fused_path.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/results.h"
#include "fusediff/reference/graph.h"
#include "table_cache.h"

namespace fusediff::driver::detail {

// One compared element of a draw.
struct ComparedSample {
  int64_t acc = 0;
  int32_t code = 0;  // the keyed code (model/pattern.h keyed_boundary); 0 for an f32 reference
  int32_t y_ref = 0;
  int32_t y_fused = 0;
  RegionSet regions = 0;
  double bound = 0;  // a float output's bound at this element (reference::GraphElement::bound); 0 for codes
  std::vector<int32_t> repetitions{};  // every repetition's output, when they differ (else empty)
  int64_t error() const { return int64_t{y_fused} - y_ref; }
};

// A draw the path also ran under every value of one formulation dimension (RunInfo::paired), with the reference.
struct PairedOutcome {
  std::string dimension;  // empty: none for this draw
  std::vector<std::string> values;
  std::vector<PairedRun> runs;
  std::vector<int32_t> y_ref;
};

// The fused path of a case: its backend's (model/backend.h), where the backend implements the case's pattern. Null
// with *why where unsupported; InputError where no registered backend offers the case's path.
std::unique_ptr<FusedPath> CreateFusedPath(const CaseSpec& spec, std::string* why);

// A draw the fused path already ran in a batch (FusedPath::RunBatch): its output and what became of it.
struct BatchedRun {
  std::vector<int32_t> y;
  DrawOutcome outcome;
};

class DrawComparison {
 public:
  // Null with *why set when the case's path cannot run it. `tables`: the caller's cache (null: its own).
  // `factory`: makes the path instead of CreateFusedPath (RunOptions::fused_path; null or empty: the case's own).
  static std::unique_ptr<DrawComparison> Create(const CaseSpec& spec, TableCache* tables, std::string* why,
                                                const FusedPathFactory* factory = nullptr);

  // The draw limits every draw of this case uses (its pattern's producer, the path's weight range, whether draws
  // pick formulations), and draw d (under `formulation` instead of the drawn one when set).
  const generators::ConvShapeLimits& limits() const { return limits_; }
  PatternDraw Draw(uint64_t seed, uint64_t stream, uint32_t draw,
                   const std::optional<Formulation>& formulation = std::nullopt) const;

  // Runs the draw through both sides, the fused path `repeat` times (set_repetition 0..repeat-1 before each).
  // False with *rejected when the path refused the draw (nothing compared). Otherwise `out` holds one sample per
  // element of the final tensor, in its NHWC order, with repetition 0's output; where the repetitions differ the
  // sample lists all of them. `paired()` then holds the draw's paired formulations, if the path ran any (also
  // when it rejected the draw).
  // `batched`: the path's first run of the draw came from a batch (the path is not run again for it).
  bool Compare(const PatternDraw& draw, std::vector<ComparedSample>& out, std::string* rejected, uint32_t repeat = 1,
               const BatchedRun* batched = nullptr);
  // Runs draws through the path's RunBatch (repetition 0), each output poisoned first, for Compare.
  std::vector<BatchedRun> RunBatch(std::span<const PatternDraw> draws);
  const PairedOutcome& paired() const { return paired_; }
  // Repetitions of each draw for `requested` (--repeat; unset: 2 for a repeatable path): 1 for a path that
  // cannot tell anything from a second run (the built-in kernels).
  uint32_t repetitions(std::optional<uint32_t> requested) const;

  // The path's own table (FusedPath::ReadTable) checked code by code against the table of the path's declared
  // convention at the activation (the reference's own, from its definition); nullopt where the path has none.
  std::optional<TableReadback> ReadBackTable();

  FusedPath& path() { return *path_; }
  const CaseSpec& spec() const { return spec_; }
  bool f32_reference() const { return f32_; }
  // The keyed codes' type (per-code statistics); unset for an f32 reference.
  std::optional<QuantType> key_type() const;
  uint64_t escalations() const { return reference_->escalations(); }
  // The final output code per element of a draw under the fused path's own declared convention: the case's
  // reference, or for a cross-convention case a second reference under the declared convention. A ledger model runs
  // it on the draw as the defect changes it, so the library is judged under its own convention.
  std::vector<int32_t> DeclaredOutputs(const PatternDraw& draw);
  bool cross_convention() const { return declared_ != nullptr; }
  // The library behind the path, its version and the ISA it dispatches to: its backend's provenance "library",
  // "version" and "isa" ("oneDNN", "2.6.3 (commit N/A)", "avx2"); empty for the built-in paths.
  const std::string& library() const { return library_; }
  const std::string& library_version() const { return library_version_; }
  const std::string& library_isa() const { return library_isa_; }
  const Backend& backend() const { return *backend_; }

 private:
  DrawComparison() = default;
  CaseSpec spec_;
  Convention reference_convention_;
  bool f32_ = false;
  const Backend* backend_ = nullptr;
  std::unique_ptr<FusedPath> path_;
  std::optional<reference::ActivationTable> owned_table_;
  const reference::ActivationTable* table_ = nullptr;  // the reference's (owned_table_ or the caller's cache)
  std::unique_ptr<reference::GraphReference> reference_;
  std::unique_ptr<reference::GraphReference> declared_;  // cross-convention cases with an f32 declared convention
  generators::ConvShapeLimits limits_;
  std::string library_, library_version_, library_isa_;
  PairedOutcome paired_;
};

// Samples per draw of a case: the final tensor's elements for the draw's shape.
uint64_t DrawSamples(const Pattern& pattern, uint64_t seed, uint64_t stream, uint32_t draw,
                     const generators::ConvShapeLimits& limits);

}  // namespace fusediff::driver::detail

#pragma once
// The fused-path interface: what every path under test offers the comparison loop. A backend (model/backend.h)
// makes one for a case; the driver's comparison, replay, sweeps, thresholds and mutant search use nothing else.
// It sits in the model, beside the backend registry, so that a backend module depends on the model alone.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/pattern.h"

namespace fusediff {

// What a library path did on its last successful Run, for attribution: the implementation(s) it dispatched to
// ("conv: jit_int8:avx512_core_vnni") and the API formulation it passed the arithmetic in (empty: the only one).
// `formulation` is format_formulation of the choices that applied (model/formulation.h).
// `paired`: where the path ran the last draw under every value of one formulation dimension (oneDNN's output
// padding), each value's outcome in paired_values' order; set by every Run, also one that rejected the draw.
struct PairedRun {
  bool ran = false;
  std::vector<int32_t> y;  // when ran
  std::string rejected;    // when not
};
struct RunInfo {
  std::string implementation;
  std::string formulation;
  std::string paired_dimension;  // empty: none
  std::vector<std::string> paired_values;
  std::vector<PairedRun> paired;
  // Set by a Run that returned false because it did not execute the draw: the library is known to crash on it
  // (why, e.g. oneDNN 2.6's brgconv empty kernel range, docs/onednn.md); `implementation` then names the
  // primitive that was built and not executed. The driver counts such draws as a ledger entry's (model
  // not_executed) or fails the case; never as unsupported.
  std::string withheld;
};

// The code-level steps of a path that applies one table to intermediate codes: what the sweep and threshold
// sources feed, and what replay shows beside the reference's accumulator and code. A path that runs whole draws
// only (a library's) has none, and those sources do not apply to it.
class CodeSteps {
 public:
  virtual ~CodeSteps() = default;
  virtual int32_t ApplyTable(int32_t u) const = 0;
  virtual int32_t Requantize(const ConvCase& conv, int32_t k, int32_t acc) const = 0;
  virtual int32_t PostProcess(const ConvCase& conv, int32_t k, int32_t acc) const = 0;
  // One conv2d+act draw with each element's accumulator and intermediate code.
  virtual void Trace(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y, std::span<int32_t> acc,
                     std::span<int32_t> u) const = 0;
};

// What became of one draw of a batch (FusedPath::RunBatch): ran (ok), refused by the path (rejected, with its
// reason, counted as unsupported samples), or lost to the path's process (crashed, timeout: a plugin behind a
// subprocess transport). `implementation`: what ran it, where the path says (a plugin's kernel name).
struct DrawOutcome {
  enum class Status { ok, rejected, crashed, timeout };
  Status status = Status::ok;
  std::string reason;
  std::string implementation;
};
std::string_view to_string(DrawOutcome::Status s);  // "ok", "rejected", "crashed", "timeout"

// The shapes and weights a path's draws may take: what the generators draw within (generators::ConvShapeLimits).
// The defaults are the generators' own.
struct DrawLimits {
  int32_t max_batch = 2;
  int32_t max_spatial = 10;
  int32_t max_channels = 8;
  int32_t max_kernel = 3;
  int32_t max_stride = 2;
  int32_t max_dilation = 2;
  bool transposed = true;  // ConvTranspose2D draws among the conv2d ones
  WeightRange weights = WeightRange::symmetric;
  friend bool operator==(const DrawLimits&, const DrawLimits&) = default;
};

class FusedPath {
 public:
  virtual ~FusedPath() = default;
  // One draw: y[i] for every element of pattern_output_geometry(spec.pattern, draw.conv). Returns false and sets
  // *rejected when the path refuses this draw (a library's own check); such samples are counted, not compared.
  virtual bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) = 0;
  // Draws per RunBatch call the driver hands the path. 0: the path takes no batches, the driver calls Run once per
  // draw (the built-in kernels and libraries). A path whose draws can be lost (a plugin behind a process boundary,
  // DrawOutcome crashed / timeout) takes batches, of 1 draw or more; one whose cost per call dwarfs its cost per draw
  // asks for more.
  virtual size_t preferred_batch() const { return 0; }
  // A batch of draws: y[i] for draws[i] (sized as Run's, host-owned), outcomes[i] what became of it. The default
  // runs each through Run (status ok or rejected; implementation from last_run()).
  virtual void RunBatch(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
                        std::span<DrawOutcome> outcomes);
  // Its batches compute in another process (a plugin child): while one thread compares batch N, the driver has
  // batch N + 1 drawn and run, so that the child's work and the round trip hide behind the comparison.
  virtual bool out_of_process() const { return false; }
  // The implementations the path used so far (a library's kernel names, distinct); none for the built-in kernels.
  virtual std::vector<std::string> implementations() const { return {}; }
  // The int8 weight codes its draws may use (oneDNN takes the whole s8 range).
  virtual WeightRange weight_range() const { return WeightRange::symmetric; }
  // The largest batch its draws take (generators::ConvShapeLimits::max_batch). A library whose cost per primitive
  // (JIT code generation for each new shape) dwarfs its cost per sample computes more images per primitive.
  virtual int32_t max_batch() const { return 2; }
  // Every limit its draws keep: by default max_batch() and weight_range() with the generators' other limits.
  virtual DrawLimits draw_limits() const {
    DrawLimits limits;
    limits.max_batch = max_batch();
    limits.weights = weight_range();
    return limits;
  }
  // Whether each draw picks an API formulation (model/formulation.h; generators DrawFormulation) for this path.
  virtual bool draws_formulations() const { return false; }
  // The last successful Run's implementation and formulation (empty for the built-in kernels).
  virtual RunInfo last_run() const { return {}; }
  // Whether running a draw twice can tell anything: a library kernel may read memory it never wrote; the built-in
  // kernels are plain C++ over their inputs and say no.
  virtual bool repeatable() const { return false; }
  // Repetition r (0-based) of a draw under --repeat: following runs fill the destination and any scratchpad the path
  // manages with poison pattern r before executing, so such a read shows as a difference between repetitions.
  virtual void set_repetition(uint32_t /*r*/) {}
  // Whether Run may be called from several threads at once (a library that parallelises itself says no).
  virtual bool concurrent() const { return true; }
  // The path's code-level steps (CodeSteps above); null: it runs whole draws only.
  virtual const CodeSteps* code_steps() const { return nullptr; }
  // A path whose activation is a per-code table the library builds itself (XNNPACK's table operators) reads it
  // back: the library's output code for every input code of the activation's input type, qmin..qmax in order,
  // computed by running its own operator on them. The driver checks it against the declared table once per case,
  // before any draw runs. nullopt: no such table (nothing to check).
  virtual std::optional<std::vector<int32_t>> ReadTable() { return std::nullopt; }
};

}  // namespace fusediff

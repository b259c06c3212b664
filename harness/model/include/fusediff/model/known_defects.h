#pragma once
// The known-defect ledger: what fusediff has explained in a library, down to its cause, as data (a backend's
// KnownDefectsJson in model/backend.h, format "fusediff-known-defects/2"; harness/tables reads it). Each entry is of one
// kind: a known defect (a bug, proven in the library's source) or a documented behaviour (arithmetic the library
// documents, e.g. oneDNN's int16 saturation without VNNI). A compared sample counts as an entry's only when
//   - the library, its version, the ISA it dispatched to and the implementation that computed the draw match,
//   - the draw (its geometry and how the library was called) meets the entry's rule, and
//   - the fused output equals, within the case's tolerance, the entry's model: the reference's own arithmetic on
//     the draw as the entry changes it, where that differs from the reference's answer.
// Anything else still fails, so the ledger cannot hide a new bug. std only.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/formulation.h"

namespace fusediff {

inline constexpr const char* kKnownDefectsFormat = "fusediff-known-defects/2";
// The first format: every entry a known defect, no ISA condition.
inline constexpr const char* kKnownDefectsFormatV1 = "fusediff-known-defects/1";

// known_defect: a library bug; documented_behaviour: arithmetic the library documents. Neither fails a run (the
// case's verdict says which); `fusediff run --strict` fails documented behaviour.
enum class LedgerKind { known_defect, documented_behaviour };
std::string_view to_string(LedgerKind k);
// In prose: "known defect" or "documented behaviour".
std::string_view describe(LedgerKind k);
// The named value; InputError naming `field` and the known names otherwise (also for the two below).
LedgerKind parse_ledger_kind(std::string_view text, std::string_view field);

// How the library was called on the draw, where a rule depends on it (the draw's formulation). The defaults are
// fusediff's one formulation on main: a source zero-point attribute set, the source type the draw's own.
struct DefectCallAttributes {
  bool source_zero_point_attribute = true;  // a source zero-point attribute was set (of any value, 0 included)
  std::optional<ScalarType> source_type;    // the source type the library saw; nullopt: the draw's input type
  bool extended_input = false;              // an output padding passed as an input extended by zero-point rows/columns
};

struct KnownDefect;

// A draw rule: which draws an entry's defect can touch (their geometry, and how the library was called on them).
// Rules and models are named by strings and registered, like stage kinds: the generic ones below by the model, a
// library's own by its backend module (DefectRules in model/backend.h), next to the kernels whose source they read.
struct DefectRuleKind {
  std::string name;
  // The entry's parameters the rule reads (of registers, block, source, op, weights_vector): exactly these may
  // appear in its ledger entry, and the numeric ones (registers, block) must.
  std::vector<std::string> parameters;
  // The path withholds the draws the rule meets (the library would crash on them): only with model not_executed,
  // and that model only with such a rule.
  bool withheld = false;
  std::function<bool(const KnownDefect&, const ConvCase&, const DefectCallAttributes&)> meets;
};

// What the defect does to a draw, in the reference's terms: the draw (its input and its conv: kernel rows, weights,
// padding, column schedule or accumulation rule) as the defect changes it, in place; the reference then runs on it
// unchanged. Null `apply`: not_executed, thread_race (nothing computed).
struct DefectModelKind {
  std::string name;
  std::function<void(const KnownDefect&, ConvCase*, std::vector<int32_t>*, const DefectCallAttributes&)> apply;
};

// The model of a library that crashes on the draw: the path does not execute it (FusedPath RunInfo::withheld) and
// its samples are counted as the entry's, withheld, never compared; a withheld draw no entry of this model covers
// fails the case.
inline constexpr std::string_view kNotExecuted = "not_executed";
// The model of a library whose output on the draw depends on thread timing (a race): its values are not modelled.
// On a draw the rule meets (a rule that holds only where the race can happen), a sample whose repetitions differ
// (--repeat), or that differs from the reference where no value model explains it (a clobbered output can come out
// alike twice), is counted as the entry's, never judged; an equal one is judged as usual.
inline constexpr std::string_view kThreadRace = "thread_race";

// The registries, each holding the model's generic entries from the start:
//   rule source_as_passed: any draw whose source the library saw as `source` (u8 or s8; unset: either) and whose op
//     is `op` (unset: either): a documented behaviour that depends on the source type the kernel reads.
//     `weights_vector` (unset: either) keeps only the draws that are (true) or are not (false) an s8 gemm computed as
//     a matrix-vector product with the weights as its vector: an s8 source, one output channel (the gemm's M) and
//     more than one output pixel (its N), which a gemm driver may hand to its gemv kernel with the operands swapped;
//   model drop_last_input_column: the taps of the last input column (ix = input_width - 1) are skipped, zero-point
//     compensation included (ConvCase::column_reads);
//   models halved_weights, int16_pairs_per_tap, int16_pairs_flattened, int16_pairs_shifted_weights: the accumulator
//     computed by that documented integer arithmetic (model/conv_case.h Accumulation), on the draw as the library
//     saw it (an output padding passed as an extended input: DefectCallAttributes);
//   models not_executed (kNotExecuted) and thread_race (kThreadRace).
// Registering a name twice throws std::logic_error (a programming error, as for backends).
void RegisterDefectRule(DefectRuleKind rule);
void RegisterDefectModel(DefectModelKind model);
// The registered one; InputError naming `field` and the registered names otherwise.
const DefectRuleKind& defect_rule(std::string_view name, std::string_view field);
const DefectModelKind& defect_model(std::string_view name, std::string_view field);

struct KnownDefect {
  std::string id;
  LedgerKind kind = LedgerKind::known_defect;
  std::string library;          // e.g. "oneDNN"
  std::string version_min;      // dotted numbers, inclusive: "2.6.0"
  std::string version_max;      // inclusive: "2.6.3"
  // Globs over the ISA the library dispatched to (its own name, e.g. "avx2": the effective ISA under the backend's
  // dispatch cap); empty: any. For implementations whose name does not say the ISA (a library's gemm ones).
  std::vector<std::string> isas;
  // Globs ('*': any run of characters) over the implementation string of the run that computed the draw
  // (fused::RunInfo, e.g. "conv: jit_deconvolution:avx512_core_vnni"); one matching is enough.
  std::vector<std::string> implementations;
  std::string rule;             // a registered DefectRuleKind, and its parameters:
  int32_t registers = 0;        // a kernel's register budget
  int32_t block = 0;            // a kernel's channel block (4, 8 or 16)
  std::optional<ScalarType> source;    // uint8 or int8 as the library saw it; unset: either
  std::optional<ConvOp> op;            // the draw's op; unset: either
  std::optional<bool> weights_vector;  // source_as_passed: see the rule; unset: either
  std::string model;            // a registered DefectModelKind
  std::string explanation;
  std::string replay;           // a minimal replay string that reproduces it
  std::string test;             // the pinned test (ctest/GoogleTest name) that fails once the library is fixed
};

struct KnownDefectLedger {
  std::string source;  // the file it was read from, or "embedded ..."
  std::vector<KnownDefect> entries;
};

// '*' matches any run of characters (also none); every other character itself.
bool glob_match(std::string_view pattern, std::string_view text);
// Whether the dotted version's leading numbers ("2.6.3 (commit N/A)" -> 2.6.3) lie in [min, max]; false when the
// version has no leading number.
bool version_in_range(std::string_view version, std::string_view min, std::string_view max);
// The library, version, ISA and implementation conditions of an entry.
bool defect_applies(const KnownDefect& d, std::string_view library, std::string_view version, std::string_view isa,
                    std::string_view implementation);
// The entry's rule on the draw's geometry and on how the library was called on it.
bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call = {});
// The same under the draw's formulation (model/formulation.h), as the library saw it: call_attributes below.
bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const Formulation& formulation);
// How a draw of `conv` under `formulation` reaches the library (source_as_passed: the source type, whether a source
// zero-point attribute is set; whether an output padding is passed as an extended input).
DefectCallAttributes call_attributes(const Formulation& formulation, const ConvCase& conv);
// Whether the entry's model is kNotExecuted; kThreadRace.
bool not_executed(const KnownDefect& d);
bool thread_race(const KnownDefect& d);
// Whether one sample is the defect: the defect changes this output (the model's y differs from the reference's),
// the library's output is not the reference's, and it is the model's within `tolerance` LSB (the case's own bound:
// the model runs the reference's arithmetic, which is judged under that bound). Anything else is judged as usual.
bool explained_by_defect(int32_t y_ref, int32_t y_fused, int32_t y_model, int64_t tolerance);
// The draw as the entry's model changes it, in place (DefectModelKind); the reference then runs on it unchanged.
void apply_defect_model(const KnownDefect& d, ConvCase* conv, std::vector<int32_t>* input,
                        const DefectCallAttributes& call = {});

}  // namespace fusediff

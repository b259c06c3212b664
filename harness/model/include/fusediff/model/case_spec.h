#pragma once
// What one case of a suite is: a convention, the fused path that claims to implement it, an optional
// injected bug (mutant), and where its samples come from.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/formulation.h"
#include "fusediff/model/pattern.h"
#include "fusediff/model/region_mix.h"

namespace fusediff {

struct TableData;  // model/table.h

// The kind of table the built-in fused path applies (fused/fused_kernel.h, model/table.h).
//   lut:        direct table over every code of an 8-bit intermediate (TFLite LUTPopulateInt8 semantics, built
//               in double with the declared output rounding).
//   lut_interp: 513-knot table, int16 intermediate -> int16 output, zero points 0 (TFLite LUTPopulateInt16 /
//               LUTLookup, bit-exact).
//   pwl:        piecewise-linear segments in fixed point over an 8- or 16-bit intermediate (only from a table
//               file: model/table.h).
enum class TableKind { lut, lut_interp, pwl };

// Which fused path runs a case: CaseSpec::backend names one path of a registered backend module (model/backend.h),
// e.g. "builtin" (the built-in fixed-point kernels, with the case's table kind). kBuiltInPath is the default.
inline constexpr std::string_view kBuiltInPath = "builtin";

// Which reference a case compares the fused path with.
//   same_convention:  the reference runs the convention the fused path declares (declared_convention): a verdict.
//   cross_convention: the reference runs the graph's quantize-then-activate convention although the fused path
//                     declares another (oneDNN's f32 intermediate): a measurement of how far the fusion moves the
//                     answer, labelled as such and never given pass/fail (Verdict::cross_convention).
enum class Comparison { same_convention, cross_convention };

// Bugs injected into the fused path on purpose, to show the harness catches them. Each is defined precisely,
// with the case space where it differs from the correct path, in model/mutants.h.
enum class Mutant {
  none,
  use_output_scale,
  gelu_tanh_for_erf,
  requant_truncate,
  requant_double_for_single,
  no_intermediate_saturation,
  lut_index_off_by_one,
  knee_entry_off_by_one,
  ignore_intermediate_zero_point,
  zero_point_before_rounding,
  skip_intermediate_quantization,
  output_half_even_for_half_away,
  interp_truncate,
  // Pattern mutants (model/pattern.h): a keep_all fused path that fuses wrongly.
  residual_after_activation,
  residual_output_scale,
  add_skip_intermediate_rounding,
  maxpool_before_activation,
  avgpool_truncate,
  fold_across_activation,
  // BatchNorm fold mutants (model/batchnorm.h): a conv2d+batchnorm+act fold that folds wrongly.
  bn_drop_eps,
  bn_f16_for_f32,
  bn_per_tensor_for_per_channel,
  bn_bf16_truncate,
  bn_f16_overflow_wraps,
  bn_after_activation,
  // An FC -> FC fold mutant (model/pattern.h Fusion::fold): the folded weights quantized with the wrong scale.
  fc_fold_first_layer_scale,
  // Normalization and elementwise chains (issue 30): conv2d+act+batchnorm, conv2d+mul+add+act.
  bn_fold_across_activation,
  mul_skip_output_rounding,
  mul_ignores_input_zero_point,
  // LayerNorm (issue 30): fc+layernorm+act, fc+add+layernorm.
  ln_drop_eps,
  ln_eps_after_sqrt,
  ln_one_pass_variance,
  ln_mean_wrong_axis,
  ln_skip_after_norm,
  ln_bf16_variance,
};

// Where a case's samples come from.
//   conv:       random Conv2D draws, each channel's first output aimed by the region mix; draws are consumed in
//               order, every output element of a draw is a sample.
//   sweep:      every intermediate code once; sample i is code qmin + i (no convolution).
//   thresholds: for each output channel of conv draw 0, every requantization threshold of the intermediate
//               range (the accumulators at and +-1 around each tie between neighbouring codes), straight into
//               the post-processing (no convolution).
enum class SampleSource { conv, sweep, thresholds };

std::string_view to_string(Mutant m);  // kebab-case: "use-output-scale"; "none"
Mutant parse_mutant(std::string_view text, std::string_view field);

std::string_view to_string(TableKind k);  // "lut", "lut_interp", "pwl"
std::string_view to_string(SampleSource s);
std::string_view to_string(Comparison c);
TableKind parse_table_kind(std::string_view text, std::string_view field);
SampleSource parse_sample_source(std::string_view text, std::string_view field);
Comparison parse_comparison(std::string_view text, std::string_view field);

struct CaseSpec {
  std::string name;
  SampleSource source = SampleSource::conv;
  // The graph's convention: the quantize-then-activate semantics of the unfused graph. The draws aim at it.
  Convention convention;
  // The fusion pattern (model/pattern.h): conv2d+act unless set. `convention` holds its producer's requantization
  // and boundary u (intermediate) and its activation with that stage's output boundary; the other stages carry
  // their own boundaries.
  Pattern pattern;
  Fusion fusion = Fusion::keep_all;  // how the fused path treats the pattern's boundaries
  Comparison comparison = Comparison::same_convention;
  std::string backend = std::string(kBuiltInPath);  // a registered backend's path (model/backend.h)
  // What the path word says beyond the path (a plugin's "PATH.so,key=value"): set by its backend's SelectPath,
  // given back by its PathWord; empty for every path whose word is a fixed one.
  std::string backend_arg;
  // What stands behind that word when the case ran (model/backend.h ReplayFactKeys): written into replay lines
  // after the fields that fix the case, never part of canonical_key.
  std::vector<std::pair<std::string, std::string>> backend_facts;
  TableKind table_kind = TableKind::lut;  // the built-in path's table (lut, unused, for another backend)
  Mutant mutant = Mutant::none;
  uint64_t samples = 0;  // conv: requested sample count; sweep: ignored (every code once)
  RegionMix mix;         // conv: what the draws aim at
  // An external table (from a table file, `fusediff gate`) the fused path uses instead of building its own.
  // When set, canonical_key carries its fingerprint, so different tables get different sample streams.
  std::shared_ptr<const TableData> table;
  // What names that table where its data is not at hand (a result read back, a replay string): its fingerprint
  // (table_fingerprint_hex), the file it was read from and the SHA-256 of the file's bytes. Set with the table by
  // set_external_table; `table_fingerprint` alone keeps a read-back case's identity.
  std::string table_fingerprint;
  std::string table_file;
  std::string table_sha256;
};

// Gives `spec` an external table read from `file` whose bytes hash to `sha256` (fills the naming fields).
void set_external_table(CaseSpec& spec, std::shared_ptr<const TableData> table, std::string file, std::string sha256);

// The fused path as one word names it, wherever it is text (replay `fused=`, results "fused", --fused, case
// names): the word the path's backend gives it (model/backend.h; the built-in backend's are its table kinds).
// parse_fused_path sets spec.backend (and table_kind, lut unless the word says otherwise); it throws InputError
// naming `field` and the registered words for a word no registered backend claims. read_fused_path is the
// lenient form for reading results back: a word no registered backend claims stays the case's path, and
// fused_path_name gives it back unchanged (a report needs no backend to show a backend's results).
std::string fused_path_name(const CaseSpec& spec);
void parse_fused_path(std::string_view text, std::string_view field, CaseSpec& spec);
void read_fused_path(std::string_view text, CaseSpec& spec);
// Whether the case runs the built-in path with a table of `kind`.
bool uses_table(const CaseSpec& spec, TableKind kind);

// The convention the fused path declares it implements: its backend's DeclaredConvention (model/backend.h); the
// graph's own for a path no registered backend offers (a result read back without its backend).
Convention declared_convention(const CaseSpec& spec);
// The convention the reference runs: the declared one (same_convention) or the graph's (cross_convention).
Convention reference_convention(const CaseSpec& spec);
// Throws InputError when a cross_convention case has nothing to cross (its path declares the graph's convention).
void validate(const CaseSpec& spec);

// "knee:1/saturation:1/quant_boundary:2/bulk:1"; parse also takes "knee=1,saturation=1,...", and missing
// regions weigh 0. Throws InputError naming `field`.
std::string format_region_mix(const RegionMix& mix);
RegionMix parse_region_mix(std::string_view text, std::string_view field);

// Canonical text of what determines a case's samples (source + convention + fused path + mix, + ";table=FINGERPRINT"
// when an external table is set; not the name, the mutant or the sample count), e.g. "conv;gelu_erf;alpha=0;double_rounding;u=int8:0.0625:0:half_away_from_zero;
// y=int8:0.00390625:-128:half_away_from_zero:after_rounding;lut". Same text -> same samples.
std::string canonical_key(const CaseSpec& spec);
// What a per-intermediate-code table (reference y_ref, generator code lists) depends on: the activation, the
// intermediate quantization and the output spec; not the requantization, which only decides which code is hit.
std::string activation_table_key(const Convention& c);

// 64-bit FNV-1a of the sample key: the case's stream id c in the counter-based generator. The sample key is
// canonical_key except that a backend's paths of one graph may share it (fused= its SampleWord, the comparison
// left out where that differs from the path's word), so that e.g. a library's fused, cross-convention and unfused
// comparisons see the same draws.
uint64_t case_stream_id(const CaseSpec& spec);

// Number of samples a case actually runs: `samples` for conv, the intermediate code count for sweep.
uint64_t effective_samples(const CaseSpec& spec);

// A replay string names one sample bit for bit.
//   v1 (generated samples): "fusediff-replay/1;seed=S;sample=I;name=N;" + canonical fields + ";mutant=M"
//   v2 (an explicit case, e.g. a shrunk counterexample): "fusediff-replay/2;name=N;" + canonical fields +
//      ";mutant=M;shape=N/H/W/C/K/KH/KW/SH/SW/DH/DW/PT/PL/PB/PR;xq=TYPE:SCALE:ZP;ws=S0:S1..;w=..;b=..;x=..;element=E"
// parse_replay throws InputError naming the bad field.
struct ExplicitConv {
  ConvCase conv;
  std::vector<int32_t> input;
  uint64_t element = 0;  // index of the sample in the pattern's final tensor (conv2d+act: the conv's output)
  // Each stage's tensors (model/pattern.h PatternDraw::stages); empty for conv2d+act (and so by default:
  // ExplicitConv{conv, input, element} leaves them out). Replay fields: res= (an add's residual), fws=, fw=, fb= (a
  // second layer), bng=, bnb=, bnm=, bnv= (BatchNorm, one binary32 per output channel); a later stage of a kind
  // already seen suffixes its keys (model/pattern.h stage_field_suffix).
  std::vector<StageOperands> stages{};
  // How a library path passes the draw (";form=", model/formulation.h); unset: the default formulation.
  std::optional<Formulation> formulation{};
};
//   Both versions take ";form=FORMULATION" (a library path's formulation of the draw: v1 regenerates the draw under
//   it; unset: the default formulation, what strings written before formulations mean) and ";repeat=K" (run the
//   fused path K times and show every repetition; unset: the path's default).
struct ReplayKey {
  uint64_t seed = 0;
  uint64_t sample = 0;
  CaseSpec spec;
  std::optional<ExplicitConv> explicit_conv;  // v2
  std::optional<Formulation> formulation{};   // v1
  uint32_t repeat = 0;                        // 0: the path's default
};
// A v1 string of an external-table case names the table by fingerprint, file and SHA-256 (";table=FINGERPRINT;
// table_file=PATH;table_sha256=HEX", the path percent-encoded); parse_replay fills spec.table_fingerprint,
// table_file and table_sha256, and the caller reads the table back (the model reads no files).
std::string format_replay(const ReplayKey& key);
ReplayKey parse_replay(std::string_view text);

}  // namespace fusediff

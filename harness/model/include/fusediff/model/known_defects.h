#pragma once
// The known-defect ledger: what fusediff has explained in a library, down to its cause, as data
// (fused/onednn/known_defects.json, format "fusediff-known-defects/2"; harness/tables reads it). Each entry is of one
// kind: a known defect (a bug, proven in the library's source) or a documented behaviour (arithmetic the library
// documents, e.g. oneDNN's int16 saturation without VNNI). A compared sample counts as an entry's only when
//   - the library, its version, the ISA it dispatched to and the implementation that computed the draw match,
//   - the draw (its geometry and how the library was called) meets the entry's rule, and
//   - the fused output equals, within the case's tolerance, the entry's model: the reference's own arithmetic on
//     the draw as the entry changes it, where that differs from the reference's answer.
// Anything else still fails, so the ledger cannot hide a new bug. std only.
#include <cstdint>
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

// Which draws an entry's defect can touch (its geometry).
enum class DefectRule {
  // oneDNN 2.6 jit_deconvolution (avx512_core*): a ConvTranspose2D whose output padding exceeds its right padding
  // (oneDNN sees r_pad = padding_right - output_padding_width < 0, PyTorch's mapping), with
  // ((kernel_width - 1) * dilation_width) mod stride_width + (-r_pad) >= stride_width, computed in one register block
  // (the kernel's unrolled width ur_w equals the output width; `registers` is the kernel's register budget).
  jit_deconv_single_block_output_padding,
  // oneDNN 2.6 int8 jit deconvolution (jit_deconvolution:avx512_core*, jit_uni_deconv:*) called with a u8 source and
  // no source zero-point attribute (DefectCallAttributes): a ConvTranspose2D with stride_height > kernel_height, no
  // H dilation, oneDNN's t_pad = padding_top >= 0 and b_pad = padding_bottom - output_padding_height >= 0 (with
  // kernel_height - 1 >= both), at least one output row no kernel row reaches (is_stride_hole_row), and one ic and
  // one oc block: input_channels <= block and output_channels <= block (`block`: 16 avx512, 8 avx2, 4 sse41). Each
  // such row gets one spurious kernel row read past the real weights (docs/onednn.md, "Stride-hole rows read past
  // the weights"). More blocks read other blocks' weights at padded-channel places: not modelled, judged as usual.
  jit_deconv_stride_hole,
  // oneDNN 2.6 jit_uni_deconv (avx2, avx2_vnni, sse41): a ConvTranspose2D whose output columns the kernel's
  // register blocks schedule differently from the definition (jit_uni_deconv_column_reads: `registers` 12, or 14
  // with VNNI; `block` the oc block, 8 avx2, 4 sse41), e.g. the last full block of a row reading input column iw.
  jit_uni_deconv_columns,
  // Any draw whose source the library saw as `source` (u8 or s8, DefectCallAttributes; unset: either) and whose op is
  // `op` (unset: either): a documented behaviour that depends on the source type the kernel reads. `weights_vector`
  // (unset: either) keeps only the draws that are (true) or are not (false) an s8 gemm computed as a matrix-vector
  // product with the weights as its vector: an s8 source, one output channel (the gemm's M) and more than one
  // output pixel (its N), which oneDNN's gemm driver hands to its gemv kernel with the operands swapped.
  source_as_passed,
  // oneDNN 2.6 brgconv (avx512_core_vnni): a Conv2D with an output row whose every kernel row falls in the top/bottom
  // padding (is_empty_kernel_range_row: oneDNN's kh range is empty). The oneDNN path withholds the draws of such a
  // geometry that also meet the library-side conditions it checks before executing (the post-ops hold a sum and an
  // eltwise, no accumulation buffer: onednn_patterns.cpp BrgconvEmptyKernelRangeCrashes), since oneDNN would die
  // with SIGSEGV on them (docs/onednn.md, "brgconv: an empty kernel range crashes"). Only with model not_executed.
  brgconv_empty_kernel_range,
};
std::string_view to_string(DefectRule r);
DefectRule parse_defect_rule(std::string_view text, std::string_view field);

// What the defect does to a draw, in the reference's terms.
enum class DefectModel {
  // The taps of the last input column (ix = input_width - 1) are skipped, zero-point compensation included: the
  // reference with those taps left out of the kernel schedule (ConvCase::column_reads).
  drop_last_input_column,
  // The kernel extended to stride_height rows, rows kernel_height .. stride_height - 1 holding
  // stride_hole_tail_weight (what fused/onednn writes after the real rows of the weights buffer it owns, at the
  // blocked layout's offsets of those rows), and padding_bottom raised by stride_height - kernel_height (the output
  // keeps its size). Only the rows no kernel row reaches change: each gets source row ih_max times the tail row
  // kh_lo = (oy + padding_top) mod stride_height, as (x - zx) * w like every tap.
  stride_hole_tail_rows,
  // The accumulator computed by the library's documented integer arithmetic (model/conv_case.h Accumulation):
  // halved weights, or int16-saturated channel pairs per tap or over the flattened taps.
  halved_weights,
  int16_pairs_per_tap,
  int16_pairs_flattened,
  int16_pairs_shifted_weights,
  // The input columns the jit_uni_deconv kernel reads (jit_uni_deconv_column_reads; past the row: the next pixels in
  // memory, past the input: the source tail fused/onednn owns, source_tail_code), and the source tail appended to
  // the draw's input so that the reference reads the same codes.
  jit_uni_deconv_columns,
  // The library crashes on the draw: the path does not execute it (FusedPath RunInfo::withheld) and its samples are
  // counted as the entry's, withheld, never compared; a withheld draw no entry of this model covers fails the case.
  not_executed,
};
std::string_view to_string(DefectModel m);
DefectModel parse_defect_model(std::string_view text, std::string_view field);

// The weight the harness places at kernel row h >= kernel_height (output channel o, input channel c, column kx) of
// a deconvolution's blocked weights, past the real rows, so that the stride-hole read is deterministic and its value
// known: even, non-zero, in [-62, 62] (the pre-VNNI kernels' int16 pair sums stay exact; never 0, which would make
// the defect invisible). A pure function; fused/onednn also fills any tail byte t it cannot place as
// stride_hole_tail_weight(0, 0, 0, t).
int8_t stride_hole_tail_weight(int32_t o, int32_t c, int32_t h, int32_t kx);

// The codes fusediff places after a oneDNN source buffer, so that a kernel reading past the input reads known values
// (`count` of them after the input's last code, in the input's type `u8` or int8 as the library sees it): a pure
// function of the position, never all the zero point (that would hide a read past the input).
inline constexpr size_t kSourceTailBytes = 256;
int32_t source_tail_code(size_t position, bool u8);

// The input column each (output column, kernel column) of a transposed convolution reads in oneDNN 2.6's
// jit_uni_deconv kernel (jit_uni_x8s8s32x_deconvolution.cpp: init_conf's register blocks, generate's block calls
// with their l_overflow / r_overflow, compute_ker's get_ow_start / get_ow_end), at [ox * kernel_width + kx]: -1
// where it computes nothing, else (ox + l_pad - kx * dilation) / stride, which may lie past the row. `registers`:
// 12, 14 with VNNI; `block`: the oc block (8 avx2, 4 sse41); `signed_or_zero_point`: an s8 source or a source
// zero-point attribute (the kernel then visits every column of a block). Empty when the kernel finds no block width.
std::vector<int32_t> jit_uni_deconv_column_reads(const ConvCase& conv, int32_t registers, int32_t block,
                                                 bool signed_or_zero_point);

// How the library was called on the draw, where a rule depends on it (the draw's formulation). The defaults are
// fusediff's one formulation on main: a source zero-point attribute set, the source type the draw's own.
struct DefectCallAttributes {
  bool source_zero_point_attribute = true;  // a source zero-point attribute was set (of any value, 0 included)
  std::optional<ScalarType> source_type;    // the source type the library saw; nullopt: the draw's input type
  bool extended_input = false;              // an output padding passed as an input extended by zero-point rows/columns
};

struct KnownDefect {
  std::string id;
  LedgerKind kind = LedgerKind::known_defect;
  std::string library;          // e.g. "oneDNN"
  std::string version_min;      // dotted numbers, inclusive: "2.6.0"
  std::string version_max;      // inclusive: "2.6.3"
  // Globs over the ISA the library dispatched to (its own name, e.g. "avx2"; oneDNN: the effective ISA under
  // DNNL_MAX_CPU_ISA); empty: any. For implementations whose name does not say the ISA (oneDNN's gemm ones).
  std::vector<std::string> isas;
  // Globs ('*': any run of characters) over the implementation string of the run that computed the draw
  // (fused::RunInfo, e.g. "conv: jit_deconvolution:avx512_core_vnni"); one matching is enough.
  std::vector<std::string> implementations;
  DefectRule rule = DefectRule::jit_deconv_single_block_output_padding;
  int32_t registers = 0;        // jit_deconv_single_block_output_padding: the register budget (30 with VNNI, 28 without);
                                // jit_uni_deconv_columns: 14 with VNNI, 12 without
  int32_t block = 0;            // jit_deconv_stride_hole, jit_uni_deconv_columns: the ic and oc block (16 avx512, 8 avx2, 4 sse41)
  std::optional<ScalarType> source;  // source_as_passed: uint8 or int8 as the library saw it; unset: either
  std::optional<ConvOp> op;          // source_as_passed: the draw's op; unset: either
  std::optional<bool> weights_vector;  // source_as_passed: see the rule; unset: either
  DefectModel model = DefectModel::drop_last_input_column;
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
// Whether no kernel row of a Conv2D reaches the input on output row oy: every input row oy * stride_height -
// padding_top + ky * dilation_height lies outside [0, input_height) (oneDNN's brgconv then has an empty kh range).
bool is_empty_kernel_range_row(const ConvCase& conv, int32_t oy);
// The same under the draw's formulation (model/formulation.h), as the library saw it: call_attributes below.
bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const Formulation& formulation);
// How a draw of `conv` under `formulation` reaches the library (source_as_passed: the source type, whether a source
// zero-point attribute is set; whether an output padding is passed as an extended input).
DefectCallAttributes call_attributes(const Formulation& formulation, const ConvCase& conv);
// Whether no kernel row reaches output row oy of a transposed convolution: no ky in [0, kernel_height) with
// oy + padding_top - ky * dilation_height a multiple of stride_height whose quotient lies in [0, input_height).
bool is_stride_hole_row(const ConvCase& conv, int32_t oy);
// oneDNN 2.6 jit deconvolution's unrolled output width ur_w for this geometry (0: the kernel finds none and refuses
// the shape), from its blocking rule (jit_avx512_core_x8s8s32x_deconvolution.cpp, init_conf).
int32_t jit_deconv_block_width(int32_t registers, const ConvCase& conv);
// Whether one sample is the defect: the defect changes this output (the model's y differs from the reference's),
// the library's output is not the reference's, and it is the model's within `tolerance` LSB (the case's own bound:
// the model runs the reference's arithmetic, which is judged under that bound). Anything else is judged as usual.
bool explained_by_defect(int32_t y_ref, int32_t y_fused, int32_t y_model, int64_t tolerance);
// The draw as the entry's model changes it, in place: its input and its conv (kernel rows, weights, padding, or the
// accumulation rule); the reference then runs on it unchanged.
// A model of the library's accumulation first gives the draw the library's view of it (an output padding passed as
// an extended input: `call`), since that arithmetic sees the added zero-point codes.
void apply_defect_model(const KnownDefect& d, ConvCase* conv, std::vector<int32_t>* input,
                        const DefectCallAttributes& call = {});

}  // namespace fusediff

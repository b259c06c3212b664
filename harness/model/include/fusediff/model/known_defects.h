#pragma once
// The known-defect ledger: library defects fusediff has explained down to their cause, as data
// (fused/onednn/known_defects.json, format "fusediff-known-defects/1"; harness/tables reads it). A compared sample
// counts as an entry's known defect only when
//   - the library, its version and the implementation that computed the draw match the entry,
//   - the draw's geometry meets the entry's rule, and
//   - the fused output equals, within the case's tolerance, the entry's model of the defect: the reference's own
//     arithmetic on the draw as the defect changes it, where that differs from the reference's answer.
// Anything else still fails, so the ledger cannot hide a new bug. std only.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/formulation.h"

namespace fusediff {

inline constexpr const char* kKnownDefectsFormat = "fusediff-known-defects/1";

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
};
std::string_view to_string(DefectRule r);
bool parse_defect_rule(std::string_view text, DefectRule* out);

// What the defect does to a draw, in the reference's terms.
enum class DefectModel {
  // The taps of the last input column (ix = input_width - 1) contribute nothing, zero-point compensation included:
  // the reference on the draw with those inputs set to the input zero point.
  drop_last_input_column,
  // The kernel extended to stride_height rows, rows kernel_height .. stride_height - 1 holding
  // stride_hole_tail_weight (what fused/onednn writes after the real rows of the weights buffer it owns, at the
  // blocked layout's offsets of those rows), and padding_bottom raised by stride_height - kernel_height (the output
  // keeps its size). Only the rows no kernel row reaches change: each gets source row ih_max times the tail row
  // kh_lo = (oy + padding_top) mod stride_height, as (x - zx) * w like every tap.
  stride_hole_tail_rows,
};
std::string_view to_string(DefectModel m);
bool parse_defect_model(std::string_view text, DefectModel* out);

// The weight the harness places at kernel row h >= kernel_height (output channel o, input channel c, column kx) of
// a deconvolution's blocked weights, past the real rows, so that the stride-hole read is deterministic and its value
// known: even, non-zero, in [-62, 62] (the pre-VNNI kernels' int16 pair sums stay exact; never 0, which would make
// the defect invisible). A pure function; fused/onednn also fills any tail byte t it cannot place as
// stride_hole_tail_weight(0, 0, 0, t).
int8_t stride_hole_tail_weight(int32_t o, int32_t c, int32_t h, int32_t kx);

// How the library was called on the draw, where a rule depends on it (the draw's formulation). The defaults are
// fusediff's one formulation on main: a source zero-point attribute set, the source type the draw's own.
struct DefectCallAttributes {
  bool source_zero_point_attribute = true;  // a source zero-point attribute was set (of any value, 0 included)
  std::optional<ScalarType> source_type;    // the source type the library saw; nullopt: the draw's input type
  bool extended_input = false;              // an output padding passed as an input extended by zero-point rows/columns
};

struct KnownDefect {
  std::string id;
  std::string library;          // e.g. "oneDNN"
  std::string version_min;      // dotted numbers, inclusive: "2.6.0"
  std::string version_max;      // inclusive: "2.6.3"
  // Globs ('*': any run of characters) over the implementation string of the run that computed the draw
  // (fused::RunInfo, e.g. "conv: jit_deconvolution:avx512_core_vnni"); one matching is enough.
  std::vector<std::string> implementations;
  DefectRule rule = DefectRule::jit_deconv_single_block_output_padding;
  int32_t registers = 0;        // jit_deconv_single_block_output_padding: the register budget (30 with VNNI, 28 without)
  int32_t block = 0;            // jit_deconv_stride_hole: the ic and oc block (16 avx512, 8 avx2, 4 sse41)
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
// The library, version and implementation conditions of an entry.
bool defect_applies(const KnownDefect& d, std::string_view library, std::string_view version,
                    std::string_view implementation);
// The entry's rule on the draw's geometry and on how the library was called on it.
bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call = {});
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
// The draw as the entry's model changes it, in place: its input and its conv (kernel rows, weights, padding); the
// reference then runs on it unchanged.
void apply_defect_model(const KnownDefect& d, ConvCase* conv, std::vector<int32_t>* input);

}  // namespace fusediff

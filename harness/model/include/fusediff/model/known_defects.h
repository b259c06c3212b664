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
};
std::string_view to_string(DefectRule r);
bool parse_defect_rule(std::string_view text, DefectRule* out);

// What the defect does to a draw, in the reference's terms.
enum class DefectModel {
  // The taps of the last input column (ix = input_width - 1) contribute nothing, zero-point compensation included:
  // the reference on the draw with those inputs set to the input zero point.
  drop_last_input_column,
};
std::string_view to_string(DefectModel m);
bool parse_defect_model(std::string_view text, DefectModel* out);

struct KnownDefect {
  std::string id;
  std::string library;          // e.g. "oneDNN"
  std::string version_min;      // dotted numbers, inclusive: "2.6.0"
  std::string version_max;      // inclusive: "2.6.3"
  // Globs ('*': any run of characters) over the implementation string of the run that computed the draw
  // (fused::RunInfo, e.g. "conv: jit_deconvolution:avx512_core_vnni"); one matching is enough.
  std::vector<std::string> implementations;
  DefectRule rule = DefectRule::jit_deconv_single_block_output_padding;
  int32_t registers = 0;        // the rule's register budget (jit_deconv_*: 30 with VNNI, 28 without)
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
// The entry's rule on the draw's geometry as the library sees it under the draw's formulation (model/formulation.h):
// an output padding passed as an input extended by zero-point columns leaves oneDNN a right padding >= 0. (The
// formulation also says whether oneDNN saw a source zero-point attribute and which source type.)
bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const Formulation& formulation = {});
// oneDNN 2.6 jit deconvolution's unrolled output width ur_w for this geometry (0: the kernel finds none and refuses
// the shape), from its blocking rule (jit_avx512_core_x8s8s32x_deconvolution.cpp, init_conf).
int32_t jit_deconv_block_width(int32_t registers, const ConvCase& conv);
// Whether one sample is the defect: the defect changes this output (the model's y differs from the reference's),
// the library's output is not the reference's, and it is the model's within `tolerance` LSB (the case's own bound:
// the model runs the reference's arithmetic, which is judged under that bound). Anything else is judged as usual.
bool explained_by_defect(int32_t y_ref, int32_t y_fused, int32_t y_model, int64_t tolerance);
// The draw's input as the entry's model changes it (the reference then runs on it unchanged).
std::vector<int32_t> apply_defect_model(const KnownDefect& d, const ConvCase& conv, const std::vector<int32_t>& input);

}  // namespace fusediff

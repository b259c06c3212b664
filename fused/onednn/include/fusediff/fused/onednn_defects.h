#pragma once
// oneDNN 2.6's defects and documented behaviours as the ledger's draw rules and models (model/known_defects.h): each
// rule names the draws a kernel computes wrongly, read from the kernel's source, and each model what it computes on
// them. The backend registers them (OneDnnBackend: DefectRules / DefectModels of model/backend.h); the oneDNN paths place the
// known bytes below where a kernel reads past a buffer. Pure functions of a draw; std and the model only.
//   rule jit_deconv_single_block_output_padding (parameter registers: 30 with VNNI, 28 without): jit_deconvolution
//     (avx512_core*): a ConvTranspose2D whose output padding exceeds its right padding (oneDNN sees r_pad =
//     padding_right - output_padding_width < 0, PyTorch's mapping), with ((kernel_width - 1) * dilation_width) mod
//     stride_width + (-r_pad) >= stride_width, computed in one register block (ur_w equals the output width);
//   rule jit_deconv_stride_hole (parameter block: 16 avx512, 8 avx2, 4 sse41): int8 jit deconvolution
//     (jit_deconvolution:avx512_core*, jit_uni_deconv:*) called with a u8 source and no source zero-point attribute:
//     a ConvTranspose2D with stride_height > kernel_height, no H dilation, oneDNN's t_pad = padding_top >= 0 and
//     b_pad = padding_bottom - output_padding_height >= 0 (kernel_height - 1 >= both), at least one output row no
//     kernel row reaches (is_stride_hole_row), one ic and one oc block. Each such row gets one spurious kernel row
//     read past the real weights (docs/onednn.md, "Stride-hole rows read past the weights"). More blocks read other
//     blocks' weights at padded-channel places: not modelled, judged as usual;
//   rule jit_uni_deconv_columns (registers: 12, 14 with VNNI; block: the oc block, 8 avx2, 4 sse41): jit_uni_deconv
//     (avx2, avx2_vnni, sse41): a ConvTranspose2D whose output columns the kernel's register blocks schedule
//     differently from the definition (jit_uni_deconv_column_reads), e.g. the last full block of a row reading
//     input column iw;
//   rule brgconv_empty_kernel_range (withheld): brgconv (avx512_core_vnni): a Conv2D with an output row whose every
//     kernel row falls in the padding (is_empty_kernel_range_row). The path withholds the draws of such a geometry
//     that also meet the library-side conditions (onednn_patterns.cpp BrgconvEmptyKernelRangeCrashes), since oneDNN
//     dies with SIGSEGV on them (docs/onednn.md, "brgconv: an empty kernel range crashes");
//   model stride_hole_tail_rows: the kernel extended to stride_height rows, rows kernel_height .. stride_height - 1
//     holding stride_hole_tail_weight (what the path writes after the real rows of the weights buffer it owns, at
//     the blocked layout's offsets of those rows), padding_bottom raised by stride_height - kernel_height (the output
//     keeps its size). Only the rows no kernel row reaches change: each gets source row ih_max times the tail row
//     kh_lo = (oy + padding_top) mod stride_height, as (x - zx) * w like every tap;
//   model jit_uni_deconv_columns: the input columns the jit_uni_deconv kernel reads (past the row: the next pixels in
//     memory, past the input: the source tail the path owns, source_tail_code), with that tail appended to the
//     draw's input so that the reference reads the same codes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/known_defects.h"

namespace fusediff::fused::onednn {

std::vector<DefectRuleKind> DefectRules();
std::vector<DefectModelKind> DefectModels();

// The weight the path places at kernel row h >= kernel_height (output channel o, input channel c, column kx) of a
// deconvolution's blocked weights, past the real rows, so that the stride-hole read is deterministic and its value
// known: even, non-zero, in [-62, 62] (the pre-VNNI kernels' int16 pair sums stay exact; never 0, which would make
// the defect invisible). A pure function; the path also fills any tail byte t it cannot place as
// stride_hole_tail_weight(0, 0, 0, t).
int8_t stride_hole_tail_weight(int32_t o, int32_t c, int32_t h, int32_t kx);

// The codes the path places after a source buffer, so that a kernel reading past the input reads known values
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
// oneDNN 2.6 jit deconvolution's unrolled output width ur_w for this geometry (0: the kernel finds none and refuses
// the shape), from its blocking rule (jit_avx512_core_x8s8s32x_deconvolution.cpp, init_conf).
int32_t jit_deconv_block_width(int32_t registers, const ConvCase& conv);
// Whether no kernel row reaches output row oy of a transposed convolution: no ky in [0, kernel_height) with
// oy + padding_top - ky * dilation_height a multiple of stride_height whose quotient lies in [0, input_height).
bool is_stride_hole_row(const ConvCase& conv, int32_t oy);
// Whether no kernel row of a Conv2D reaches the input on output row oy: every input row oy * stride_height -
// padding_top + ky * dilation_height lies outside [0, input_height) (brgconv then has an empty kh range).
bool is_empty_kernel_range_row(const ConvCase& conv, int32_t oy);

}  // namespace fusediff::fused::onednn

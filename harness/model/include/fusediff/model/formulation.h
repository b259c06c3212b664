#pragma once
// How a draw's arithmetic is handed to a library's API (oneDNN 2.6): independent choices, each a legitimate way to
// pass the SAME arithmetic, so that a library that breaks on one of them shows it. A draw whose formulation needs
// a property (a zero point of 0, one weight scale, 7-bit weights) is generated with that property
// (generators/conv_generator.h), so the reference computes every formulation's arithmetic from the draw alone.
// The default value is fusediff's original (and only, before formulations) way: what old replay strings mean.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusediff/model/conv_case.h"

namespace fusediff {

struct Formulation {
  // Zero-point attributes: present (runtime s32 values, also when 0) or absent. Absent only where the zero point
  // is 0: the draw's source zero point is the code that is 0 in the type passed to the library; the destination's
  // attribute stays present (falls back) when the case's own zero point is not 0.
  bool zero_points_absent = false;
  // Output scales: one per output channel (mask 1 << 1) or one common scale (mask 0; the draw has one weight scale).
  bool common_scales = false;
  // Output padding of a transposed convolution: a negative right/bottom padding (PyTorch's mapping) or the input
  // extended by zero-point columns/rows at its far end, with a non-negative padding.
  bool extended_input = false;
  // The source type the library sees. drawn: the draw's own; u8 / s8: a code of the other type is shifted by 128,
  // its zero point too (x - zx is unchanged).
  enum class Source { drawn, u8, s8 };
  Source source = Source::drawn;
  // Weights over the full s8 range [-128, 127] or 7-bit [-64, 63] (oneDNN's advice for CPUs without VNNI).
  bool seven_bit_weights = false;
  // Bias as s32 or as f32 holding the same integers exactly (|b| < 2^24; oneDNN converts an s32 bias to f32 and
  // adds it to fl32(acc) before the output scale, so both are the same arithmetic).
  bool f32_bias = false;

  friend bool operator==(const Formulation&, const Formulation&) = default;
};

// "zp:present/scales:per_channel/opad:negative_pad/src:drawn/wei:full/bias:s32": one DIMENSION:VALUE per choice,
// in this order. `with_output_padding` false leaves out opad (a draw without output padding, where it means nothing).
std::string format_formulation(const Formulation& f, bool with_output_padding = true);
// The inverse; a dimension left out keeps its default. Throws InputError naming `field`.
Formulation parse_formulation(std::string_view text, std::string_view field);
// The DIMENSION:VALUE items of a formatted formulation, for attribution per choice.
std::vector<std::string> formulation_items(std::string_view formatted);

// What a library sees of a draw's source under the formulation (the ledger's rules read it; the oneDNN paths pass
// exactly this): whether the source is passed as u8 (else s8), the shift of every code and of the zero point
// (0 or +-128), and whether the source zero-point attribute is present (absent only under zp:absent with a passed
// zero point of 0, which a zp:absent draw always has). `drawn_u8`: the draw's own source type is uint8.
struct SourceAsPassed {
  bool u8 = false;
  int32_t shift = 0;
  bool zero_point_attribute = true;
};
SourceAsPassed source_as_passed(const Formulation& f, bool drawn_u8, int32_t drawn_zero_point);

// Output padding as an input extended by zero-point rows/columns (Formulation::extended_input): e more input rows
// (columns) at the far end add e*stride output rows there, taken back by a bottom (right) padding of
// pad_end - opad + e*stride >= 0. {e_h, e_w}: {0, 0} unless a transposed convolution's output padding exceeds its
// padding and `extended_input` is set.
std::pair<int32_t, int32_t> output_padding_extension(const ConvCase& conv, bool extended_input);
// The draw as the library sees it then: its input extended by those rows/columns holding the zero point, the
// padding raised, no output padding. Exact arithmetic gives the same outputs (the added codes are the real value
// 0); an arithmetic that multiplies codes (int16 pair saturation) sees them. `input` null: the geometry alone.
void extend_for_output_padding(ConvCase* conv, std::vector<int32_t>* input, std::pair<int32_t, int32_t> extension);

}  // namespace fusediff

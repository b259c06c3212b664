#pragma once
// Random Conv2D cases for a convention. Draw d of case stream c is a whole conv case (shape, input
// quantization, per-channel weight scales sized so the accumulator spans the intermediate range and runs past
// it, weights, bias) plus one input tensor, all pure functions of (seed, c, d).
#include <cstdint>
#include <optional>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/formulation.h"

namespace fusediff::generators {

// Ranges of the random shapes (inclusive).
struct ConvShapeLimits {
  int32_t max_batch = 2;
  int32_t max_spatial = 10;
  int32_t max_channels = 8;
  int32_t max_kernel = 3;
  int32_t max_stride = 2;
  int32_t max_dilation = 2;
  // One output position (batch 1, 1x1 output): every sample of a draw is a channel's pivot. Targeted searches
  // use it so that each compared sample is an aimed one.
  bool single_output_position = false;
  int32_t min_output_channels = 1;
  int32_t max_output_channels = 0;  // 0: max_channels (a layernorm's long rows set it beyond)
  double transposed_share = 0.25;  // fraction of draws that are ConvTranspose2D
  // Weights over the full s8 range [-128, 127] (oneDNN's cases) instead of symmetric [-127, 127].
  bool full_range_weights = false;
  // One weight scale for every output channel (TFLite's per-tensor fully connected layer).
  bool per_tensor_weight_scale = false;
  // A library path's draws: each picks a formulation (model/formulation.h) from (seed, stream, draw) and has the
  // properties it needs (DrawFormulation). `formulation` fixes one for every draw instead (a replay string's).
  bool draw_formulations = false;
  std::optional<Formulation> formulation;
};

// The formulation of draw d: limits.formulation when set, else one drawn (each choice 1/2, from its own
// counter stream) when limits.draw_formulations, else the default. GenerateConvCase gives the draw what it needs:
//   zp:absent     the source zero point is the code that is 0 in the type passed (0, 128 for u8 passed as s8,
//                 -128 for s8 passed as u8);
//   scales:common one weight scale for every output channel (channel 0's);
//   wei:7bit      weights uniform in [-64, 63], their scales sized for that range.
Formulation DrawFormulation(uint64_t seed, uint64_t case_stream, uint32_t draw, const ConvShapeLimits& limits);

// The shape of draw d only (cheap: no tensors), so sample indices can be mapped to draws without building
// the tensors of earlier draws.
ConvCase GenerateConvShape(uint64_t seed, uint64_t case_stream, uint32_t draw, const ConvShapeLimits& limits = {});

// The full case of draw d: GenerateConvShape plus quantization, weights and bias. Always valid (validate()
// passes: no int32 accumulator overflow).
ConvCase GenerateConvCase(uint64_t seed, uint64_t case_stream, uint32_t draw, const Convention& convention,
                          const ConvShapeLimits& limits = {});

// The input codes of draw d (NHWC), uniform over the input type.
std::vector<int32_t> GenerateConvInput(uint64_t seed, uint64_t case_stream, uint32_t draw, const ConvCase& conv);

// Maps a case's sample index to (draw, output element): draws are consumed in order, each contributing all its
// output elements. Walks draw shapes from 0; cheap for the draw counts a run uses.
struct SampleLocation {
  uint32_t draw = 0;
  uint64_t first_sample = 0;  // sample index of the draw's output element 0
  uint64_t element = 0;       // output index within the draw
};
SampleLocation LocateSample(uint64_t seed, uint64_t case_stream, uint64_t sample, const ConvShapeLimits& limits = {});

}  // namespace fusediff::generators

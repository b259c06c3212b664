#pragma once
// Internal to the driver: what every conv-source comparison does per draw, shared by the built-in fused paths
// (driver.cpp) and a library path's.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

#include "fusediff/driver/driver.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/reference/reference.h"

namespace fusediff::driver::detail {

// A conv draw and the global sample indices [first, first + take) it contributes.
struct DrawBatch {
  uint32_t draw;
  uint64_t first;
  uint64_t take;
};

// This shard's draws of a case, in order. Another shard's draw only advances the global sample index: its size
// follows from its shape alone (GenerateConvShape), so sample indices stay the unsharded run's.
class ShardDraws {
 public:
  ShardDraws(const RunOptions& options, uint64_t stream, uint64_t total, const generators::ConvShapeLimits& limits = {},
             const Pattern& pattern = Pattern{})
      : seed_(options.seed), stream_(stream), total_(total), shard_index_(options.shard_index),
        shard_count_(options.shard_count), limits_(limits), pattern_(pattern) {}

  std::optional<DrawBatch> next() {
    while (produced_ < total_) {
      const uint32_t draw = next_draw_++;
      const uint64_t take = std::min<uint64_t>(
          pattern_output_geometry(pattern_, generators::GenerateConvShape(seed_, stream_, draw, limits_)).elements(),
          total_ - produced_);
      if (take == 0) continue;  // a pool wider than this draw's output: no sample
      const uint64_t first = produced_;
      produced_ += take;
      if (draw % shard_count_ == shard_index_) return DrawBatch{draw, first, take};
    }
    return std::nullopt;
  }

 private:
  uint64_t seed_, stream_, total_;
  uint32_t shard_index_, shard_count_;
  generators::ConvShapeLimits limits_;
  Pattern pattern_;
  uint64_t produced_ = 0;
  uint32_t next_draw_ = 0;
};

// Maps a case's sample index to (draw, element of the final tensor): draws are consumed in order, each contributing
// all its elements (ShardDraws' order).
inline generators::SampleLocation LocatePatternSample(uint64_t seed, uint64_t stream, uint64_t sample,
                                                      const generators::ConvShapeLimits& limits, const Pattern& pattern) {
  generators::SampleLocation location;
  for (;;) {
    const uint64_t outputs =
        pattern_output_geometry(pattern, generators::GenerateConvShape(seed, stream, location.draw, limits)).elements();
    if (sample < location.first_sample + outputs) {
      location.element = sample - location.first_sample;
      return location;
    }
    location.first_sample += outputs;
    ++location.draw;
  }
}

// The replay trace's description of output `element` of a draw: coordinates, shape, quantization, bias and the
// reference accumulator. Returns the coordinates.
inline ConvCase::OutputCoord TraceConvElement(ReplayTrace& trace, const ConvCase& conv, std::span<const int32_t> input,
                                              uint64_t element) {
  const ConvCase::OutputCoord coord = conv.output_coord(element);
  trace.n = coord.n;
  trace.oy = coord.oy;
  trace.ox = coord.ox;
  trace.k = coord.k;
  trace.conv_shape = describe(conv);
  trace.input_quant = format_quant_params(conv.input_quant());
  trace.weight_scale = conv.weight_scales()[static_cast<size_t>(coord.k)];
  trace.bias = conv.bias()[static_cast<size_t>(coord.k)];
  trace.acc_reference = reference::Conv2DAccumulator(conv, input, coord.n, coord.oy, coord.ox, coord.k);
  return coord;
}

}  // namespace fusediff::driver::detail

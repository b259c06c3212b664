#pragma once
// The reference side of a stage kind (model/stage_module.h): its exact evaluation on the whole tensor between two
// stages, every rounding by its declared rule. GraphReference (graph.h) runs the producer, then each stage's
// evaluation in pattern order; the boundary each stage writes is its model module's output_boundary. A kind's
// reference side registers once (register_reference_stage); the built-ins are listed in stage_registry.cpp.
#include <memory>
#include <span>
#include <vector>

#include "fusediff/model/pattern.h"
#include "fusediff/reference/graph.h"

namespace fusediff::reference {

// A tensor between two stages (NHWC); each element's y holds its current code.
struct GraphTensor {
  PatternGeometry shape;
  std::vector<GraphElement> e;
  size_t index(int32_t n, int32_t y, int32_t x, int32_t c) const {
    return ((static_cast<size_t>(n) * shape.height + y) * shape.width + x) * shape.channels + c;
  }
};

// The exact activation table packed per code (index code - qmin): y and the regions that follow from the code
// alone. Empty where the pattern has no activation.
struct ActivationLookup {
  int32_t qmin = 0;
  std::vector<int32_t> y_of;
  std::vector<RegionSet> regions_of;
};

// What a stage's evaluation reads besides its tensor.
struct StageInputs {
  const Pattern& pattern;
  const Convention& convention;  // the reference's
  const PatternDraw& draw;
  const StageOperands& operands;  // this stage's tensors (model/pattern.h)
  const ActivationLookup& activation;
  QuantParams in;  // the quantization of the tensor's codes
};

class ReferenceStage {
 public:
  virtual ~ReferenceStage() = default;
  virtual StageKind kind() const = 0;
  // Replaces `t` by the stage's output (codes at stage_module(kind).output_boundary). Throws InputError when the
  // draw does not fit the stage.
  virtual void Apply(const Stage& s, const StageInputs& in, GraphTensor& t) const = 0;
};

// InputError when the kind has no model module or its reference side is registered twice.
void register_reference_stage(std::unique_ptr<const ReferenceStage> stage);
// InputError naming the kind when it has no reference side.
const ReferenceStage& reference_stage(StageKind kind);

// acc -> code for every element: one Requantizer per output channel (the convention's variant and boundary).
void RequantizeTensor(GraphTensor& t, const Convention& c, MultiplierRule rule, float input_scale,
                      std::span<const float> weight_scales);

std::unique_ptr<const ReferenceStage> MakeActivationReference();
std::unique_ptr<const ReferenceStage> MakeAddReference();
std::unique_ptr<const ReferenceStage> MakePoolReference(bool average);
std::unique_ptr<const ReferenceStage> MakeFullyConnectedReference();
std::unique_ptr<const ReferenceStage> MakeBatchNormReference();
std::unique_ptr<const ReferenceStage> MakeMulReference();
std::unique_ptr<const ReferenceStage> MakeLayerNormReference();

}  // namespace fusediff::reference

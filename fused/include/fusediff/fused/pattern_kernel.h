#pragma once
// The built-in fused path of a pattern: the producer's int32 kernel and requantization (fused_kernel.h), then each
// stage as a production kernel computes it (TFLite Add / AveragePool / MaxPool / FullyConnected in fixed point,
// ONNX Runtime's MLAS arithmetic in binary32: stages.h), the activation through its table. Its fusion says which
// boundaries it keeps (model/pattern.h Fusion). No I/O.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused {

class PatternKernel {
 public:
  // Null with *unsupported_reason set when the built-in path cannot run this case (a table kind other than lut
  // outside conv2d+act, a boundary type the table cannot index, a fusion the pattern does not offer).
  // An invalid pattern or convention throws InputError.
  static std::unique_ptr<PatternKernel> Create(const CaseSpec& spec, std::string* unsupported_reason);
  ~PatternKernel();

  // y: one code per element of the final tensor (pattern_output_geometry of draw.conv). Throws std::runtime_error
  // where TryRun refuses the draw.
  void Run(const PatternDraw& draw, std::span<int32_t> y) const;
  // Run, or false with *rejected set where the declared rules refuse the draw (a BatchNorm fold that overflows).
  bool TryRun(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) const;

 private:
  struct Impl;
  explicit PatternKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusediff::fused

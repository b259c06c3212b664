#pragma once
// The fused-path interface: what every path under test offers the comparison loop. A new backend is one
// implementation of this class and one factory; the driver's comparison, replay and mutant search use nothing else.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused {

class FusedPath {
 public:
  virtual ~FusedPath() = default;
  // One draw: y[i] for every element of pattern_output_geometry(spec.pattern, draw.conv). Returns false and sets
  // *rejected when the path refuses this draw (a library's own check); such samples are counted, not compared.
  virtual bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) = 0;
  // The implementations the path used so far (a library's kernel names, distinct); none for the built-in kernels.
  virtual std::vector<std::string> implementations() const { return {}; }
  // The int8 weight codes its draws may use (oneDNN takes the whole s8 range).
  virtual WeightRange weight_range() const { return WeightRange::symmetric; }
  // Whether Run may be called from several threads at once (a library that parallelises itself says no).
  virtual bool concurrent() const { return true; }
};

// The built-in fixed-point paths: conv2d+act through fused_kernel.h (the case's table kind, its external table,
// its mutant), every other pattern through pattern_kernel.h. Null with *unsupported_reason set where they cannot
// run the case; InputError for an invalid one.
std::unique_ptr<FusedPath> CreateBuiltInPath(const CaseSpec& spec, std::string* unsupported_reason);

}  // namespace fusediff::fused

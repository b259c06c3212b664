#pragma once
// Internal to the fused library: LayerNorm over rows of binary32 values in a declared NormalizationOrder
// (model/summation_order.h), as a production kernel runs it, and ONNX QuantizeLinear. The layernorm stage kernel and
// the pattern kernel's layernorm fusions share it. Its own loops: it never calls the reference.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fusediff/model/quant.h"
#include "fusediff/model/summation_order.h"

namespace fusediff::fused {

// The mutants' variants of the arithmetic (each false in the declared kernel):
//   drop_eps:       s = fl32(sqrt(var)) (eps never added);
//   eps_after_sqrt: s = fl32(fl32(sqrt(var)) + eps);
//   mean_over_rows: feature j's mean over every row of the call (the wrong axis) replaces each row's mean.
struct LayerNormDefects {
  bool drop_eps = false;
  bool eps_after_sqrt = false;
  bool mean_over_rows = false;
};

class LayerNormRows {
 public:
  LayerNormRows(const NormalizationOrder& order, float eps, LayerNormDefects defects = {})
      : order_(order), eps_(eps), defects_(defects) {}
  // y[r features + j] = LayerNorm(x's row r)_j gamma_j + beta_j for every row of x (x.size() a multiple of
  // `features`, gamma and beta of `features` values, y of x's size).
  void Run(std::span<const float> x, size_t features, std::span<const float> gamma, std::span<const float> beta,
           std::span<float> y) const;

 private:
  NormalizationOrder order_;
  float eps_;
  LayerNormDefects defects_;
};

}  // namespace fusediff::fused

#pragma once
// Rigorous bounds on the rounding error of a model's float tensors: for every element, how far any legal evaluation
// of the model's arithmetic in binary32 (binary64 for double tensors) can be from the exact real value. The model is
// evaluated in double, carrying each element's value and two error bounds (docs/bisect.md, "Float verdicts", derives
// every rule from N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002):
//   - base: the graph as written, each op one kernel, every sum in any order, with or without FMA;
//   - legal: the same graph under every rewrite counted as legal (LegalRewrites): sums merged across ops and
//     reordered, BatchNormalization folded into the preceding Conv/Gemm/MatMul (its roundings in the declared precision
//     bounded), the LayerNormalization pattern fused into one kernel. legal >= base everywhere.
// Two legal evaluations differ by at most base + legal of the one written as is and the rewritten one, so a bisect
// step that moves an element by more than that is not a legal rewrite.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fusediff/onnx/onnx_io.h"

namespace fusediff::bisect {

// gamma_k = k u / (1 - k u) (Higham eq. (3.8)); +inf where k u >= 1.
double Gamma(double k, double u);

// The unit roundoff of a float type the evaluator covers (binary32 2^-24, binary64 2^-53); 0 for the others.
double UnitRoundoff(onnx_io::DType type);

// A tensor's elements (row-major): value estimates the exact value; base and legal bound |computed - exact| (above).
// Integer tensors (shapes, indices) are exact: base = legal = 0.
struct BoundedTensor {
  std::string name;
  onnx_io::DType type = onnx_io::DType::float32;
  std::vector<int64_t> dims;
  std::vector<double> value, base, legal;
  std::string uncovered;  // why it has no bound ("op Softmax ('probs') is not covered"); empty when bounded
};

// The op types the evaluator covers ("com.microsoft.Gelu" off the default domain), and the rewrites it counts as
// legal, one line each (docs/bisect.md lists both).
const std::vector<std::string>& CoveredOps();
const std::vector<std::string>& LegalRewrites();

// A runtime's own error for a function it approximates: |F(x) - f(x)| <= rel |f(x)| + abs for every binary32 x
// (measured exhaustively on ONNX Runtime 1.30's kernels by bench/ort_activation_error). Null for an op without one.
struct RuntimeError {
  const char* op;
  double rel, abs;
};
const RuntimeError* RuntimeErrorOf(const std::string& op);

class BoundEvaluator {
 public:
  explicit BoundEvaluator(onnx_io::GraphContent graph);
  // One input set (one tensor per model input, by name). Returns the tensors named in `wanted`, in that order. A
  // tensor is dropped after its last use; where the live tensors would hold more than `max_bytes` (0: no limit), the
  // rest of the graph is left without a bound, named so.
  std::vector<BoundedTensor> Evaluate(const std::vector<onnx_io::Tensor>& feeds, const std::vector<std::string>& wanted,
                                      uint64_t max_bytes = 0) const;
  // Why `tensor` has no bound whatever the inputs (an op on its path the evaluator does not cover), or "".
  std::string StaticallyUncovered(const std::string& tensor) const;

 private:
  onnx_io::GraphContent graph_;
  std::map<std::string, size_t> consumers_;  // per tensor: how many node inputs and graph outputs read it
  std::map<std::string, size_t> last_use_;   // per tensor: the last node (index) that reads it
  std::map<std::string, std::string> static_uncovered_;
  // The LayerNormalization pattern written out in ops, by its last Add's output: a fused kernel may replace it.
  struct LayerNormPattern {
    std::string x, scale, bias;
    int64_t axis = -1;
    double eps = 0;
  };
  std::map<std::string, LayerNormPattern> layer_norms_;
  void FindLayerNorms();
};

}  // namespace fusediff::bisect

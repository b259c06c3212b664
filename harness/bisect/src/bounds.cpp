// The rounding-error bound evaluator (bounds.h). Every rule is derived in docs/bisect.md ("Float verdicts"); the
// comments name the result each one rests on. Notation: u the unit roundoff of the tensor's type, gamma_k = k u /
// (1 - k u) (Higham eq. (3.8)); per element, value v estimates the exact x, e bounds |x^ - x| for the computed x^.
#include "fusediff/bisect/bounds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>

#include "fusediff/model/errors.h"
#include "fusediff/reference/summation.h"

namespace fusediff::bisect {

double Gamma(double k, double u) {
  const double ku = k * u;
  return ku >= 1 ? INFINITY : ku / (1 - ku);
}

double UnitRoundoff(onnx_io::DType type) {
  if (type == onnx_io::DType::float32) return 0x1p-24;
  if (type == onnx_io::DType::float64) return 0x1p-53;
  return 0;
}

namespace {

using onnx_io::DType;
using onnx_io::GraphNode;
using onnx_io::Tensor;

// The double evaluation's own error: |v - x| <= 2^-28 e for every element (each rule's double counterpart has the
// same form with 2^-53 in place of u >= 2^-24, and every stated runtime error exceeds binary64's: docs), so the
// exact magnitude is at most |v| + 2^-28 e and the computed one |v| + (1 + 2^-28) e.
constexpr double kExactSlack = 0x1p-28;
// The bounds are themselves computed in double: each is raised by 2^-30 relative, which covers the rounding of sums
// of up to 2^22 non-negative terms (gamma_n of binary64).
constexpr double kUp = 1 + 0x1p-30;
// Lipschitz constant of gelu on all of R: max |Phi(x) + x phi(x)|, at x = sqrt 2: 1.12890...
constexpr double kGeluLipschitz = 1.1290;

// Thrown while evaluating an op: the tensor gets no bound, with this reason.
struct Uncovered : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The output as one flattened sum, in the legal mode (a Conv, Gemm or MatMul, maybe merged with Adds or folded with
// a BatchNormalization / constant Mul): |computed - exact| <= gamma_rounds (prod + bias) + p, per element. Kept
// only where a following op may merge or fold it (its producer's single consumer).
struct Sum {
  double rounds = 0;
  bool foldable = false;  // the products of a Conv/Gemm/MatMul with constant weights, nothing merged yet
  std::vector<double> prod, bias, bias_value, p;  // sum of |products|, |bias|, the bias's value, propagated error
};

// A tensor during evaluation. Modes: 0 base, 1 legal.
struct Val {
  DType type = DType::float32;
  std::vector<int64_t> dims;
  std::vector<double> v;
  std::vector<double> e[2];
  std::optional<Sum> sum;
  bool constant = false;  // an initializer or computed from them only
  // Known for every element, exact and computed alike: both >= 0 (a square, a sum of squares, a Relu), and >= floor
  // where floor > 0 (such a sum plus a positive constant, its square root). A Sqrt or a divisor of such a tensor stays
  // bounded where its error interval alone would reach 0.
  bool nonneg = false;
  double floor = 0;
  std::string uncovered;
  size_t size() const { return v.size(); }
};

size_t Count(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

double U(const Val& x) { return UnitRoundoff(x.type); }
// The smallest absolute error of one rounded product (half the smallest subnormal step): Higham §2.2, the model with underflow.
double Tiny(const Val& x) { return x.type == DType::float64 ? 0x1p-1074 : 0x1p-150; }

double Mag(const Val& x, size_t i, int m) { return std::fabs(x.v[i]) + x.e[m][i] * (1 + kExactSlack); }
double ExactMag(const Val& x, size_t i, int m) { return std::fabs(x.v[i]) + x.e[m][i] * kExactSlack; }

Val Shaped(DType type, std::vector<int64_t> dims) {
  Val y;
  y.type = type;
  y.dims = std::move(dims);
  const size_t n = Count(y.dims);
  y.v.assign(n, 0);
  y.e[0].assign(n, 0);
  y.e[1].assign(n, 0);
  return y;
}

Val FromTensor(const Tensor& t, bool constant) {
  Val y = Shaped(t.type, t.dims);
  for (size_t i = 0; i < y.size(); ++i) y.v[i] = t.value(i);
  y.constant = constant;
  return y;
}

void RequireFloat(const Val& x, const std::string& what) {
  if (UnitRoundoff(x.type) == 0) {
    throw Uncovered(what + " holds " + onnx_io::to_string(x.type) + " (the bounds cover float32 and float64)");
  }
}

int64_t IntAttr(const GraphNode& n, const std::string& name, int64_t fallback) {
  const auto* a = n.Find(name);
  return a != nullptr ? a->i : fallback;
}
float FloatAttr(const GraphNode& n, const std::string& name, float fallback) {
  const auto* a = n.Find(name);
  return a != nullptr ? a->f : fallback;
}
std::vector<int64_t> IntsAttr(const GraphNode& n, const std::string& name) {
  const auto* a = n.Find(name);
  return a != nullptr ? a->ints : std::vector<int64_t>{};
}

// The integer values of a small exact tensor (shapes, axes).
std::vector<int64_t> Ints(const Val& x) {
  std::vector<int64_t> out;
  for (double d : x.v) out.push_back(static_cast<int64_t>(d));
  return out;
}

int64_t Axis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) throw Uncovered("axis " + std::to_string(axis) + " out of range");
  return axis < 0 ? axis + r : axis;
}

std::vector<size_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<size_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * static_cast<size_t>(dims[k]);
  return s;
}

// Numpy broadcasting: the output dims and, per input, the flat index it reads for each output element.
struct Broadcast {
  std::vector<int64_t> dims;
  std::vector<std::vector<size_t>> index;
};
Broadcast BroadcastOf(const std::vector<const Val*>& ins) {
  Broadcast b;
  size_t rank = 0;
  for (const Val* x : ins) rank = std::max(rank, x->dims.size());
  b.dims.assign(rank, 1);
  for (const Val* x : ins) {
    for (size_t k = 0; k < x->dims.size(); ++k) {
      int64_t& d = b.dims[rank - x->dims.size() + k];
      const int64_t xd = x->dims[k];
      if (xd != 1 && d != 1 && xd != d) throw Uncovered("shapes that do not broadcast");
      if (xd != 1) d = xd;
    }
  }
  const size_t n = Count(b.dims);
  for (const Val* x : ins) {
    std::vector<size_t> stride(rank, 0);
    const std::vector<size_t> own = Strides(x->dims);
    for (size_t k = 0; k < x->dims.size(); ++k) {
      if (x->dims[k] != 1) stride[rank - x->dims.size() + k] = own[k];
    }
    std::vector<size_t> idx(n);
    std::vector<int64_t> at(rank, 0);
    for (size_t i = 0; i < n; ++i) {
      size_t flat = 0;
      for (size_t k = 0; k < rank; ++k) flat += static_cast<size_t>(at[k]) * stride[k];
      idx[i] = flat;
      for (size_t k = rank; k-- > 0;) {
        if (++at[k] < b.dims[k]) break;
        at[k] = 0;
      }
    }
    b.index.push_back(std::move(idx));
  }
  return b;
}

// What an op sees: its node, its inputs (null where an optional input is omitted), whether its output has a single
// consumer (so a fusion may remove it), and its outputs to fill.
struct OpCall {
  const GraphNode& node;
  std::vector<const Val*> in;
  std::function<bool(const std::string&)> single_consumer;
  std::vector<Val>& out;
  const Val& In(size_t k) const {
    if (k >= in.size() || in[k] == nullptr) throw Uncovered(node.op + ": input " + std::to_string(k) + " is missing");
    return *in[k];
  }
  bool Has(size_t k) const { return k < in.size() && in[k] != nullptr; }
};

// ---- data movement: exact, the error moves with the element --------------------------------------------------------

Val Gathered(const Val& x, std::vector<int64_t> dims, const std::vector<size_t>& from) {
  Val y = Shaped(x.type, std::move(dims));
  for (size_t i = 0; i < from.size(); ++i) {
    y.v[i] = x.v[from[i]];
    y.e[0][i] = x.e[0][from[i]];
    y.e[1][i] = x.e[1][from[i]];
  }
  y.constant = x.constant;
  return y;
}

Val Reshaped(const Val& x, std::vector<int64_t> dims) {
  std::vector<size_t> from(x.size());
  std::iota(from.begin(), from.end(), size_t{0});
  if (Count(dims) != x.size()) throw Uncovered("a reshape that changes the element count");
  return Gathered(x, std::move(dims), from);
}

void Identity(OpCall& c) { c.out[0] = Reshaped(c.In(0), c.In(0).dims); }

void Reshape(OpCall& c) {
  const Val& x = c.In(0);
  std::vector<int64_t> shape = Ints(c.In(1));
  int64_t known = 1;
  int infer = -1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0 && IntAttr(c.node, "allowzero", 0) == 0) shape[k] = x.dims.at(k);
    if (shape[k] == -1) infer = static_cast<int>(k);
    else known *= shape[k];
  }
  if (infer >= 0) shape[static_cast<size_t>(infer)] = known == 0 ? 0 : static_cast<int64_t>(x.size()) / known;
  c.out[0] = Reshaped(x, shape);
}

void Flatten(OpCall& c) {
  const Val& x = c.In(0);
  const int64_t axis = IntAttr(c.node, "axis", 1);
  const size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(x.dims.size()) : axis);
  int64_t outer = 1;
  for (size_t k = 0; k < a && k < x.dims.size(); ++k) outer *= x.dims[k];
  c.out[0] = Reshaped(x, {outer, outer == 0 ? 0 : static_cast<int64_t>(x.size()) / outer});
}

std::vector<int64_t> AxesOf(const OpCall& c, size_t input) {
  return c.Has(input) ? Ints(c.In(input)) : IntsAttr(c.node, "axes");
}

void Squeeze(OpCall& c) {
  const Val& x = c.In(0);
  std::vector<int64_t> axes = AxesOf(c, 1);
  for (int64_t& a : axes) a = Axis(a, x.dims.size());
  std::vector<int64_t> dims;
  for (size_t k = 0; k < x.dims.size(); ++k) {
    const bool listed = std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) != axes.end();
    if (!(listed || (axes.empty() && x.dims[k] == 1))) dims.push_back(x.dims[k]);
  }
  c.out[0] = Reshaped(x, dims);
}

void Unsqueeze(OpCall& c) {
  const Val& x = c.In(0);
  std::vector<int64_t> axes = AxesOf(c, 1);
  const size_t rank = x.dims.size() + axes.size();
  for (int64_t& a : axes) a = Axis(a, rank);
  std::vector<int64_t> dims;
  size_t next = 0;
  for (size_t k = 0; k < rank; ++k) {
    const bool listed = std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) != axes.end();
    dims.push_back(listed ? 1 : x.dims.at(next++));
  }
  c.out[0] = Reshaped(x, dims);
}

void Transpose(OpCall& c) {
  const Val& x = c.In(0);
  std::vector<int64_t> perm = IntsAttr(c.node, "perm");
  if (perm.empty()) {
    for (size_t k = x.dims.size(); k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  }
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(x.dims.at(static_cast<size_t>(p)));
  const std::vector<size_t> in_stride = Strides(x.dims);
  std::vector<size_t> from(x.size());
  std::vector<int64_t> at(dims.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) {
    size_t flat = 0;
    for (size_t k = 0; k < dims.size(); ++k) flat += static_cast<size_t>(at[k]) * in_stride[static_cast<size_t>(perm[k])];
    from[i] = flat;
    for (size_t k = dims.size(); k-- > 0;) {
      if (++at[k] < dims[k]) break;
      at[k] = 0;
    }
  }
  c.out[0] = Gathered(x, dims, from);
}

void Concat(OpCall& c) {
  const Val& first = c.In(0);
  const size_t axis = static_cast<size_t>(Axis(IntAttr(c.node, "axis", 0), first.dims.size()));
  std::vector<int64_t> dims = first.dims;
  dims[axis] = 0;
  for (const Val* x : c.in) dims[axis] += x->dims.at(axis);
  Val y = Shaped(first.type, dims);
  y.constant = true;
  const size_t outer = Count(std::vector<int64_t>(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(axis)));
  size_t at = 0;
  for (size_t o = 0; o < outer; ++o) {
    for (const Val* x : c.in) {
      const size_t block = x->size() / std::max<size_t>(outer, 1);
      for (size_t k = 0; k < block; ++k, ++at) {
        y.v[at] = x->v[o * block + k];
        y.e[0][at] = x->e[0][o * block + k];
        y.e[1][at] = x->e[1][o * block + k];
      }
    }
  }
  for (const Val* x : c.in) y.constant = y.constant && x->constant;
  c.out[0] = std::move(y);
}

void Shape(OpCall& c) {
  const Val& x = c.In(0);
  Val y = Shaped(DType::int64, {static_cast<int64_t>(x.dims.size())});
  for (size_t k = 0; k < x.dims.size(); ++k) y.v[k] = static_cast<double>(x.dims[k]);
  y.constant = true;
  c.out[0] = std::move(y);
}

void Constant(OpCall& c) {
  const auto* value = c.node.Find("value");
  if (value == nullptr || !value->t) throw Uncovered("Constant without a tensor value of a supported type");
  c.out[0] = FromTensor(*value->t, true);
}

void Gather(OpCall& c) {
  const Val& data = c.In(0);
  const Val& idx = c.In(1);
  const size_t axis = static_cast<size_t>(Axis(IntAttr(c.node, "axis", 0), data.dims.size()));
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis));
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.dims.end());
  const size_t outer = Count(std::vector<int64_t>(data.dims.begin(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis)));
  const size_t inner = Strides(data.dims)[axis];
  const int64_t rows = data.dims[axis];
  std::vector<size_t> from;
  for (size_t o = 0; o < outer; ++o) {
    for (double d : idx.v) {
      int64_t r = static_cast<int64_t>(d);
      if (r < 0) r += rows;
      if (r < 0 || r >= rows) throw Uncovered("Gather index out of range");
      for (size_t k = 0; k < inner; ++k) from.push_back((o * static_cast<size_t>(rows) + static_cast<size_t>(r)) * inner + k);
    }
  }
  Val y = Gathered(data, dims, from);
  y.constant = data.constant && idx.constant;
  c.out[0] = std::move(y);
}

// Cast: to the same type, or an integer to a float type that holds it exactly.
void Cast(OpCall& c) {
  const Val& x = c.In(0);
  const DType to = static_cast<DType>(IntAttr(c.node, "to", 1));
  if (!onnx_io::is_supported_dtype(static_cast<int32_t>(to))) throw Uncovered("Cast to an unsupported type");
  const bool exact = to == x.type || (UnitRoundoff(x.type) == 0 && UnitRoundoff(to) > 0 &&
                                      std::all_of(x.v.begin(), x.v.end(), [&](double d) {
                                        return std::fabs(d) <= 1 / UnitRoundoff(to);
                                      }));
  if (!exact) throw Uncovered("Cast from " + onnx_io::to_string(x.type) + " to " + onnx_io::to_string(to));
  Val y = Reshaped(x, x.dims);
  y.type = to;
  c.out[0] = std::move(y);
}

// ---- elementwise functions ------------------------------------------------------------------------------------------

// The runtime errors of ONNX Runtime 1.30's float kernels: bench/ort_activation_error over every binary32 input
// (docs/bisect.md gives the table). Pow2 is Pow(x, 2): correctly rounded (rel <= u).
constexpr RuntimeError kRuntimeErrors[] = {
    {"Sigmoid", 2.99 * 0x1p-24, 1.78e-7},
    {"Tanh", 5.46 * 0x1p-24, 1.09e-19},
    {"Erf", 1.40 * 0x1p-24, 4.0e-20},
    {"com.microsoft.Gelu", 2.26 * 0x1p-24, 8.27e-8},
    {"Pow2", 1.0 * 0x1p-24, 0},
};

// A bell-shaped derivative (sigmoid, tanh, erf: even, decreasing in |x|) bounds f on [lo, hi] by its value at the
// point of the interval closest to 0.
double Closest0(double lo, double hi) { return lo > 0 ? lo : (hi < 0 ? hi : 0.0); }
double SigmoidSlope(double lo, double hi) {
  const double s = 1 / (1 + std::exp(-std::fabs(Closest0(lo, hi))));
  return s * (1 - s);
}
double TanhSlope(double lo, double hi) {
  const double t = std::tanh(Closest0(lo, hi));
  return 1 - t * t;
}
double ErfSlope(double lo, double hi) {
  const double x = Closest0(lo, hi);
  return 1.1283791670955126 * std::exp(-x * x);
}
double GeluSlope(double, double) { return kGeluLipschitz; }
double UnitSlope(double, double) { return 1; }

double SigmoidOf(double x) { return 1 / (1 + std::exp(-x)); }
double GeluOf(double x) { return 0.5 * x * std::erfc(-x * 0.70710678118654752440); }
double ReluOf(double x) { return x > 0 ? x : 0.0; }
double NegOf(double x) { return -x; }
double AbsOf(double x) { return std::fabs(x); }

// y = f(x) elementwise: |f(x^) - f(x)| <= L |x^ - x| (L over the interval x^ and x lie in), plus the runtime's error
// for f at x^: rel |F| + abs with |F| <= |f(x)| + L e.
using Slope = std::function<double(double, double)>;
void Lipschitz(OpCall& c, const std::function<double(double)>& f, const Slope& slope, double rel, double abs) {
  const Val& x = c.In(0);
  RequireFloat(x, c.node.op + " input");
  Val y = Shaped(x.type, x.dims);
  for (size_t i = 0; i < x.size(); ++i) {
    y.v[i] = f(x.v[i]);
    for (int m = 0; m < 2; ++m) {
      const double r = x.e[m][i] * (1 + kExactSlack);
      const double lipschitz = slope(x.v[i] - r, x.v[i] + r) * (1 + 0x1p-40);
      const double moved = lipschitz * x.e[m][i];
      y.e[m][i] = (moved + rel * (std::fabs(y.v[i]) * (1 + 0x1p-40) + moved) + abs) * kUp;
    }
  }
  y.constant = x.constant;
  c.out[0] = std::move(y);
}

void Runtime(OpCall& c, const std::function<double(double)>& f, const Slope& slope) {
  const RuntimeError* rt = RuntimeErrorOf(c.node.op);
  Lipschitz(c, f, slope, rt->rel, rt->abs);
}

void Exact(OpCall& c, double (*f)(double)) { Lipschitz(c, f, UnitSlope, 0, 0); }

void Clip(OpCall& c) {
  double lo = -INFINITY, hi = INFINITY;
  if (c.Has(1) && !c.In(1).v.empty()) lo = c.In(1).v[0];
  if (c.Has(2) && !c.In(2).v.empty()) hi = c.In(2).v[0];
  if (c.node.Find("min") != nullptr) lo = FloatAttr(c.node, "min", -INFINITY);
  if (c.node.Find("max") != nullptr) hi = FloatAttr(c.node, "max", INFINITY);
  if ((c.Has(1) && !c.In(1).constant) || (c.Has(2) && !c.In(2).constant)) throw Uncovered("Clip with computed limits");
  Lipschitz(c, [lo, hi](double x) { return std::min(std::max(x, lo), hi); }, UnitSlope, 0, 0);
}

// alpha x rounds once where x < 0: L = max(1, |alpha|), rel = u.
void LeakyRelu(OpCall& c) {
  const double alpha = FloatAttr(c.node, "alpha", 0.01f);
  const double slope = std::max(1.0, std::fabs(alpha));
  Lipschitz(c, [alpha](double x) { return x >= 0 ? x : alpha * x; }, [slope](double, double) { return slope; },
            U(c.In(0)), Tiny(c.In(0)));
}

// ---- binary elementwise ops (numpy broadcasting) ----------------------------------------------------------------------

// Non-negative, computed and exact: a known non-negative tensor, or constant non-negative values.
bool Positive(const Val& x) {
  return x.nonneg || (x.constant && std::all_of(x.v.begin(), x.v.end(), [](double d) { return d >= 0; }));
}
// A lower bound of every value: the known floor, or a constant's smallest value.
double Floor(const Val& x) {
  if (!x.constant) return x.floor;
  double lo = INFINITY;
  for (double d : x.v) lo = std::min(lo, d);
  return x.v.empty() ? 0 : std::max(lo, 0.0);
}

// A binary elementwise op: its operands, broadcast against each other (numpy), and its output shaped.
struct Binary {
  const Val& a;
  const Val& b;
  Broadcast bc;
  Val y;
  double u;
  explicit Binary(const OpCall& c)
      : a(c.In(0)), b(c.In(1)), bc(Checked(c, a, b)), y(Shaped(a.type, bc.dims)), u(U(a)) {}
  static Broadcast Checked(const OpCall& c, const Val& a, const Val& b) {
    RequireFloat(a, c.node.op + " input");
    return BroadcastOf({&a, &b});
  }
  // f(output index, a's index, b's index) for every output element.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = 0; i < bc.index[0].size(); ++i) f(i, bc.index[0][i], bc.index[1][i]);
  }
  // Stores the output: constant where both operands are.
  void Finish(OpCall& c) {
    y.constant = a.constant && b.constant;
    c.out[0] = std::move(y);
  }
};

// One operand of a sum in the legal mode: a flattened sum of its producer (merged), or one plain term.
struct Term {
  double rounds = 0;
  const Sum* sum = nullptr;
};
Term TermOf(const OpCall& c, size_t k) {
  const Val& x = c.In(k);
  if (x.sum && c.single_consumer(c.node.inputs[k])) return {x.sum->rounds, &*x.sum};
  return {};
}
double TermS(const Term& t, const Val& x, size_t j) { return t.sum ? t.sum->prod[j] + t.sum->bias[j] : Mag(x, j, 1); }
double TermP(const Term& t, const Val& x, size_t j) { return t.sum ? t.sum->p[j] : x.e[1][j]; }

// a + b or a - b. Base: e_a + e_b + u |a^ +- b^| (one rounding). Legal: also both operands flattened into one sum in any
// order, gamma_(r_a + r_b + 1) (S_a + S_b) + P_a + P_b (Higham eq. (4.4) for the sum, Lemma 3.3 to combine the
// roundings), which dominates every partial merge.
void AddSub(OpCall& c, double sign) {
  Binary op(c);
  const Val &a = op.a, &b = op.b;
  Val& y = op.y;
  const double u = op.u;
  const Term ta = TermOf(c, 0), tb = TermOf(c, 1);
  Sum sum;
  sum.rounds = ta.rounds + tb.rounds + 1;
  op.ForEach([&](size_t i, size_t ja, size_t jb) {
    y.v[i] = a.v[ja] + sign * b.v[jb];
    for (int m = 0; m < 2; ++m) {
      y.e[m][i] = (a.e[m][ja] + b.e[m][jb] + u * (Mag(a, ja, m) + Mag(b, jb, m))) * kUp;
    }
    const double s = TermS(ta, a, ja) + TermS(tb, b, jb), p = TermP(ta, a, ja) + TermP(tb, b, jb);
    y.e[1][i] = std::max(y.e[1][i], (Gamma(sum.rounds, u) * s + p) * kUp);
    sum.prod.push_back(s);
    sum.p.push_back(p);
  });
  sum.bias.assign(y.size(), 0);
  sum.bias_value.assign(y.size(), 0);
  y.sum = std::move(sum);
  if (sign > 0) {
    y.nonneg = Positive(a) && Positive(b);
    y.floor = y.nonneg ? std::max(Floor(a), Floor(b)) * (1 - u) : 0;  // fl is monotone
  }
  op.Finish(c);
}

// A constant m scaling a Conv/Gemm/MatMul's sum folded into its weights and bias (ConvMulFusion): each folded value
// rounds once, so |products| and |bias| grow by (1 + u) and their rounding joins the propagated error.
Sum ScaledSum(const Sum& s, const std::vector<double>& m, const std::vector<size_t>& at, double u) {
  Sum out;
  out.rounds = s.rounds;
  out.foldable = s.foldable;
  for (size_t i = 0; i < at.size(); ++i) {
    const size_t j = at[i];
    const double am = std::fabs(m[i]);
    out.prod.push_back(am * s.prod[j] * (1 + u));
    out.bias.push_back(am * s.bias[j] * (1 + u));
    out.bias_value.push_back(m[i] * s.bias_value[j]);
    out.p.push_back(am * s.p[j] + u * am * (s.prod[j] + s.bias[j]));
  }
  return out;
}

// a b: |a^ b^ - a b| <= |a| e_b + |b| e_a + e_a e_b, plus one rounding u |a^ b^| and an underflow (Higham §2.2, the model with underflow).
void Mul(OpCall& c) {
  Binary op(c);
  const Val &a = op.a, &b = op.b;
  Val& y = op.y;
  op.ForEach([&](size_t i, size_t ja, size_t jb) {
    y.v[i] = a.v[ja] * b.v[jb];
    for (int m = 0; m < 2; ++m) {
      const double ea = a.e[m][ja], eb = b.e[m][jb];
      y.e[m][i] = (ExactMag(a, ja, m) * eb + ExactMag(b, jb, m) * ea + ea * eb +
                   op.u * Mag(a, ja, m) * Mag(b, jb, m) + Tiny(a)) * kUp;
    }
  });
  // Legal: a constant scale folded into a single-consumer Conv/Gemm/MatMul (ConvMulFusion).
  for (size_t k = 0; k < 2; ++k) {
    const Val& s = c.In(k);
    const Val& m = c.In(1 - k);
    if (!m.constant || !s.sum || !s.sum->foldable || !c.single_consumer(c.node.inputs[k])) continue;
    std::vector<double> scale(y.size());
    for (size_t i = 0; i < y.size(); ++i) scale[i] = m.v[op.bc.index[1 - k][i]];
    Sum folded = ScaledSum(*s.sum, scale, op.bc.index[k], op.u);
    for (size_t i = 0; i < y.size(); ++i) {
      y.e[1][i] = std::max(y.e[1][i], (Gamma(folded.rounds, op.u) * (folded.prod[i] + folded.bias[i]) + folded.p[i]) * kUp);
    }
    y.sum = std::move(folded);
  }
  y.nonneg = c.node.inputs[0] == c.node.inputs[1] || (a.nonneg && b.nonneg);
  op.Finish(c);
}

// a / b where |b| stays clear of 0: |a^/b^ - a/b| <= e_a / |b^| + |a| e_b / (|b| |b^|), |b^| >= |b| - e_b; plus one
// rounding. Where b's interval reaches 0 the element has no finite bound.
void Div(OpCall& c) {
  Binary op(c);
  const Val &a = op.a, &b = op.b;
  Val& y = op.y;
  op.ForEach([&](size_t i, size_t ja, size_t jb) {
    y.v[i] = a.v[ja] / b.v[jb];
    for (int m = 0; m < 2; ++m) {
      const double blo = std::max(std::fabs(b.v[jb]) - b.e[m][jb] * kExactSlack, b.floor);
      const double bhat = std::max(blo - b.e[m][jb], b.floor);
      y.e[m][i] = bhat <= 0 ? INFINITY
                            : (a.e[m][ja] / bhat + ExactMag(a, ja, m) * b.e[m][jb] / (blo * bhat) +
                               op.u * Mag(a, ja, m) / bhat + Tiny(a)) * kUp;
    }
  });
  op.Finish(c);
}

// sqrt(x^) - sqrt(x) = (x^ - x) / (sqrt(x^) + sqrt(x)), and <= sqrt(|x^ - x|) where x's interval reaches 0 (then the
// computed x^ must not be negative: no bound where it could be); plus one correctly rounded sqrt (IEEE 754).
void Sqrt(OpCall& c) {
  const Val& x = c.In(0);
  RequireFloat(x, "Sqrt input");
  Val y = Shaped(x.type, x.dims);
  for (size_t i = 0; i < x.size(); ++i) {
    y.v[i] = std::sqrt(x.v[i]);
    for (int m = 0; m < 2; ++m) {
      const double e = x.e[m][i];
      const double lo = std::max(x.v[i] - e * (1 + kExactSlack), x.floor);      // of x^ (and of x)
      double moved = lo > 0 ? e / (2 * std::sqrt(lo)) : std::sqrt(e);
      if (x.v[i] < 0 || (!x.nonneg && x.v[i] - e * (1 + kExactSlack) < 0 && e > 0)) moved = INFINITY;
      y.e[m][i] = (std::min(moved, std::sqrt(e)) + U(x) * std::sqrt(Mag(x, i, m))) * kUp;
      if (std::isinf(moved)) y.e[m][i] = INFINITY;
    }
  }
  y.nonneg = x.nonneg;
  y.floor = std::sqrt(x.floor) * (1 - U(x));  // fl is monotone: sqrt(x^) >= sqrt(floor) rounded down
  y.constant = x.constant;
  c.out[0] = std::move(y);
}

// Pow(x, 2) only: |x^2 - x^2| <= 2 |x| e + e^2, plus the kernel's own error (Pow2: correctly rounded).
void Pow(OpCall& c) {
  const Val& x = c.In(0);
  const Val& p = c.In(1);
  if (!p.constant || p.size() != 1 || p.v[0] != 2) throw Uncovered("Pow with an exponent other than the constant 2");
  RequireFloat(x, "Pow input");
  const RuntimeError* rt = RuntimeErrorOf("Pow2");
  Val y = Shaped(x.type, x.dims);
  for (size_t i = 0; i < x.size(); ++i) {
    y.v[i] = x.v[i] * x.v[i];
    for (int m = 0; m < 2; ++m) {
      const double e = x.e[m][i], M = Mag(x, i, m);
      y.e[m][i] = (2 * ExactMag(x, i, m) * e + e * e + std::max(rt->rel, U(x)) * M * M + Tiny(x)) * kUp;
    }
  }
  y.nonneg = true;
  y.constant = x.constant;
  c.out[0] = std::move(y);
}

}  // namespace

const RuntimeError* RuntimeErrorOf(const std::string& op) {
  for (const RuntimeError& r : kRuntimeErrors) {
    if (op == r.op) return &r;
  }
  return nullptr;
}

namespace {
// ---- sums of products: Conv, Gemm, MatMul --------------------------------------------------------------------------

// One output element of a sum of products b + sum_k w_k x_k, per mode: S the sum of |computed products| (and |b|),
// P the propagated error sum_k (|w_k| e_x + e_w |x^_k|) + e_b. Any order, with or without FMA: |computed - exact| <=
// gamma_rounds S + P, rounds = products + terms - 1 (Higham eq. (3.5), the bias one more term).
// An operand of sums of products, its magnitudes computed once: each element enters many products.
struct Operand {
  const Val& x;
  std::vector<double> mag[2], exact[2];  // per mode: bounds on the computed and the exact magnitude
  explicit Operand(const Val& v) : x(v) {
    for (int m = 0; m < 2; ++m) {
      mag[m].resize(v.size());
      exact[m].resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) mag[m][i] = Mag(v, i, m), exact[m][i] = ExactMag(v, i, m);
    }
  }
};

struct Dot {
  double v = 0;
  double s[2] = {0, 0}, p[2] = {0, 0};
  double bias_mag = 0, bias_value = 0;
  void Add(const Operand& w, size_t jw, const Operand& x, size_t jx, double scale) {
    const double as = std::fabs(scale);
    v += scale * w.x.v[jw] * x.x.v[jx];
    for (int m = 0; m < 2; ++m) {
      s[m] += as * w.mag[m][jw] * x.mag[m][jx];
      p[m] += as * (w.exact[m][jw] * x.x.e[m][jx] + w.x.e[m][jw] * x.mag[m][jx]);
    }
  }
  // The same where w is a constant (its error 0, its magnitudes |w|), scale 1: the usual weights.
  void AddConstant(const Operand& w, size_t jw, const Operand& x, size_t jx) {
    const double aw = w.mag[0][jw];
    v += w.x.v[jw] * x.x.v[jx];
    s[0] += aw * x.mag[0][jx];
    s[1] += aw * x.mag[1][jx];
    p[0] += aw * x.x.e[0][jx];
    p[1] += aw * x.x.e[1][jx];
  }
  void Bias(const Val& b, size_t j, double scale) {
    v += scale * b.v[j];
    bias_value = scale * b.v[j];
    for (int m = 0; m < 2; ++m) {
      s[m] += std::fabs(scale) * Mag(b, j, m);
      p[m] += std::fabs(scale) * b.e[m][j];
    }
    bias_mag = std::fabs(scale) * Mag(b, j, 1);
  }
};

// Stores the dots as the output's values and bounds, and the legal-mode sum for a following merge or fold (where the
// weights w are constant and the output has one consumer); the output is the op's.
void StoreDots(OpCall& c, Val y, const std::vector<Dot>& dots, double rounds, double products, const Val& x,
               const Val& w) {
  const bool foldable = w.constant && c.single_consumer(c.node.outputs[0]);
  const double u = U(y), tiny = products * Tiny(y);
  Sum sum;
  sum.rounds = rounds;
  sum.foldable = foldable;
  for (size_t i = 0; i < dots.size(); ++i) {
    const Dot& d = dots[i];
    y.v[i] = d.v;
    for (int m = 0; m < 2; ++m) y.e[m][i] = (Gamma(rounds, u) * d.s[m] + d.p[m] + tiny) * kUp;
    sum.prod.push_back(d.s[1] - d.bias_mag);
    sum.bias.push_back(d.bias_mag);
    sum.bias_value.push_back(d.bias_value);
    sum.p.push_back(d.p[1] + tiny);
  }
  y.sum = std::move(sum);
  y.constant = x.constant && w.constant;
  c.out[0] = std::move(y);
}

// Conv's output size and begin padding per spatial axis (ONNX Conv: pads, strides, dilations, auto_pad).
struct Window {
  std::vector<int64_t> out, begin, kernel, stride, dilation;
};
Window WindowOf(const GraphNode& n, const std::vector<int64_t>& in, std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t d = in.size();
  Window w;
  w.kernel = std::move(kernel);
  w.stride = IntsAttr(n, "strides");
  w.dilation = IntsAttr(n, "dilations");
  std::vector<int64_t> pads = IntsAttr(n, "pads");
  if (w.stride.empty()) w.stride.assign(d, 1);
  if (w.dilation.empty()) w.dilation.assign(d, 1);
  if (pads.empty()) pads.assign(2 * d, 0);
  if (w.kernel.size() != d || w.stride.size() != d || w.dilation.size() != d || pads.size() != 2 * d) {
    throw Uncovered(n.op + ": kernel, strides, dilations or pads of the wrong rank");
  }
  const auto* ap = n.Find("auto_pad");
  const std::string auto_pad = ap != nullptr ? ap->s : "NOTSET";
  for (size_t k = 0; k < d; ++k) {
    const int64_t span = w.dilation[k] * (w.kernel[k] - 1) + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[k] + w.stride[k] - 1) / w.stride[k];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[k] + span - in[k]);
      pads[k] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[k + d] = total - pads[k];
    } else if (auto_pad == "VALID") {
      pads[k] = pads[k + d] = 0;
    } else if (auto_pad != "NOTSET" && !auto_pad.empty()) {
      throw Uncovered(n.op + ": auto_pad " + auto_pad);
    }
    const int64_t room = in[k] + pads[k] + pads[k + d] - span;
    if (room < 0) throw Uncovered(n.op + ": a window larger than its padded input");
    w.out.push_back((ceil_mode ? (room + w.stride[k] - 1) / w.stride[k] : room / w.stride[k]) + 1);
    w.begin.push_back(pads[k]);
  }
  return w;
}

// Per output position (flat over w.out): its in-bounds taps as (input spatial flat index, flat kernel index). Built
// once per op: every channel and batch reads the same.
std::vector<std::vector<std::pair<size_t, size_t>>> TapsOf(const Window& w, const std::vector<int64_t>& in) {
  const size_t d = in.size(), outs = Count(w.out), taps = Count(w.kernel);
  std::vector<std::vector<std::pair<size_t, size_t>>> out(outs);
  std::vector<int64_t> at(d);
  for (size_t o = 0; o < outs; ++o) {
    for (size_t k = d, rest = o; k-- > 0;) {
      at[k] = static_cast<int64_t>(rest % static_cast<size_t>(w.out[k]));
      rest /= static_cast<size_t>(w.out[k]);
    }
    for (size_t t = 0; t < taps; ++t) {
      size_t flat = 0;
      bool inside = true;
      for (size_t k = 0, rest = t, scale = taps; k < d; ++k) {
        scale /= static_cast<size_t>(w.kernel[k]);
        const int64_t tap = static_cast<int64_t>(rest / scale);
        rest %= scale;
        const int64_t pos = at[k] * w.stride[k] - w.begin[k] + tap * w.dilation[k];
        inside = inside && pos >= 0 && pos < in[k];
        flat = flat * static_cast<size_t>(in[k]) + static_cast<size_t>(std::max<int64_t>(pos, 0));
      }
      if (inside) out[o].emplace_back(flat, t);
    }
  }
  return out;
}

void Conv(OpCall& c) {
  const Val& x = c.In(0);
  const Val& w = c.In(1);
  RequireFloat(x, "Conv input");
  if (x.dims.size() < 3 || w.dims.size() != x.dims.size()) throw Uncovered("Conv of unsupported rank");
  const int64_t groups = IntAttr(c.node, "group", 1);
  const int64_t n = x.dims[0], cin = x.dims[1], cout = w.dims[0], cg = w.dims[1];
  if (groups <= 0 || cin != cg * groups || cout % groups != 0) throw Uncovered("Conv channels do not match its group");
  const std::vector<int64_t> spatial(x.dims.begin() + 2, x.dims.end());
  const Window win = WindowOf(c.node, spatial, std::vector<int64_t>(w.dims.begin() + 2, w.dims.end()), false);
  std::vector<int64_t> dims{n, cout};
  dims.insert(dims.end(), win.out.begin(), win.out.end());
  Val y = Shaped(x.type, dims);
  const size_t outs = Count(win.out), ins = Count(spatial), taps = Count(win.kernel);
  const auto tap_lists = TapsOf(win, spatial);
  const Operand xo(x), wo(w);
  std::vector<Dot> dots(y.size());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oc = 0; oc < cout; ++oc) {
      const int64_t g = oc / (cout / groups);
      for (size_t o = 0; o < outs; ++o) {
        Dot& d = dots[(static_cast<size_t>(b * cout + oc)) * outs + o];
        for (int64_t ic = 0; ic < cg; ++ic) {
          const size_t xbase = (static_cast<size_t>(b * cin + g * cg + ic)) * ins;
          const size_t wbase = (static_cast<size_t>(oc * cg + ic)) * taps;
          if (w.constant) {
            for (const auto& [xi, t] : tap_lists[o]) d.AddConstant(wo, wbase + t, xo, xbase + xi);
          } else {
            for (const auto& [xi, t] : tap_lists[o]) d.Add(wo, wbase + t, xo, xbase + xi, 1);
          }
        }
        if (c.Has(2)) d.Bias(c.In(2), static_cast<size_t>(oc), 1);
      }
    }
  }
  const double products = static_cast<double>(cg) * static_cast<double>(taps);
  StoreDots(c, std::move(y), dots, products + (c.Has(2) ? 1 : 0), products, x, w);
}

// Gemm: alpha A' B' + beta C. alpha != 1 and beta != 1 each add a rounding to every term.
void Gemm(OpCall& c) {
  const Val& a = c.In(0);
  const Val& b = c.In(1);
  RequireFloat(a, "Gemm input");
  if (a.dims.size() != 2 || b.dims.size() != 2) throw Uncovered("Gemm of rank other than 2");
  const bool ta = IntAttr(c.node, "transA", 0) != 0, tb = IntAttr(c.node, "transB", 0) != 0;
  const double alpha = FloatAttr(c.node, "alpha", 1), beta = FloatAttr(c.node, "beta", 1);
  const int64_t rows = ta ? a.dims[1] : a.dims[0], inner = ta ? a.dims[0] : a.dims[1];
  const int64_t cols = tb ? b.dims[0] : b.dims[1];
  if ((tb ? b.dims[1] : b.dims[0]) != inner) throw Uncovered("Gemm inner dimensions differ");
  Val y = Shaped(a.type, {rows, cols});
  std::vector<Dot> dots(y.size());
  std::optional<Broadcast> bias;
  Val shape = Shaped(a.type, {rows, cols});
  if (c.Has(2)) bias = BroadcastOf({&shape, &c.In(2)});
  const Operand ao(a), bo(b);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      Dot& d = dots[static_cast<size_t>(i * cols + j)];
      for (int64_t k = 0; k < inner; ++k) {
        const size_t ja = static_cast<size_t>(ta ? k * rows + i : i * inner + k);
        const size_t jb = static_cast<size_t>(tb ? j * inner + k : k * cols + j);
        if (b.constant && alpha == 1) {
          d.AddConstant(bo, jb, ao, ja);
        } else {
          d.Add(bo, jb, ao, ja, alpha);
        }
      }
      if (bias) d.Bias(c.In(2), bias->index[1][static_cast<size_t>(i * cols + j)], beta);
    }
  }
  const double products = static_cast<double>(inner);
  const double rounds = products + (c.Has(2) ? 1 : 0) + (alpha != 1 ? 1 : 0) + (c.Has(2) && beta != 1 ? 1 : 0);
  StoreDots(c, std::move(y), dots, rounds, products, a, b);
}

// MatMul with numpy's batch broadcasting; a 1-D operand is a row (A) or a column (B).
void MatMul(OpCall& c) {
  const Val& a = c.In(0);
  const Val& b = c.In(1);
  RequireFloat(a, "MatMul input");
  std::vector<int64_t> ad = a.dims, bd = b.dims;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  if (ad.size() < 2 || bd.size() < 2 || ad.back() != bd[bd.size() - 2]) throw Uncovered("MatMul shapes differ");
  const int64_t rows = ad[ad.size() - 2], inner = ad.back(), cols = bd.back();
  Val ab = Shaped(a.type, std::vector<int64_t>(ad.begin(), ad.end() - 2));
  Val bb = Shaped(b.type, std::vector<int64_t>(bd.begin(), bd.end() - 2));
  const Broadcast batch = BroadcastOf({&ab, &bb});
  std::vector<int64_t> dims = batch.dims;
  if (a.dims.size() > 1) dims.push_back(rows);
  if (b.dims.size() > 1) dims.push_back(cols);
  Val y = Shaped(a.type, dims);
  std::vector<Dot> dots(y.size());
  const Operand ao(a), bo(b);
  const size_t per = static_cast<size_t>(rows * cols);
  for (size_t t = 0; t < batch.index[0].size(); ++t) {
    const size_t abase = batch.index[0][t] * static_cast<size_t>(rows * inner);
    const size_t bbase = batch.index[1][t] * static_cast<size_t>(inner * cols);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        Dot& d = dots[t * per + static_cast<size_t>(i * cols + j)];
        for (int64_t k = 0; k < inner; ++k) {
          const size_t jb = bbase + static_cast<size_t>(k * cols + j), ja = abase + static_cast<size_t>(i * inner + k);
          if (b.constant) {
            d.AddConstant(bo, jb, ao, ja);
          } else {
            d.Add(bo, jb, ao, ja, 1);
          }
        }
      }
    }
  }
  StoreDots(c, std::move(y), dots, static_cast<double>(inner), static_cast<double>(inner), a, b);
}

// ---- BatchNormalization ---------------------------------------------------------------------------------------------

// The folding formulas' roundings in the declared precision (ONNX Runtime 1.30: ConvBNFusion, conv_bn_fusion.cc, and
// NchwcTransformer's BatchNormalization, nchwc_transformer.cc; the CPU kernel, batch_norm.h): the scale s =
// gamma / sqrt(var + eps) takes 3 (4 in the kernel: sqrt then inverse then times gamma), a folded weight W s one more,
// a folded bias (B - mu) s + beta 3 more on its (B - mu) s part and one on the whole.
constexpr double kScaleRoundings = 4, kFoldWeightRoundings = 4, kFoldBiasRoundings = 6;

// The kernel (or an affine x s + b after any fold of s and b alone): y^ = fl(x^ s^ + b^), s^ = s (1 + theta_4),
// b^ = fl(beta - fl(mu s^)): |y^ - y| <= |s| (1 + gamma_6) e_x + gamma_6 |s x| + gamma_7 |mu s| + gamma_2 |b|.
double BatchNormKernel(double s, double b, double mu, double x_exact, double e_x, double u) {
  const double g6 = Gamma(kScaleRoundings + 2, u), g7 = Gamma(kScaleRoundings + 3, u);
  return std::fabs(s) * (1 + g6) * e_x + g6 * std::fabs(s) * x_exact + g7 * std::fabs(mu * s) + Gamma(2, u) * std::fabs(b);
}

// Folded into the producing sum: products |W s| (1 + gamma_4) |x^|, bias B' = (B - mu) s + beta computed with
// |B'^ - B'| <= gamma_6 |(B - mu) s| + u |B'|; the weights' own rounding gamma_4 |W s x^| joins the propagated error.
void FoldInto(Sum& sum, size_t i, size_t j, const Sum& from, double s, double mu, double beta, double u) {
  const double folded_bias = (from.bias_value[j] - mu) * s + beta;
  const double bias_error = Gamma(kFoldBiasRoundings, u) * std::fabs((from.bias_value[j] - mu) * s) + u * std::fabs(folded_bias);
  const double as = std::fabs(s), gw = Gamma(kFoldWeightRoundings, u);
  sum.prod[i] = as * from.prod[j] * (1 + gw);
  sum.bias[i] = std::fabs(folded_bias) + bias_error;
  sum.bias_value[i] = folded_bias;
  sum.p[i] = as * from.p[j] + gw * as * from.prod[j] + bias_error;
}

void BatchNormalization(OpCall& c) {
  const Val& x = c.In(0);
  RequireFloat(x, "BatchNormalization input");
  if (c.out.size() > 1 || IntAttr(c.node, "training_mode", 0) != 0) throw Uncovered("BatchNormalization in training mode");
  for (size_t k = 1; k <= 4; ++k) {
    if (!c.In(k).constant) throw Uncovered("BatchNormalization with computed parameters");
  }
  const double eps = FloatAttr(c.node, "epsilon", 1e-5f), u = U(x);
  const int64_t channels = x.dims.size() > 1 ? x.dims[1] : 1;
  const size_t inner = x.dims.size() > 2 ? Count(std::vector<int64_t>(x.dims.begin() + 2, x.dims.end())) : 1;
  Val y = Shaped(x.type, x.dims);
  const bool fold = x.sum && x.sum->foldable && c.single_consumer(c.node.inputs[0]);
  Sum sum;
  if (fold) sum = Sum{x.sum->rounds, false, std::vector<double>(x.size()), std::vector<double>(x.size()),
                      std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t ch = (i / inner) % static_cast<size_t>(channels);
    const double gamma = c.In(1).v.at(ch), beta = c.In(2).v.at(ch), mu = c.In(3).v.at(ch), var = c.In(4).v.at(ch);
    const double s = gamma / std::sqrt(var + eps), b = beta - mu * s;
    y.v[i] = x.v[i] * s + b;
    for (int m = 0; m < 2; ++m) y.e[m][i] = (BatchNormKernel(s, b, mu, ExactMag(x, i, m), x.e[m][i], u) + 2 * Tiny(x)) * kUp;
    if (!fold) continue;
    FoldInto(sum, i, i, *x.sum, s, mu, beta, u);
    y.e[1][i] = std::max(y.e[1][i], (Gamma(sum.rounds, u) * (sum.prod[i] + sum.bias[i]) + sum.p[i]) * kUp);
  }
  if (fold) y.sum = std::move(sum);
  c.out[0] = std::move(y);
}

// ---- pools and reductions -------------------------------------------------------------------------------------------

// The mean of n terms, any order, divided by D (or times fl(1/D)): |y^ - y| <= gamma_(n+1) sum M / D + (1 + gamma_2)
// sum e / D (Higham eq. (4.4) for the sum, two roundings for the division; Lemma 3.3).
double MeanError(double n, double sum_mag, double sum_err, double divisor, double u) {
  return (Gamma(n + 1, u) * sum_mag / divisor + (1 + Gamma(2, u)) * sum_err / divisor) * kUp;
}

// Calls f(output flat index, input flat indices) for a pooling window over x's spatial axes.
void Pool(OpCall& c, bool average, bool global) {
  const Val& x = c.In(0);
  RequireFloat(x, c.node.op + " input");
  if (x.dims.size() < 3) throw Uncovered(c.node.op + " of rank below 3");
  const std::vector<int64_t> spatial(x.dims.begin() + 2, x.dims.end());
  if (!global && (IntAttr(c.node, "ceil_mode", 0) != 0 || !IntsAttr(c.node, "dilations").empty())) {
    throw Uncovered(c.node.op + " with ceil_mode or dilations");
  }
  if (c.out.size() > 1) throw Uncovered("MaxPool's indices output");
  const Window win = global ? WindowOf(c.node, spatial, spatial, false)
                            : WindowOf(c.node, spatial, IntsAttr(c.node, "kernel_shape"), false);
  const bool include_pad = IntAttr(c.node, "count_include_pad", 0) != 0;
  std::vector<int64_t> dims{x.dims[0], x.dims[1]};
  dims.insert(dims.end(), win.out.begin(), win.out.end());
  Val y = Shaped(x.type, dims);
  const size_t outs = Count(win.out), ins = Count(spatial), u_taps = Count(win.kernel);
  const auto tap_lists = TapsOf(win, spatial);
  for (size_t nc = 0; nc < static_cast<size_t>(x.dims[0] * x.dims[1]); ++nc) {
    for (size_t o = 0; o < outs; ++o) {
      double taps = 0, v = average ? 0 : -INFINITY, mag[2] = {0, 0}, err[2] = {0, 0}, worst[2] = {0, 0};
      for (const auto& [xi, t] : tap_lists[o]) {
        const size_t j = nc * ins + xi;
        taps += 1;
        v = average ? v + x.v[j] : std::max(v, x.v[j]);
        for (int m = 0; m < 2; ++m) {
          mag[m] += Mag(x, j, m);
          err[m] += x.e[m][j];
          worst[m] = std::max(worst[m], x.e[m][j]);
        }
      }
      const double divisor = include_pad ? static_cast<double>(u_taps) : taps;
      const size_t i = nc * outs + o;
      y.v[i] = average ? v / divisor : v;
      for (int m = 0; m < 2; ++m) y.e[m][i] = average ? MeanError(taps, mag[m], err[m], divisor, U(x)) : worst[m];
    }
  }
  if (include_pad && average && IntsAttr(c.node, "pads") != std::vector<int64_t>(2 * spatial.size(), 0) &&
      !IntsAttr(c.node, "pads").empty()) {
    throw Uncovered("AveragePool counting padding");
  }
  y.constant = x.constant;
  c.out[0] = std::move(y);
}

// ReduceMean / ReduceSum over `axes` (attribute, or input 1 from opset 13 / 18), keepdims.
void Reduce(OpCall& c, bool mean) {
  const Val& x = c.In(0);
  RequireFloat(x, c.node.op + " input");
  std::vector<int64_t> axes = AxesOf(c, 1);
  if (axes.empty() && IntAttr(c.node, "noop_with_empty_axes", 0) != 0) {
    Identity(c);
    return;
  }
  if (axes.empty()) {
    for (size_t k = 0; k < x.dims.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  for (int64_t& a : axes) a = Axis(a, x.dims.size());
  const bool keep = IntAttr(c.node, "keepdims", 1) != 0;
  std::vector<int64_t> kept(x.dims), dims;
  for (size_t k = 0; k < x.dims.size(); ++k) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) != axes.end();
    if (reduced) kept[k] = 1;
    if (!reduced || keep) dims.push_back(reduced ? 1 : x.dims[k]);
  }
  const std::vector<size_t> in_stride = Strides(x.dims), out_stride = Strides(kept);
  Val y = Shaped(x.type, dims);
  std::vector<double> mag[2] = {std::vector<double>(y.size()), std::vector<double>(y.size())};
  std::vector<double> err[2] = {std::vector<double>(y.size()), std::vector<double>(y.size())};
  for (size_t j = 0; j < x.size(); ++j) {
    size_t o = 0;
    for (size_t k = 0; k < x.dims.size(); ++k) o += (j / in_stride[k] % static_cast<size_t>(x.dims[k])) % static_cast<size_t>(kept[k]) * out_stride[k];
    y.v[o] += x.v[j];
    for (int m = 0; m < 2; ++m) mag[m][o] += Mag(x, j, m), err[m][o] += x.e[m][j];
  }
  const double n = static_cast<double>(x.size()) / static_cast<double>(std::max<size_t>(y.size(), 1));
  for (size_t i = 0; i < y.size(); ++i) {
    if (mean) y.v[i] /= n;
    for (int m = 0; m < 2; ++m) {
      y.e[m][i] = mean ? MeanError(n, mag[m][i], err[m][i], n, U(x))
                       : (Gamma(n - 1, U(x)) * mag[m][i] + err[m][i]) * kUp;
    }
  }
  y.nonneg = x.nonneg;
  y.constant = x.constant;
  c.out[0] = std::move(y);
}

// ---- LayerNormalization ---------------------------------------------------------------------------------------------

// A two-pass LayerNormalization kernel (mean any order; variance sum_j (x^_j - mu^)^2 / n any order; sigma^ =
// sqrt(var^ + eps); y = (x^ - mu^) / sigma^ * gamma + beta with at most 5 roundings from the subtraction to the scale,
// one for beta). docs/bisect.md derives, per row of n elements and exact mu, v, sigma = sqrt(v + eps):
//   dmu = gamma_(n+1) sum M / n + sum e / n,  E2 = sqrt(sum e^2 / n)
//   eta = 2 sqrt(v) E2 + (E2 + dmu)^2,  dv = eta + gamma_(n+4) (v + eta),  rho = dv / (v + eps) (< 1/2)
//   rho_s = rho + gamma_2 (1 + rho),  kappa = (gamma_5 + rho_s) / (1 - rho_s)
//   B_i = P + u (|y_i| + P),  P = (1 + u) |gamma_i| / sigma (|x_i - mu| kappa + (e_i + dmu) (1 + kappa)).
struct LayerNormParams {
  size_t axis = 0;
  const Val* scale = nullptr;
  const Val* bias = nullptr;
  double eps = 1e-5;
};

// Row statistics in double, two-pass.
void RowStats(const Val& x, size_t base, size_t n, double& mean, double& var) {
  mean = 0;
  for (size_t j = 0; j < n; ++j) mean += x.v[base + j];
  mean /= static_cast<double>(n);
  var = 0;
  for (size_t j = 0; j < n; ++j) var += (x.v[base + j] - mean) * (x.v[base + j] - mean);
  var /= static_cast<double>(n);
}

// The bound of mode m for one row into bound[base..base+n); y holds the row's values (reference/summation.h
// TwoPassLayerNormBounds: the derivation, shared with the driver's float layernorm).
void LayerNormRowBound(const Val& x, const LayerNormParams& p, size_t base, size_t n, double mean, double var, int m,
                       const std::vector<double>& y, std::vector<double>& bound) {
  std::vector<double> magnitude(n);
  for (size_t j = 0; j < n; ++j) magnitude[j] = Mag(x, base + j, m);
  const std::span<const double> row(&x.v[base], n), error(&x.e[m][base], n), values(&y[base], n);
  const double overflow = x.type == DType::float64 ? 0x1p1023 : 0x1p127;
  reference::TwoPassLayerNormBounds({row, magnitude, error, p.scale->v, values, mean, var, p.eps, U(x), Tiny(x), overflow},
                                    std::span<double>(&bound[base], n));
}

// Fills y's values (when `values`) and raises y.e[m] to the kernel's bound for the modes from `first_mode` on.
void LayerNormInto(const Val& x, const LayerNormParams& p, Val& y, int first_mode, bool values) {
  const size_t n = Count(std::vector<int64_t>(x.dims.begin() + static_cast<std::ptrdiff_t>(p.axis), x.dims.end()));
  if (n == 0) return;
  std::vector<double> bound(x.size());
  for (size_t base = 0; base < x.size(); base += n) {
    double mean = 0, var = 0;
    RowStats(x, base, n, mean, var);
    for (size_t j = 0; values && j < n; ++j) {
      const double b = p.bias != nullptr ? p.bias->v[j % p.bias->size()] : 0;
      y.v[base + j] = (x.v[base + j] - mean) / std::sqrt(var + p.eps) * p.scale->v[j % p.scale->size()] + b;
    }
    for (int m = first_mode; m < 2; ++m) {
      LayerNormRowBound(x, p, base, n, mean, var, m, y.v, bound);
      for (size_t j = 0; j < n; ++j) y.e[m][base + j] = std::max(y.e[m][base + j], bound[base + j]);
    }
  }
}

void LayerNormalization(OpCall& c) {
  const Val& x = c.In(0);
  RequireFloat(x, "LayerNormalization input");
  if (c.out.size() > 1) throw Uncovered("LayerNormalization's mean and inverse standard deviation outputs");
  LayerNormParams p;
  p.axis = static_cast<size_t>(Axis(IntAttr(c.node, "axis", -1), x.dims.size()));
  p.scale = &c.In(1);
  p.bias = c.Has(2) ? &c.In(2) : nullptr;
  p.eps = FloatAttr(c.node, "epsilon", 1e-5f);
  if (!p.scale->constant || (p.bias != nullptr && !p.bias->constant)) throw Uncovered("LayerNormalization with computed scale or bias");
  Val y = Shaped(x.type, x.dims);
  LayerNormInto(x, p, y, 0, true);
  c.out[0] = std::move(y);
}

// ---- the op table ---------------------------------------------------------------------------------------------------

using OpFn = std::function<void(OpCall&)>;

const std::map<std::string, OpFn>& Ops() {
  static const std::map<std::string, OpFn> ops = {
      {"Identity", Identity}, {"Dropout", Identity}, {"Reshape", Reshape}, {"Flatten", Flatten},
      {"Squeeze", Squeeze}, {"Unsqueeze", Unsqueeze}, {"Transpose", Transpose}, {"Concat", Concat},
      {"Shape", Shape}, {"Constant", Constant}, {"Gather", Gather}, {"Cast", Cast},
      {"Relu", [](OpCall& c) {
         Exact(c, ReluOf);
         c.out[0].nonneg = true;
       }}, {"Neg", [](OpCall& c) { Exact(c, NegOf); }},
      {"Abs", [](OpCall& c) { Exact(c, AbsOf); }}, {"Clip", Clip}, {"LeakyRelu", LeakyRelu},
      {"Sigmoid", [](OpCall& c) { Runtime(c, SigmoidOf, SigmoidSlope); }},
      {"Tanh", [](OpCall& c) { Runtime(c, [](double x) { return std::tanh(x); }, TanhSlope); }},
      {"Erf", [](OpCall& c) { Runtime(c, [](double x) { return std::erf(x); }, ErfSlope); }},
      {"com.microsoft.Gelu", [](OpCall& c) { Runtime(c, GeluOf, GeluSlope); }},
      {"Add", [](OpCall& c) { AddSub(c, 1); }}, {"Sub", [](OpCall& c) { AddSub(c, -1); }},
      {"Mul", Mul}, {"Div", Div}, {"Sqrt", Sqrt}, {"Pow", Pow},
      {"Conv", Conv}, {"Gemm", Gemm}, {"MatMul", MatMul}, {"BatchNormalization", BatchNormalization},
      {"GlobalAveragePool", [](OpCall& c) { Pool(c, true, true); }},
      {"GlobalMaxPool", [](OpCall& c) { Pool(c, false, true); }},
      {"AveragePool", [](OpCall& c) { Pool(c, true, false); }}, {"MaxPool", [](OpCall& c) { Pool(c, false, false); }},
      {"ReduceMean", [](OpCall& c) { Reduce(c, true); }}, {"ReduceSum", [](OpCall& c) { Reduce(c, false); }},
      {"LayerNormalization", LayerNormalization},
  };
  return ops;
}

}  // namespace

const std::vector<std::string>& CoveredOps() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, fn] : Ops()) out.push_back(name);
    return out;
  }();
  return names;
}

const std::vector<std::string>& LegalRewrites() {
  static const std::vector<std::string> rewrites = {
      "every sum (Conv, Gemm, MatMul, reductions, pools) in any order, with or without FMA",
      "an Add or Sub merged into the sum that produces an operand (FusedConv with Sum, NCHWc Conv+Add, MatMulAddFusion, "
      "SkipLayerNormalization), chains of Adds reassociated",
      "BatchNormalization folded into the Conv, Gemm or MatMul before it (ConvBNFusion, MatmulBNFusion), or applied as "
      "a per-channel affine (NchwcTransformer)",
      "a constant Mul folded into the Conv, Gemm or MatMul before it (ConvMulFusion)",
      "an activation fused into its producer (same function, same kernel error)",
      "the LayerNormalization pattern (ReduceMean, Sub, Pow or Mul, ReduceMean, Add, Sqrt, Div, Mul, Add) computed by one "
      "two-pass LayerNormalization kernel (LayerNormFusion)",
  };
  return rewrites;
}

namespace {
// Evaluates one node into `vals`: its outputs, or their uncovered reason.
void EvaluateNode(const GraphNode& node, std::map<std::string, Val>& vals,
                  const std::function<bool(const std::string&)>& single_consumer) {
  std::vector<const Val*> in;
  std::string reason;
  for (const std::string& name : node.inputs) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    const auto it = vals.find(name);
    if (it == vals.end()) {
      reason = "input '" + name + "' of " + node.op + " is not available";
    } else if (!it->second.uncovered.empty() && reason.empty()) {
      reason = it->second.uncovered;
    }
    in.push_back(it == vals.end() ? nullptr : &it->second);
  }
  std::vector<Val> out(node.outputs.size());
  const auto ops = Ops().find(node.op);
  if (reason.empty() && ops == Ops().end()) reason = "op " + node.op + " is not covered";
  if (reason.empty()) {
    try {
      OpCall call{node, in, single_consumer, out};
      ops->second(call);
    } catch (const Uncovered& e) {
      reason = node.op + " ('" + (node.outputs.empty() ? std::string() : node.outputs[0]) + "'): " + e.what();
    }
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (node.outputs[k].empty()) continue;
    if (!reason.empty()) out[k].uncovered = reason;
    vals[node.outputs[k]] = std::move(out[k]);
  }
}

BoundedTensor Result(const std::string& name, const std::map<std::string, Val>& vals) {
  BoundedTensor t;
  t.name = name;
  const auto it = vals.find(name);
  if (it == vals.end()) {
    t.uncovered = "'" + name + "' is not a tensor of the model";
    return t;
  }
  const Val& x = it->second;
  t.type = x.type;
  t.dims = x.dims;
  t.uncovered = x.uncovered;
  if (!t.uncovered.empty()) return t;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x.e[0][i]) || !std::isfinite(x.e[1][i])) {
      t.uncovered = "no finite bound at element " + std::to_string(i) + " (a divisor or square root within its error "
                    "of zero, or an overflow)";
      return t;
    }
  }
  t.value = x.v;
  t.base = x.e[0];
  t.legal = x.e[1];
  return t;
}

}  // namespace

BoundEvaluator::BoundEvaluator(onnx_io::GraphContent graph) : graph_(std::move(graph)) {
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    for (const auto& name : graph_.nodes[k].inputs) {
      ++consumers_[name];
      last_use_[name] = k;
    }
  }
  for (const auto& out : graph_.outputs) ++consumers_[out.name];
  std::map<std::string, std::string> reason;
  for (const auto& node : graph_.nodes) {
    std::string why = Ops().count(node.op) ? "" : "op " + node.op + " is not covered";
    for (const auto& name : node.inputs) {
      if (why.empty() && reason.count(name)) why = reason[name];
    }
    for (const auto& name : node.outputs) {
      if (!why.empty()) reason[name] = why;
    }
  }
  static_uncovered_ = std::move(reason);
  FindLayerNorms();
  // A LayerNorm pattern reads its input, scale and bias again at its last Add.
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    const auto& outs = graph_.nodes[k].outputs;
    const auto ln = outs.empty() ? layer_norms_.end() : layer_norms_.find(outs[0]);
    if (ln == layer_norms_.end()) continue;
    for (const std::string* t : {&ln->second.x, &ln->second.scale, &ln->second.bias}) last_use_[*t] = std::max(last_use_[*t], k);
  }
}

namespace {

// The single reduced axis of a ReduceMean with keepdims (attribute, or a constant input), or nullopt.
std::optional<int64_t> ReducedAxis(const GraphNode& n, const onnx_io::GraphContent& g) {
  if (IntAttr(n, "keepdims", 1) == 0) return std::nullopt;
  std::vector<int64_t> axes = IntsAttr(n, "axes");
  if (n.inputs.size() > 1 && g.initializers.count(n.inputs[1])) {
    const Tensor& t = g.initializers.at(n.inputs[1]);
    axes.clear();
    for (size_t i = 0; i < t.elements(); ++i) axes.push_back(static_cast<int64_t>(t.value(i)));
  }
  if (axes.size() != 1) return std::nullopt;
  return axes[0];
}

}  // namespace

// Matches Add(Mul(Div(Sub(x, ReduceMean(x)), Sqrt(Add(ReduceMean(Pow(d, 2) | Mul(d, d)), eps))), gamma), beta), each
// binary op's operands in either order where they commute, gamma, beta and eps constant, one reduced axis.
void BoundEvaluator::FindLayerNorms() {
  std::map<std::string, const GraphNode*> producer;
  for (const auto& n : graph_.nodes) {
    for (const auto& o : n.outputs) producer[o] = &n;
  }
  const auto made_by = [&](const std::string& name, const char* op) -> const GraphNode* {
    const auto it = producer.find(name);
    const size_t arity = std::string(op) == "Sqrt" || std::string(op) == "ReduceMean" ? 1 : 2;
    return it != producer.end() && it->second->op == op && it->second->inputs.size() >= arity ? it->second : nullptr;
  };
  const auto constant = [&](const std::string& name) { return graph_.initializers.count(name) > 0; };
  const auto squares = [&](const std::string& name, const std::string& d) {
    const GraphNode* pow = made_by(name, "Pow");
    const GraphNode* mul = made_by(name, "Mul");
    if (pow != nullptr && pow->inputs[0] == d && constant(pow->inputs[1])) {
      const Tensor& e = graph_.initializers.at(pow->inputs[1]);
      return e.elements() == 1 && e.value(0) == 2;
    }
    return mul != nullptr && mul->inputs[0] == d && mul->inputs[1] == d;
  };
  for (const auto& add : graph_.nodes) {
    if (add.op != "Add" || add.inputs.size() != 2 || add.outputs.empty()) continue;
    for (size_t k = 0; k < 2; ++k) {
      const GraphNode* mul = made_by(add.inputs[k], "Mul");
      if (mul == nullptr || !constant(add.inputs[1 - k])) continue;
      for (size_t q = 0; q < 2; ++q) {
        const GraphNode* div = made_by(mul->inputs[q], "Div");
        if (div == nullptr || !constant(mul->inputs[1 - q])) continue;
        const GraphNode* sub = made_by(div->inputs[0], "Sub");
        const GraphNode* root = made_by(div->inputs[1], "Sqrt");
        const GraphNode* eps_add = root != nullptr ? made_by(root->inputs[0], "Add") : nullptr;
        const GraphNode* mean = sub != nullptr ? made_by(sub->inputs[1], "ReduceMean") : nullptr;
        if (eps_add == nullptr || mean == nullptr || mean->inputs[0] != sub->inputs[0]) continue;
        for (size_t r = 0; r < 2; ++r) {
          const GraphNode* var = made_by(eps_add->inputs[r], "ReduceMean");
          const std::string& eps = eps_add->inputs[1 - r];
          if (var == nullptr || !constant(eps) || graph_.initializers.at(eps).elements() != 1) continue;
          const auto axis = ReducedAxis(*mean, graph_);
          if (!axis || ReducedAxis(*var, graph_) != axis || !squares(var->inputs[0], div->inputs[0])) continue;
          layer_norms_[add.outputs[0]] = {sub->inputs[0], mul->inputs[1 - q], add.inputs[1 - k], *axis,
                                          graph_.initializers.at(eps).value(0)};
        }
      }
    }
  }
}

std::string BoundEvaluator::StaticallyUncovered(const std::string& tensor) const {
  const auto it = static_uncovered_.find(tensor);
  return it == static_uncovered_.end() ? "" : it->second;
}

namespace {

// The LayerNormalization pattern's last Add y: its legal bound also allows the fused kernel's, from input x.
void FusedLayerNorm(const Val& x, const Val& scale, const Val& bias, int64_t axis, double eps, Val& y) {
  if (!y.uncovered.empty() || !x.uncovered.empty()) return;
  LayerNormParams p;
  p.axis = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(x.dims.size()) : axis);
  p.scale = &scale;
  p.bias = &bias;
  p.eps = eps;
  LayerNormInto(x, p, y, 1, false);
}

uint64_t BytesOf(const Val& x) {
  const uint64_t per = 3 + (x.sum ? 4 : 0);  // value, two bounds; a sum's four vectors
  return static_cast<uint64_t>(x.size()) * per * sizeof(double);
}

}  // namespace

std::vector<BoundedTensor> BoundEvaluator::Evaluate(const std::vector<onnx_io::Tensor>& feeds,
                                                    const std::vector<std::string>& wanted, uint64_t max_bytes) const {
  std::map<std::string, Val> vals;
  for (const auto& [name, t] : graph_.initializers) vals.emplace(name, FromTensor(t, true));
  for (const auto& t : feeds) vals[t.name] = FromTensor(t, false);
  const auto single = [this](const std::string& name) {
    const auto it = consumers_.find(name);
    return it != consumers_.end() && it->second == 1;
  };
  const std::set<std::string> keep(wanted.begin(), wanted.end());
  std::string over;
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    const GraphNode& node = graph_.nodes[k];
    if (over.empty()) {
      EvaluateNode(node, vals, single);
      const auto ln = node.outputs.empty() ? layer_norms_.end() : layer_norms_.find(node.outputs[0]);
      if (ln != layer_norms_.end() && vals.count(ln->second.x)) {
        const LayerNormPattern& p = ln->second;
        FusedLayerNorm(vals.at(p.x), vals.at(p.scale), vals.at(p.bias), p.axis, p.eps, vals[node.outputs[0]]);
      }
    } else {
      for (const auto& o : node.outputs) vals[o].uncovered = over;
    }
    for (const auto& name : node.inputs) {
      const auto last = last_use_.find(name);
      if (last != last_use_.end() && last->second == k && !keep.count(name)) vals.erase(name);
    }
    uint64_t live = 0;
    for (const auto& [name, v] : vals) live += BytesOf(v);
    if (max_bytes > 0 && live > max_bytes && over.empty()) {
      over = "the bound evaluation would hold more than " + std::to_string(max_bytes) + " bytes (a quarter of --max-bytes)";
      for (const auto& o : node.outputs) vals[o] = Val{}, vals[o].uncovered = over;
    }
  }
  std::vector<BoundedTensor> out;
  for (const auto& name : wanted) out.push_back(Result(name, vals));
  return out;
}

}  // namespace fusediff::bisect

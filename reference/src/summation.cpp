#include "fusediff/reference/summation.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "fusediff/model/batchnorm.h"
#include "fusediff/reference/float_formats.h"

namespace fusediff::reference {

namespace {

// One term: a value x_i (b == nullptr) or a product a_i b_i.
struct Terms {
  std::span<const float> a;
  std::span<const float> b;  // empty: the terms are a's values
  bool products() const { return !b.empty(); }
};

// bf16 accumulator: the binary32 result rounded to nearest even in bfloat16, subnormals kept.
float RoundToBf16(float v) {
  return RoundToFormat(v, FloatBoundary{FloatFormat::bf16, FloatRounding::nearest_even, FloatOverflow::infinity,
                                        SubnormalInputs::keep, NanRule::quiet_payload});
}

// An accumulator of the declared precision; `v` holds its value exactly.
class Accumulator {
 public:
  explicit Accumulator(const SummationOrder& order) : order_(&order) {}
  double value() const { return v_; }

  // s = A(s + x): binary32: one binary32 rounding; binary64: one binary64 rounding (x is exact in double).
  void AddValue(float x) { AddExact(x); }

  // s = A(s + P(a b)), or s = fl32(a b + s) with one rounding under fma (binary32 accumulators, validate()).
  void AddProduct(float a, float b) {
    if (order_->contraction == Contraction::fma) {
      v_ = std::fma(a, b, static_cast<float>(v_));
      return;
    }
    AddRoundedProduct(a, b);
  }

  // s = A(s + P(a b)) whatever the contraction: the product rounded on its own (a vector multiply).
  void AddRoundedProduct(float a, float b) {
    if (order_->product_precision == ProductPrecision::binary32) return AddExact(a * b);  // fl32(a b)
    AddDouble(static_cast<double>(a) * static_cast<double>(b));  // exact: 48-bit significand
  }

  // Folds another accumulator of the same precision in: s = A(s + t).
  void AddAccumulator(const Accumulator& other) { AddDouble(other.v_); }

 private:
  // A binary32 term.
  void AddExact(float x) {
    switch (order_->accumulator) {
      case AccumulatorPrecision::binary32: v_ = static_cast<float>(v_) + x; return;  // fl32
      case AccumulatorPrecision::binary64: v_ += x; return;                           // fl64
      case AccumulatorPrecision::bf16: v_ = RoundToBf16(static_cast<float>(v_) + x); return;
    }
  }
  // A binary64 term (a binary64 product or another accumulator's value).
  void AddDouble(double t) {
    switch (order_->accumulator) {
      case AccumulatorPrecision::binary32: v_ = static_cast<float>(v_ + t); return;  // fl32(fl64(s + t))
      case AccumulatorPrecision::binary64: v_ += t; return;
      case AccumulatorPrecision::bf16: v_ = RoundToBf16(static_cast<float>(v_ + t)); return;
    }
  }

  const SummationOrder* order_;
  double v_ = 0;
};

void AddTerm(Accumulator& acc, const Terms& t, size_t i) {
  if (t.products()) acc.AddProduct(t.a[i], t.b[i]);
  else acc.AddValue(t.a[i]);
}

// Terms [begin, end) left to right into one accumulator.
Accumulator Sequential(const SummationOrder& order, const Terms& t, size_t begin, size_t end) {
  Accumulator acc(order);
  for (size_t i = begin; i < end; ++i) AddTerm(acc, t, i);
  return acc;
}

// sum [begin, begin + m) + sum [begin + m, end), m = (end - begin) / 2, down to leaves of `leaf` terms.
Accumulator Pairwise(const SummationOrder& order, const Terms& t, size_t begin, size_t end) {
  if (end - begin <= static_cast<size_t>(order.leaf)) return Sequential(order, t, begin, end);
  const size_t mid = begin + (end - begin) / 2;
  Accumulator left = Pairwise(order, t, begin, mid);
  left.AddAccumulator(Pairwise(order, t, mid, end));
  return left;
}

using Vector = std::vector<Accumulator>;  // one accumulator per lane

// Lane l of vector `vec` (terms vec * lanes + l) into lane accumulators.
void AddVector(Vector& lanes, const Terms& t, size_t vec) {
  for (size_t l = 0; l < lanes.size(); ++l) AddTerm(lanes[l], t, vec * lanes.size() + l);
}

// lane i += lane i + m/2 (m lanes left), or lane i = lane 2i + lane 2i+1; m halves.
void FoldLanes(Vector& lanes, LaneFoldStep step, size_t m) {
  Vector next;
  for (size_t i = 0; i < m / 2; ++i) {
    Accumulator sum = step == LaneFoldStep::halve ? lanes[i] : lanes[2 * i];
    sum.AddAccumulator(step == LaneFoldStep::halve ? lanes[i + m / 2] : lanes[2 * i + 1]);
    next.push_back(sum);
  }
  for (size_t i = 0; i < next.size(); ++i) lanes[i] = next[i];
}

// The folded lanes of accumulator 0 as one accumulator.
Accumulator FoldToScalar(const SummationOrder& order, Vector lanes) {
  if (order.lane_fold.empty()) {
    Accumulator sum = lanes[0];
    for (size_t l = 1; l < lanes.size(); ++l) sum.AddAccumulator(lanes[l]);
    return sum;
  }
  size_t m = lanes.size();
  for (const LaneFoldStep step : order.lane_fold) {
    FoldLanes(lanes, step, m);
    m /= 2;
  }
  return lanes[0];
}

// model/summation_order.h, "blocked": accumulators, their halving fold, the remainder vectors, the lane fold and the
// scalar tail (after the fold, or into lane 0 before it; after_fold_mul4: a tail of 4 or more products starts with
// 4 rounded products).
Accumulator Blocked(const SummationOrder& order, const Terms& t, size_t n) {
  const size_t lanes = static_cast<size_t>(order.lanes);
  const size_t vectors = n / lanes;
  const size_t unroll = vectors >= static_cast<size_t>(order.unroll) ? static_cast<size_t>(order.unroll) : 1;
  std::vector<Vector> acc(unroll, Vector(lanes, Accumulator(order)));
  const size_t unrolled = vectors / unroll * unroll;
  for (size_t v = 0; v < unrolled; ++v) AddVector(acc[v % unroll], t, v);
  for (size_t m = unroll; m > 1; m /= 2) {
    for (size_t j = 0; j < m / 2; ++j) {
      for (size_t l = 0; l < lanes; ++l) acc[j][l].AddAccumulator(acc[j + m / 2][l]);
    }
  }
  for (size_t v = unrolled; v < vectors; ++v) AddVector(acc[0], t, v);
  if (order.tail == BlockedTail::into_lane0) {
    for (size_t i = vectors * lanes; i < n; ++i) AddTerm(acc[0][0], t, i);
    return FoldToScalar(order, acc[0]);
  }
  Accumulator sum = FoldToScalar(order, acc[0]);
  size_t i = vectors * lanes;
  if (order.tail == BlockedTail::after_fold_mul4 && t.products() && n - i >= 4) {
    for (const size_t end = i + 4; i < end; ++i) sum.AddRoundedProduct(t.a[i], t.b[i]);
  }
  for (; i < n; ++i) AddTerm(sum, t, i);
  return sum;
}

double SumTerms(const SummationOrder& order, const Terms& t) {
  validate(order, "summation order");
  const size_t n = t.a.size();
  switch (order.shape) {
    case SumShape::sequential: return Sequential(order, t, 0, n).value();
    case SumShape::pairwise: return n == 0 ? 0.0 : Pairwise(order, t, 0, n).value();
    case SumShape::blocked: return Blocked(order, t, n).value();
  }
  throw std::logic_error("unknown summation shape");
}

}  // namespace

double SumInOrder(const SummationOrder& order, std::span<const float> x) { return SumTerms(order, Terms{x, {}}); }

double DotInOrder(const SummationOrder& order, std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) throw std::invalid_argument("DotInOrder: a and b differ in length");
  return SumTerms(order, Terms{a, b});
}

}  // namespace fusediff::reference

// Fused kernel of stage kind `mul`, as production code computes it (model/pattern.h MulRule):
//   tflite:    TFLite's integer Mul (tensorflow/lite/kernels/mul.cc Prepare: the multiplier sa * sb / so as a
//              float expression, QuantizeMultiplier; lite/kernels/internal/reference/integer_ops/mul.h
//              MulElementwise: MultiplyByQuantizedMultiplier((a - za)(b - zb)) + zo, clamp), with the gemmlowp
//              primitives of fixedpoint.h;
//   onnx_spec: ONNX QLinearMul's exact definition as an integer kernel: P Ma Mb 2^E / Mo, half to even.
// Mutant mul-ignores-input-zero-point is the same kernel constructed with zb = 0.
#include <algorithm>
#include <cmath>
#include <string>

#include "fusediff/fused/fixedpoint.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

class MulKernel final : public StageKernel {
 public:
  MulKernel(const Stage& s, const QuantParams& qa, const QuantParams& qb)
      : rule_(s.mul_rule), per_channel_(s.mul_operand == MulOperand::per_channel), qa_(qa), qb_(qb), qo_(s.out) {
    if (rule_ == MulRule::tflite) {
      const float real = qa.scale * qb.scale / qo_.scale;  // binary32, as Prepare's expression (-ffp-contract=off)
      QuantizeMultiplier(static_cast<double>(real), &multiplier_, &shift_);
      return;
    }
    // s = M 2^E exactly (M < 2^24 an integer): v = P Ma Mb 2^(Ea + Eb - Eo) / Mo.
    int ea = 0, eb = 0, eo = 0;
    const double ma = std::ldexp(std::frexp(static_cast<double>(qa.scale), &ea), 24);
    const double mb = std::ldexp(std::frexp(static_cast<double>(qb.scale), &eb), 24);
    const double mo = std::ldexp(std::frexp(static_cast<double>(qo_.scale), &eo), 24);
    const int e = ea + eb - eo - 24;  // each M carries 2^24 of its own exponent: two up, one down
    // |P Ma Mb| < 2^65: a left shift up to 60 and a divisor up to 2^124 stay inside __int128.
    if (e > 60 || e < -100) throw InputError("mul onnx_spec: sa sb / so lies beyond the integer kernel's 2^+-60");
    numerator_ = static_cast<__int128>(static_cast<int64_t>(ma)) * static_cast<int64_t>(mb);
    shift_left_ = std::max(e, 0);
    divisor_ = static_cast<__int128>(static_cast<int64_t>(mo)) << std::max(-e, 0);
  }

  void Run(const StageOperands& operands, StageTensor& t) const override {
    const std::vector<int32_t>& b = operands.codes;
    const size_t channels = static_cast<size_t>(t.shape.channels);
    if (b.size() != (per_channel_ ? channels : t.codes.size())) {
      throw InputError("pattern draw: mul's input has " + std::to_string(b.size()) + " codes, the product has " +
                       std::to_string(t.codes.size()) + " elements over " + std::to_string(channels) + " channels");
    }
    for (size_t i = 0; i < t.codes.size(); ++i) t.codes[i] = Multiply(t.codes[i], b[per_channel_ ? i % channels : i]);
  }

 private:
  int32_t Multiply(int32_t a, int32_t b) const {
    const int32_t product = (a - qa_.zero_point) * (b - qb_.zero_point);  // |P| <= 255^2: int32
    int64_t y = 0;
    if (rule_ == MulRule::tflite) {
      // The model's validation keeps the multiplier below 2^14, so P 2^shift fits int32 here as in TFLite.
      y = MultiplyByQuantizedMultiplierDoubleRounding(product, multiplier_, shift_);
    } else {
      const __int128 n = (numerator_ * product) << shift_left_;
      __int128 q = n / divisor_;  // truncates toward zero
      __int128 r = n - q * divisor_;
      if (r < 0) {
        q -= 1;
        r += divisor_;
      }
      if (2 * r > divisor_ || (2 * r == divisor_ && (q & 1) != 0)) q += 1;  // half to even
      constexpr __int128 kBound = __int128{1} << 40;  // far outside every type: saturates the same
      y = static_cast<int64_t>(std::clamp(q, -kBound, kBound));
    }
    return static_cast<int32_t>(std::clamp<int64_t>(y + qo_.zero_point, qo_.type.qmin(), qo_.type.qmax()));
  }

  MulRule rule_;
  bool per_channel_;
  QuantParams qa_, qb_, qo_;
  int32_t multiplier_ = 0;  // tflite
  int shift_ = 0;
  __int128 numerator_ = 0, divisor_ = 1;  // onnx_spec
  int shift_left_ = 0;
};

class MulStage final : public FusedStage {
 public:
  StageKind kind() const override { return StageKind::mul; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                      std::string*) const override {
    QuantParams b = s.mul_input;
    if (spec.mutant == Mutant::mul_ignores_input_zero_point) b.zero_point = 0;  // the mutant's variant
    return std::make_unique<MulKernel>(s, in, b);
  }
};

}  // namespace

std::unique_ptr<const FusedStage> MakeMulStage() { return std::make_unique<MulStage>(); }

}  // namespace fusediff::fused

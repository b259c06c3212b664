// Stage kind `mul`: the codes it reads multiplied by a second input b (a tensor of the product's shape, or one
// code per output channel), rounded into the product's boundary by the mul rule (model/pattern.h MulRule).
#include <cmath>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

// TFLite's real multiplier sa sb / so in binary32 (mul.cc Prepare), in double here: only its size matters below.
double TfliteMultiplier(const QuantParams& a, const QuantParams& b, const QuantParams& o) {
  return static_cast<double>(static_cast<float>(static_cast<float>(a.scale * b.scale) / o.scale));
}

class MulStage final : public StageKindModule {
 public:
  StageKind kind() const override { return StageKind::mul; }
  bool elementwise() const override { return true; }
  QuantParams output_boundary(const Stage& s, const QuantParams&, const Convention&) const override { return s.out; }

  void validate(const Stage& s, const QuantParams& in, const Convention&, const std::string& field) const override {
    fusediff::validate(s.mul_input, field + ".input");
    fusediff::validate(s.out, field + ".out");
    if (s.mul_rule != MulRule::tflite) return;
    if (!(in.type == s.mul_input.type) || !(in.type == s.out.type) || !(in.type.scalar == ScalarType::int8 || in.type.scalar == ScalarType::uint8)) {
      throw InputError(field + ".rule: tflite multiplies three tensors of one 8-bit type (got " + to_string(in.type) +
                       ", " + to_string(s.mul_input.type) + ", " + to_string(s.out.type) + ")");
    }
    // MultiplyByQuantizedMultiplier shifts P = (a - za)(b - zb) left in int32 (|P| <= 2^16) when the multiplier
    // is 1 or more: below 2^14 no code pair overflows.
    const double m = TfliteMultiplier(in, s.mul_input, s.out);
    if (!(m > 0) || !(m < 0x1p14)) {
      throw InputError(field + ".rule: tflite's multiplier sa sb / so = " + std::to_string(m) +
                       " must lie in (0, 2^14): beyond it (a - za)(b - zb) 2^shift overflows TFLite's int32");
    }
  }

  std::string describe(const Stage& s, Fusion, bool) const override {
    std::string part = "mul " + std::string(to_string(s.mul_rule)) + " b=" + format_quant_params(s.mul_input);
    if (s.mul_operand != MulOperand::tensor) part.append(" ").append(to_string(s.mul_operand));
    return part.append(" o=").append(format_quant_params(s.out));
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool) const override {
    std::vector<std::pair<std::string, std::string>> f{{"mul", std::string(to_string(s.mul_rule))},
                                                       {"mulb", format_quant_params(s.mul_input)},
                                                       {"mulo", format_quant_params(s.out)}};
    if (s.mul_operand != MulOperand::tensor) f.emplace_back("mulshape", to_string(s.mul_operand));
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.mul_rule = parse_mul_rule(f.take("mul"), "replay.mul");
    s.mul_input = parse_quant_params(f.take("mulb"), "replay.mulb", QuantParams{});
    s.out = parse_quant_params(f.take("mulo"), "replay.mulo", QuantParams{});
    if (f.has("mulshape")) s.mul_operand = parse_mul_operand(f.take("mulshape"), "replay.mulshape");
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    return {{"rule", std::string(to_string(s.mul_rule))},
            {"input", s.mul_input},
            {"operand", std::string(to_string(s.mul_operand))},
            {"out", s.out}};
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.mul_rule = f.parsed("rule", parse_mul_rule);
    s.mul_input = f.quant("input");
    s.mul_operand = f.parsed("operand", parse_mul_operand);
    s.out = f.quant("out");
  }

  std::string facts_illegality(const Stage& s, const Convention&, const FusionFacts& facts) const override {
    if (!facts.residual_broadcast || s.mul_operand == MulOperand::per_channel) return {};
    return "residual-shape: mul's second input is broadcast; the fused mul reads it element for element at the "
           "producer's output shape (or one code per channel, declared per_channel)";
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_mul_stage() { return std::make_unique<MulStage>(); }

}  // namespace fusediff

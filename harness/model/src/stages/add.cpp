// Stage kind `add`: the residual r added to the tensor it reads, rounded into its sum's boundary s by the add rule
// (model/pattern.h AddRule); on an f32 intermediate, the f32 rule adds r to v.
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

class AddStage final : public StageKindModule {
 public:
  StageKind kind() const override { return StageKind::add; }
  bool elementwise() const override { return true; }
  QuantParams output_boundary(const Stage& s, const QuantParams&, const Convention&) const override { return s.out; }

  void validate(const Stage& s, const QuantParams&, const Convention&, const std::string& field) const override {
    fusediff::validate(s.residual, field + ".residual");
    fusediff::validate(s.out, field + ".out");
    if (is_f32_add_rule(s.add_rule)) {
      std::string message = field + ".rule: " + std::string(to_string(s.add_rule)) +
                            " adds to an f32 intermediate; the graph's add reads the code u (expected tflite, "
                            "onnx_spec, ort_mlas, ort_mlas_fma, ort_raw or ";
      message += to_string(AddRule::binary32_unfused);
      throw InputError(message + ")");
    }
    if (!is_f32_add_rule(s.f32_add_rule)) {
      std::string message = field + ".f32_rule: " + std::string(to_string(s.f32_add_rule)) +
                            " reads codes; an f32 intermediate is added to by ";
      message += to_string(AddRule::f32_one_rounding);
      message += " or ";
      message += to_string(AddRule::f32_two_roundings);
      throw InputError(message);
    }
  }

  std::string describe(const Stage& s, Fusion, bool f32_intermediate) const override {
    if (f32_intermediate)
      return "add " + std::string(to_string(s.f32_add_rule)) + " r=" + format_quant_params(s.residual);
    return "add " + std::string(to_string(s.add_rule)) + " r=" + format_quant_params(s.residual) +
           " s=" + format_quant_params(s.out);
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool for_samples) const override {
    std::vector<std::pair<std::string, std::string>> f{{"add", std::string(to_string(s.add_rule))},
                                                       {"r", format_quant_params(s.residual)},
                                                       {"s", format_quant_params(s.out)}};
    // Not part of the sample key (a library's fused and unfused chains of one graph see its draws); absent at its default.
    if (!for_samples && s.f32_add_rule != Stage{}.f32_add_rule) f.emplace_back("f32_add", to_string(s.f32_add_rule));
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.add_rule = parse_add_rule(f.take("add"), "replay.add");
    s.residual = parse_quant_params(f.take("r"), "replay.r", QuantParams{});
    s.out = parse_quant_params(f.take("s"), "replay.s", QuantParams{});
    if (f.has("f32_add")) s.f32_add_rule = parse_add_rule(f.take("f32_add"), "replay.f32_add");
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    std::vector<StageField> f{{"rule", std::string(to_string(s.add_rule))}, {"residual", s.residual}, {"out", s.out}};
    // How a library's post-op chain adds an f32 intermediate (absent at its default, as in the replay string).
    if (s.f32_add_rule != Stage{}.f32_add_rule) f.push_back({"f32_rule", std::string(to_string(s.f32_add_rule))});
    return f;
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.add_rule = f.parsed("rule", parse_add_rule);
    s.residual = f.quant("residual");
    s.out = f.quant("out");
    if (f.has("f32_rule")) s.f32_add_rule = f.parsed("f32_rule", parse_add_rule);
  }

  std::string facts_illegality(const Stage&, const Convention&, const FusionFacts& facts) const override {
    if (!facts.residual_broadcast) return {};
    return "residual-shape: the residual is broadcast; the fused add reads it element for element at the producer's "
           "output shape";
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_add_stage() { return std::make_unique<AddStage>(); }

}  // namespace fusediff

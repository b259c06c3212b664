// Stage kind `batchnorm`: y = gamma (x - mean) / sqrt(var + eps) + beta per channel. As the pattern's first stage
// (conv2d+batchnorm+act) x is the producer's real output and y is quantized into the producer's boundary u
// (model/batchnorm.h); its fold and reference are the fused path's and the comparison's: every comparison of one
// graph sees the same draws, so they stay out of the sample key. After another stage (conv2d+act+batchnorm,
// Stage::bn_reads_codes) x is that stage's codes dequantized and y has its own boundary `out`: the same operator
// on another input, so one kind. Folding it into the producer across the activation is illegal.
#include <cmath>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

class BatchNormStage final : public StageKindModule {
 public:
  StageKind kind() const override { return StageKind::batchnorm; }
  bool elementwise() const override { return true; }
  QuantParams output_boundary(const Stage& s, const QuantParams& in, const Convention&) const override {
    return s.bn_reads_codes ? s.out : in;
  }

  void validate(const Stage& s, const QuantParams&, const Convention&, const std::string& field) const override {
    if (!(s.bn_eps > 0.0f) || !std::isfinite(s.bn_eps)) throw InputError(field + ".eps: expected a finite value > 0");
    if (s.bn_reads_codes) fusediff::validate(s.out, field + ".out");
  }

  std::string describe(const Stage& s, Fusion fusion, bool) const override {
    std::string part = "batchnorm eps=" + format_float32(s.bn_eps) + " regime " + std::string(to_string(s.bn_regime));
    if (s.bn_reads_codes) return part + " o=" + format_quant_params(s.out);
    if (fusion == Fusion::fold) {
      part += " fold " + format_batchnorm_fold(s.bn_fold) + " reference " + std::string(to_string(s.bn_reference));
    }
    return part;
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool for_samples) const override {
    std::vector<std::pair<std::string, std::string>> f{{"bn_eps", format_float32(s.bn_eps)},
                                                       {"bn_regime", std::string(to_string(s.bn_regime))}};
    if (s.bn_reads_codes) {  // no fold: its own boundary instead
      f.emplace_back("bn_out", format_quant_params(s.out));
      return f;
    }
    if (!for_samples) {
      f.emplace_back("bn_fold", format_batchnorm_fold(s.bn_fold));
      f.emplace_back("bn_ref", to_string(s.bn_reference));
    }
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.bn_eps = parse_float32(f.take("bn_eps"), "replay.bn_eps");
    s.bn_regime = parse_bn_regime(f.take("bn_regime"), "replay.bn_regime");
    if (s.bn_reads_codes) {
      s.out = parse_quant_params(f.take("bn_out"), "replay.bn_out", QuantParams{});
      return;
    }
    s.bn_fold = parse_batchnorm_fold(f.take("bn_fold"), "replay.bn_fold");
    s.bn_reference = parse_bn_reference(f.take("bn_ref"), "replay.bn_ref");
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    if (s.bn_reads_codes) return {{"eps", s.bn_eps}, {"regime", std::string(to_string(s.bn_regime))}, {"out", s.out}};
    return {{"eps", s.bn_eps},
            {"regime", std::string(to_string(s.bn_regime))},
            {"fold", format_batchnorm_fold(s.bn_fold)},
            {"reference", std::string(to_string(s.bn_reference))}};
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.bn_eps = f.float32("eps");
    s.bn_regime = f.parsed("regime", parse_bn_regime);
    if (s.bn_reads_codes) {
      s.out = f.quant("out");
      return;
    }
    s.bn_fold = f.parsed("fold", parse_batchnorm_fold);
    s.bn_reference = f.parsed("reference", parse_bn_reference);
  }

  // The fold moves BatchNorm into the producer's weights and bias: it commutes with nothing nonlinear.
  std::string fusion_illegality(const Stage& s, const Pattern&, Fusion fusion, const Convention& c,
                                std::span<const int32_t>) const override {
    if (fusion != Fusion::fold || !s.bn_reads_codes) return {};
    return "bn-fold-before-activation: the BatchNorm follows the activation (" +
           std::string(to_string(c.activation.kind)) + "); folding it into the conv moves it before the activation";
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_batchnorm_stage() { return std::make_unique<BatchNormStage>(); }

}  // namespace fusediff

// Stage kind `batchnorm`: y = gamma (x - mean) / sqrt(var + eps) + beta per channel of the producer's real output,
// quantized into the producer's boundary u (model/batchnorm.h). Its fold and reference are the fused path's and
// the comparison's: every comparison of one graph sees the same draws, so they stay out of the sample key.
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
  QuantParams output_boundary(const Stage&, const QuantParams& in, const Convention&) const override { return in; }

  void validate(const Stage& s, const QuantParams&, const Convention&, const std::string& field) const override {
    if (!(s.bn_eps > 0.0f) || !std::isfinite(s.bn_eps)) throw InputError(field + ".eps: expected a finite value > 0");
  }

  std::string describe(const Stage& s, Fusion fusion, bool) const override {
    std::string part = "batchnorm eps=" + format_float32(s.bn_eps) + " regime " + std::string(to_string(s.bn_regime));
    if (fusion == Fusion::fold) {
      part += " fold " + format_batchnorm_fold(s.bn_fold) + " reference " + std::string(to_string(s.bn_reference));
    }
    return part;
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool for_samples) const override {
    std::vector<std::pair<std::string, std::string>> f{{"bn_eps", format_float32(s.bn_eps)},
                                                       {"bn_regime", std::string(to_string(s.bn_regime))}};
    if (!for_samples) {
      f.emplace_back("bn_fold", format_batchnorm_fold(s.bn_fold));
      f.emplace_back("bn_ref", to_string(s.bn_reference));
    }
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.bn_eps = parse_float32(f.take("bn_eps"), "replay.bn_eps");
    s.bn_regime = parse_bn_regime(f.take("bn_regime"), "replay.bn_regime");
    s.bn_fold = parse_batchnorm_fold(f.take("bn_fold"), "replay.bn_fold");
    s.bn_reference = parse_bn_reference(f.take("bn_ref"), "replay.bn_ref");
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    return {{"eps", s.bn_eps},
            {"regime", std::string(to_string(s.bn_regime))},
            {"fold", format_batchnorm_fold(s.bn_fold)},
            {"reference", std::string(to_string(s.bn_reference))}};
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.bn_eps = f.float32("eps");
    s.bn_regime = f.parsed("regime", parse_bn_regime);
    s.bn_fold = f.parsed("fold", parse_batchnorm_fold);
    s.bn_reference = f.parsed("reference", parse_bn_reference);
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_batchnorm_stage() { return std::make_unique<BatchNormStage>(); }

}  // namespace fusediff

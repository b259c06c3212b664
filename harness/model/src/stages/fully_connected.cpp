// Stage kind `fc`: a second fully connected layer over the flattened [N, K] tensor it reads, requantized into its
// own boundary by the convention's requant variant and the pattern's multiplier rule.
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

class FullyConnectedStage final : public StageKindModule {
 public:
  StageKind kind() const override { return StageKind::fully_connected; }
  bool elementwise() const override { return false; }
  QuantParams output_boundary(const Stage& s, const QuantParams&, const Convention&) const override { return s.out; }
  PatternGeometry output_geometry(const Stage& s, const PatternGeometry& in) const override {
    PatternGeometry g = in;
    g.channels = s.fc_outputs;  // over a 1x1 producer output: [N, K] -> [N, fc_outputs]
    return g;
  }

  void validate(const Stage& s, const QuantParams&, const Convention&, const std::string& field) const override {
    fusediff::validate(s.out, field + ".out");
    if (s.fc_outputs < 1 || s.fc_outputs > 64) throw InputError(field + ".outputs: expected 1 to 64");
  }

  std::string describe(const Stage& s, Fusion, bool) const override {
    return "fc " + std::to_string(s.fc_outputs) + " outputs y2=" + format_quant_params(s.out);
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool) const override {
    return {{"fc_out", format_quant_params(s.out)}, {"fc_n", std::to_string(s.fc_outputs)}};
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.out = parse_quant_params(f.take("fc_out"), "replay.fc_out", QuantParams{});
    s.fc_outputs = static_cast<int32_t>(parse_int(f.take("fc_n"), "replay.fc_n"));
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    return {{"outputs", s.fc_outputs}, {"out", s.out}};
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.fc_outputs = f.integer("outputs");
    s.out = f.quant("out");
  }

  std::string facts_illegality(const Stage&, const Convention&, const FusionFacts& facts) const override {
    if (facts.fc_input_flattened) return {};
    return "fc-input-flattened: the fully connected stage does not read the producer's output flattened";
  }
  std::string fusion_illegality(const Stage&, const Pattern& p, Fusion fusion, const Convention&,
                                std::span<const int32_t>) const override {
    if (fusion != Fusion::fold || !has_stage(p, StageKind::activation)) return {};
    return "fold-linear-only: FC -> FC folds only without a nonlinearity between the layers";
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_fully_connected_stage() { return std::make_unique<FullyConnectedStage>(); }

}  // namespace fusediff

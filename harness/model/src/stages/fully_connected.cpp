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

  std::string describe(const Stage& s, Fusion fusion, bool) const override {
    std::string part = "fc " + std::to_string(s.fc_outputs) + " outputs y2=" + format_quant_params(s.out);
    if (fusion == Fusion::fold && s.fc_reference != FcReference::graph) {
      part.append(" reference ").append(to_string(s.fc_reference));
    }
    return part;
  }

  // The reference is the comparison's, not the draws': out of the sample key, absent at its default.
  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool for_samples) const override {
    std::vector<std::pair<std::string, std::string>> f{{"fc_out", format_quant_params(s.out)},
                                                       {"fc_n", std::to_string(s.fc_outputs)}};
    if (!for_samples && s.fc_reference != FcReference::graph) f.emplace_back("fc_ref", to_string(s.fc_reference));
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.out = parse_quant_params(f.take("fc_out"), "replay.fc_out", QuantParams{});
    s.fc_outputs = static_cast<int32_t>(parse_int(f.take("fc_n"), "replay.fc_n"));
    if (f.has("fc_ref")) s.fc_reference = parse_fc_reference(f.take("fc_ref"), "replay.fc_ref");
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    std::vector<StageField> f{{"outputs", s.fc_outputs}, {"out", s.out}};
    if (s.fc_reference != FcReference::graph) f.push_back({"reference", std::string(to_string(s.fc_reference))});
    return f;
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.fc_outputs = f.integer("outputs");
    s.out = f.quant("out");
    if (f.has("reference")) s.fc_reference = f.parsed("reference", parse_fc_reference);
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

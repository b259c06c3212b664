// Stage kind `act`: the activation table over the boundary it reads, into Convention::output. Its parameters are
// the convention's (model/convention.h), so it has no fields of its own.
#include <string>

#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

class ActivationStage final : public StageKindModule {
 public:
  StageKind kind() const override { return StageKind::activation; }
  bool elementwise() const override { return true; }
  QuantParams output_boundary(const Stage&, const QuantParams&, const Convention& c) const override {
    return c.output.q;
  }
  void validate(const Stage&, const QuantParams&, const Convention&, const std::string&) const override {}
  std::string describe(const Stage&, Fusion, bool) const override { return {}; }
  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage&, bool) const override { return {}; }
  void parse_replay_fields(Stage&, const ReplayFieldSource&) const override {}
  std::vector<StageField> results_fields(const Stage&) const override { return {}; }
  void read_results_fields(Stage&, const StageFieldReader&) const override {}
  std::string facts_illegality(const Stage&, const Convention& c, const FusionFacts& facts) const override {
    if (facts.activation_supported) return {};
    return "activation-supported: the fused path does not implement " + std::string(to_string(c.activation.kind));
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_activation_stage() { return std::make_unique<ActivationStage>(); }

}  // namespace fusediff

// Stage kinds `maxpool` and `avgpool`: a square window over the spatial grid, in-bounds taps only. A max pool
// selects codes (its boundary is its input's); an average pool rounds into its own by the pool rule.
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

class PoolStage final : public StageKindModule {
 public:
  explicit PoolStage(bool average) : average_(average) {}
  StageKind kind() const override { return average_ ? StageKind::avg_pool : StageKind::max_pool; }
  bool elementwise() const override { return false; }
  QuantParams output_boundary(const Stage& s, const QuantParams& in, const Convention&) const override {
    return average_ ? s.out : in;
  }
  PatternGeometry output_geometry(const Stage& s, const PatternGeometry& in) const override {
    PatternGeometry g = in;
    g.height = pooled_extent(in.height, s.window);
    g.width = pooled_extent(in.width, s.window);
    return g;
  }

  void validate(const Stage& s, const QuantParams& in, const Convention&, const std::string& field) const override {
    const PoolWindow& w = s.window;
    if (w.kernel < 1 || w.kernel > 4 || w.stride < 1 || w.stride > 4 || w.padding < 0 || w.padding >= w.kernel) {
      throw InputError(field + ".window: kernel " + std::to_string(w.kernel) + ", stride " + std::to_string(w.stride) +
                       ", padding " + std::to_string(w.padding) +
                       " (expected kernel and stride in [1, 4], 0 <= padding < kernel)");
    }
    if (!average_) return;
    fusediff::validate(s.out, field + ".out");
    if (s.pool_rule == AvgPoolRule::tflite && !(s.out == in)) {
      throw InputError(field + ".out: " + format_quant_params(s.out) + " differs from its input " +
                       format_quant_params(in) + "; a TFLite average pool assumes equal input and output quantization");
    }
  }

  std::string describe(const Stage& s, Fusion, bool) const override {
    std::string part = std::string(kind().token()) + " " + std::to_string(s.window.kernel) + "x" +
                       std::to_string(s.window.kernel) + "/" + std::to_string(s.window.stride) + " pad " +
                       std::to_string(s.window.padding);
    if (average_) part.append(" ").append(to_string(s.pool_rule)).append(" p=").append(format_quant_params(s.out));
    return part;
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool) const override {
    std::vector<std::pair<std::string, std::string>> f{{"pool", std::to_string(s.window.kernel) + ":" +
                                                                    std::to_string(s.window.stride) + ":" +
                                                                    std::to_string(s.window.padding)}};
    if (average_) {
      f.emplace_back("pool_rule", to_string(s.pool_rule));
      f.emplace_back("p", format_quant_params(s.out));
    }
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    const std::vector<int64_t> w = split_integers(f.take("pool"), "replay.pool");
    if (w.size() != 3) throw InputError("replay.pool: expected KERNEL:STRIDE:PADDING");
    s.window = PoolWindow{static_cast<int32_t>(w[0]), static_cast<int32_t>(w[1]), static_cast<int32_t>(w[2])};
    if (average_) {
      s.pool_rule = parse_avg_pool_rule(f.take("pool_rule"), "replay.pool_rule");
      s.out = parse_quant_params(f.take("p"), "replay.p", QuantParams{});
    }
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    std::vector<StageField> f{{"window", s.window}};
    if (average_) {
      f.push_back({"rule", std::string(to_string(s.pool_rule))});
      f.push_back({"out", s.out});
    }
    return f;
  }
  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.window = f.window("window");
    if (average_) {
      s.pool_rule = f.parsed("rule", parse_avg_pool_rule);
      s.out = f.quant("out");
    }
  }

  // A pool moves before the activation only if the applied table is non-decreasing over the codes it can read (max
  // pool); an average commutes with no nonlinear function.
  std::string fusion_illegality(const Stage&, const Pattern&, Fusion fusion, const Convention& c,
                                std::span<const int32_t> table) const override {
    if (fusion != Fusion::pool_first) return {};
    if (average_) return "pool-before-activation: an average pool commutes with no nonlinear activation";
    for (size_t i = 1; i < table.size(); ++i) {
      if (table[i] < table[i - 1]) {
        const int32_t qmin = c.intermediate.q.type.qmin();
        return "pool-before-activation: the applied table is not non-decreasing over the reachable codes (code " +
               std::to_string(qmin + static_cast<int32_t>(i) - 1) + " -> " + std::to_string(table[i - 1]) + ", code " +
               std::to_string(qmin + static_cast<int32_t>(i)) + " -> " + std::to_string(table[i]) + ")";
      }
    }
    return {};
  }
  std::string fusion_keeps_meaning(const Stage&, const Pattern&, Fusion fusion, const Convention&,
                                   std::span<const int32_t>) const override {
    if (fusion != Fusion::pool_first || average_) return {};
    return "a max pool selects a code; before a non-decreasing table it selects the same one";
  }

 private:
  bool average_;
};

}  // namespace

std::unique_ptr<const StageKindModule> make_max_pool_stage() { return std::make_unique<PoolStage>(false); }
std::unique_ptr<const StageKindModule> make_avg_pool_stage() { return std::make_unique<PoolStage>(true); }

}  // namespace fusediff

// XNNPACK as one backend module (model/backend.h): its paths, the convention they declare, its share of the suite.
#include "fusediff/fused/xnnpack_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/model/library_backend.h"
#include "xnnpack_path.h"

#ifndef FUSEDIFF_XNNPACK_VERSION
#define FUSEDIFF_XNNPACK_VERSION "unknown"
#endif

namespace fusediff::fused::xnnpack {

namespace {
// The graph each case measures XNNPACK against: TFLite's reference kernels (double rounding, half away from zero).
// The same-convention cases run the convention XNNPACK declares instead (XnnpackConvention).
constexpr ToolchainDefaults kGraphDefaults = kTfliteDefaults;

// The 8-bit types XNNPACK has the activation's operator for (elu: qs8 only; leaky_relu: qu8 only).
std::vector<QuantType> OperatorTypes(ActivationKind kind) {
  const QuantType s8{ScalarType::int8, false}, u8{ScalarType::uint8, false};
  switch (kind) {
    case ActivationKind::relu:
    case ActivationKind::relu6:
    case ActivationKind::sigmoid:
    case ActivationKind::tanh: return {s8, u8};
    case ActivationKind::elu: return {s8};
    case ActivationKind::leaky_relu: return {u8};
    default: return {};
  }
}

// The output quantization XNNPACK's operator takes for the activation: the intermediate's own for the clamps (they
// do not requantize), the fixed one of sigmoid and tanh (lut-elementwise-nc.c:243-255, 280-292, 321-333, 358-369),
// the suite's default for elu and leaky_relu.
QuantParams OperatorOutput(ActivationKind kind, const QuantParams& u) {
  const bool s8 = u.type.scalar == ScalarType::int8;
  switch (kind) {
    case ActivationKind::relu:
    case ActivationKind::relu6: return u;
    case ActivationKind::sigmoid: return QuantParams{u.type, 0x1p-8f, s8 ? -128 : 0};
    case ActivationKind::tanh: return QuantParams{u.type, 0x1p-7f, s8 ? 0 : 128};
    default: return DefaultOutput(kind, u.type);
  }
}

// A quantization of [lo, hi] in `type` (8-bit): the int8 one of Int8Range, shifted by 128 for uint8.
QuantParams RangeIn(const QuantType& type, double lo, double hi) {
  QuantParams q = Int8Range(lo, hi);
  if (type.scalar == ScalarType::uint8) {
    q.type = type;
    q.zero_point += 128;
  }
  return q;
}

// The pattern's stages as XNNPACK's operators take them: the add's residual spans half the activation's input domain
// around 0 and its sum has u's quantization (as the built-in pattern cases); pools of `window`; an average pool keeps
// its input's quantization. The graph's add and average rules: XNNPACK's own (same convention; its average counts
// padding), TFLite's (`cross`; it does not).
Pattern XnnpackPattern(const std::string& name, ActivationKind kind, const Convention& c, bool cross,
                       const PoolWindow& window) {
  Pattern p = parse_pattern_name(name, "--pattern");
  for (Stage& stage : p.stages) {
    if (stage.kind == StageKind::add) {
      const ActivationDomain d = default_domain(kind);
      const double half = 0.5 * (d.input_hi - d.input_lo);
      stage.add_rule = cross ? AddRule::tflite : AddRule::fixed_point_half_up;
      stage.residual = RangeIn(c.intermediate.q.type, -0.5 * half, 0.5 * half);
      stage.out = c.intermediate.q;
    } else if (stage.kind == StageKind::max_pool || stage.kind == StageKind::avg_pool) {
      stage.window = window;
      stage.pool_rule = cross ? AvgPoolRule::tflite : AvgPoolRule::fixed_point_half_away;
      stage.out = c.output.q;
    }
  }
  return p;
}

// The cases of one activation and pattern: per operator type, the fused graph under its declared convention and
// across to TFLite's, and the unfused graph.
// `full` (--fused named an XNNPACK path): every type the operators take; an activation XNNPACK has no operator for
// keeps one int8 case, which says why it cannot run. Otherwise (the default suite, sized for CI: its reports' limits)
// the type `type` where the operators take it, and no unfused case for a table activation, whose unfused graph is the
// fused one's operators (no producer fuses a table).
std::vector<CaseSpec> Comparisons(const SuiteOptions& options, const std::string& pattern, ActivationKind kind,
                                  bool full, ScalarType type_of_default = ScalarType::int8) {
  struct Comparison3 {
    std::string_view path;
    Comparison comparison;
    const char* label;
  };
  const Comparison3 comparisons[] = {{kFused, Comparison::same_convention, "xnnpack"},
                                     {kFused, Comparison::cross_convention, "xnnpack.cross"},
                                     {kUnfused, Comparison::same_convention, "xnnpack_unfused"}};
  std::vector<CaseSpec> specs;
  std::vector<QuantType> types = OperatorTypes(kind);
  if (pattern == "conv2d+act+avgpool") std::erase(types, QuantType{ScalarType::int8, false});  // qu8 only
  if (types.empty() && full) types.push_back(QuantType{ScalarType::int8, false});
  if (!full && types.size() > 1) std::erase_if(types, [&](const QuantType& t) { return t.scalar != type_of_default; });
  // Pools: 2x2 with stride 2; an average, under --fused xnnpack, also 3x3 with stride 2 and padding 1 (its corners
  // count 5 padding taps; left out of the default suite, whose HTML report must stay under 2 MB).
  std::vector<std::pair<PoolWindow, std::string>> windows = {{PoolWindow{2, 2, 0}, ""}};
  if (pattern == "conv2d+act+avgpool" && full) windows.emplace_back(PoolWindow{3, 2, 1}, "pad1.");
  for (const QuantType& type : types) {
    Convention c = SuiteConvention(options, kind, type, kGraphDefaults);
    if (!options.output) c.output.q = OperatorOutput(kind, c.intermediate.q);
    validate(c);
    for (const auto& [window, infix] : windows) {
      for (const Comparison3& k : comparisons) {
        if (options.backend == kUnfused && k.path != kUnfused) continue;
        if (!full && k.path == kUnfused && IsTableActivation(kind)) continue;
        CaseSpec spec;
        spec.mix = options.mix;
        spec.source = SampleSource::conv;
        spec.convention = c;
        spec.pattern = XnnpackPattern(pattern, kind, c, k.comparison == Comparison::cross_convention, window);
        spec.backend = std::string(k.path);
        spec.comparison = k.comparison;
        spec.mutant = options.mutant;
        spec.samples = options.samples;
        const std::string prefix = pattern == "conv2d+act" ? "" : pattern + "." + infix;
        spec.name =
            prefix + std::string(to_string(kind)) + "." + to_string(c.intermediate.q.type) + "." + k.label + ".conv";
        specs.push_back(std::move(spec));
      }
    }
  }
  return specs;
}

class Xnnpack final : public LibraryBackend {
 public:
  Xnnpack() : LibraryBackend(kFused, kUnfused) {}

  KeyValues provenance() const override { return {{"library", "XNNPACK"}, {"version", FUSEDIFF_XNNPACK_VERSION}}; }
  std::string LibraryDescription() const override { return std::string("XNNPACK ") + FUSEDIFF_XNNPACK_VERSION; }
  bool black_box() const override { return true; }
  std::vector<std::string> stage_kinds() const override {
    std::vector<std::string> names;
    for (StageKind kind : {StageKind::activation, StageKind::add, StageKind::max_pool, StageKind::avg_pool}) {
      names.emplace_back(to_string(kind));
    }
    return names;
  }
  std::vector<std::string> patterns() const override {
    return {"conv2d+act", "fc+act", "conv2d+add+act", "conv2d+act+maxpool", "conv2d+act+avgpool"};
  }

  // Both graphs compute the same arithmetic (docs/xnnpack.md): the fp32 requantization, the clamp on codes and the
  // binary32 tables built with this system's libm.
  Convention DeclaredConvention(const CaseSpec& spec) const override { return XnnpackConvention(spec.convention); }
  // Every declared rule is exact integer or binary32 arithmetic the reference evaluates step by step: 0.
  Tolerance DefaultTolerance(const CaseSpec&) const override { return Tolerance{0, std::nullopt, std::nullopt}; }

  // Its add, by the name its cases and results give it (model/pattern.h).
  ConventionNames convention_names() const override { return {{{"xnnpack_add", AddRule::fixed_point_half_up}}, {}}; }

  bool has_own_suite() const override { return true; }
  std::vector<CaseSpec> ActivationSuiteCases(const SuiteOptions& options, ActivationKind kind,
                                             bool selected) const override {
    if (options.float_conv || options.boundary_float) return {};
    // The default suite alternates the types: int8 for relu, sigmoid (elu: int8 only), uint8 for relu6, tanh
    // (leaky_relu: uint8 only).
    const bool s8 = kind == ActivationKind::relu || kind == ActivationKind::sigmoid;
    return Comparisons(options, "conv2d+act", kind, selected, s8 ? ScalarType::int8 : ScalarType::uint8);
  }
  // The default suite: per pattern one clamp and one table activation; under --fused xnnpack --pattern P, every one.
  std::vector<CaseSpec> PatternSuiteCases(const SuiteOptions& options, const std::optional<std::string>& only,
                                          bool selected) const override {
    struct Share {
      const char* pattern;
      ActivationKind clamp, table;
      ScalarType clamp_type, table_type;
    };
    const ScalarType s8 = ScalarType::int8, u8 = ScalarType::uint8;
    const Share shares[] = {{"fc+act", ActivationKind::relu6, ActivationKind::sigmoid, s8, u8},
                            {"conv2d+add+act", ActivationKind::relu, ActivationKind::sigmoid, u8, s8},
                            {"conv2d+act+maxpool", ActivationKind::relu6, ActivationKind::tanh, s8, u8},
                            {"conv2d+act+avgpool", ActivationKind::relu, ActivationKind::sigmoid, u8, u8}};
    std::vector<CaseSpec> cases;
    for (const Share& share : shares) {
      if (only && *only != share.pattern) continue;
      for (ActivationKind kind : kAllActivations) {
        if (options.activation && *options.activation != kind) continue;
        if (!(selected && only) && kind != share.clamp && kind != share.table) continue;
        const ScalarType type = kind == share.clamp ? share.clamp_type : share.table_type;
        for (CaseSpec& spec : Comparisons(options, share.pattern, kind, selected && only, type)) {
          cases.push_back(std::move(spec));
        }
      }
    }
    return cases;
  }
  std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* why) const override {
    return CreateXnnpackPath(spec, why);
  }
};
}  // namespace

const Backend& XnnpackBackend() {
  static const Xnnpack backend;
  return backend;
}

}  // namespace fusediff::fused::xnnpack

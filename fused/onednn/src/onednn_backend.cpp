// oneDNN as one backend module (model/backend.h): everything fusediff asks about oneDNN beyond its kernels.
#include <string>
#include <vector>

#include "fusediff/fused/onednn_defects.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/fused/onednn_suite.h"
#include "fusediff/model/library_backend.h"

namespace fusediff::fused::onednn {

namespace detail {
std::string_view EmbeddedLedger();  // known_defects.cpp, generated from known_defects.json
}  // namespace detail

namespace {
constexpr std::string_view kFused = "onednn";
constexpr std::string_view kUnfused = "onednn_unfused";

class OneDnn final : public LibraryBackend {
 public:
  OneDnn() : LibraryBackend(kFused, kUnfused) {}

  KeyValues provenance() const override {
    return {{"library", "oneDNN"}, {"version", LibraryVersion()}, {"isa", EffectiveIsa()}};
  }
  std::string LibraryDescription() const override { return "oneDNN " + LibraryVersion() + ", ISA " + EffectiveIsa(); }
  bool black_box() const override { return true; }
  std::vector<std::string> stage_kinds() const override {
    std::vector<std::string> names;
    for (StageKind kind : {StageKind::activation, StageKind::add, StageKind::max_pool, StageKind::fully_connected,
                           StageKind::layernorm}) {
      names.emplace_back(to_string(kind));
    }
    return names;
  }
  std::vector<std::string> patterns() const override {
    return {"conv2d+act", "conv2d+add+act", "fc+act", "conv2d+act+maxpool", "fc+layernorm+act", "fc+add+layernorm"};
  }

  // The fused path keeps the intermediate in binary32 (requant f32_half_even, no code; the output spec unchanged),
  // but for the layer norm patterns, whose paths keep u as codes (onednn_layernorm.cpp); both paths compute the
  // activation's scaling and zero point in binary32 (docs/onednn.md).
  Convention DeclaredConvention(const CaseSpec& spec) const override {
    Convention c = spec.convention;
    if (VariantOf(spec) == OneDnnVariant::fused && !has_stage(spec.pattern, StageKind::layernorm)) {
      c.intermediate.kind = IntermediateKind::f32;
      c.intermediate.stored = FloatBoundary{};  // oneDNN's post-ops read the binary32 value
      c.requant = RequantVariant::f32_half_even;
      c.intermediate.rounding = RoundingMode::half_to_even;
    }
    c.post_ops = PostOpArithmetic::binary32;
    return c;
  }

  // oneDNN's same-convention comparisons run its binary32 post-op rule (PostOpArithmetic::binary32), which the
  // reference emulates step by step (docs/onednn.md, "Exact binary32 post-ops"). Where oneDNN's eltwise is exact
  // on its inputs (relu, relu6 = clip, leaky_relu, hard_swish in the jit injector's order; bit for bit on every
  // kernel and ISA cap tried) nothing is left to differ: 0. The other algorithms approximate f to a few binary32
  // ulps (bench/eltwise_error, table in docs/onednn.md); that moves t across a rounding tie when t lies within a
  // few ulps of one, by 1 LSB at most: 1. A pattern without an activation (fc+add+layernorm, whose layer norm runs
  // in its declared order, docs/summation-orders.md) has nothing approximated: 0.
  Tolerance DefaultTolerance(const CaseSpec& spec) const override {
    const ActivationKind a = spec.convention.activation.kind;
    const bool exact_in_binary32 = a == ActivationKind::relu || a == ActivationKind::relu6 ||
                                   a == ActivationKind::leaky_relu || a == ActivationKind::hard_swish ||
                                   !has_stage(spec.pattern, StageKind::activation);
    return Tolerance{exact_in_binary32 ? 0 : 1, std::nullopt, std::nullopt};
  }

  std::string_view KnownDefectsJson() const override { return detail::EmbeddedLedger(); }
  std::string_view KnownDefectsName() const override { return "fused/onednn/known_defects.json (embedded)"; }
  // Its conventions, by the names its cases and results have always had (model/pattern.h, model/batchnorm.h).
  ConventionNames convention_names() const override {
    return {{{"onednn_unfused", AddRule::binary32_unfused},
             {"onednn_sum", AddRule::f32_one_rounding},
             {"onednn_binary", AddRule::f32_two_roundings}},
            {{"onednn", flush_subnormals_float_boundary}}};
  }
  std::vector<DefectRuleKind> DefectRules() const override { return onednn::DefectRules(); }
  std::vector<DefectModelKind> DefectModels() const override { return onednn::DefectModels(); }
  // oneDNN reads its cap once, at its first dispatch: each cap needs its own process.
  DispatchControl dispatch() const override {
    return {"ONEDNN_MAX_CPU_ISA",
            {"DNNL_MAX_CPU_ISA"},
            {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_AMX"},
            "isa"};
  }
  // The default suite's oneDNN comparisons of each activation (with its float convolutions unless --float-conv
  // asks for one), and its chains of the representative patterns; under --fused, every activation's chains of
  // --pattern.
  bool has_own_suite() const override { return true; }
  std::vector<CaseSpec> ActivationSuiteCases(const SuiteOptions& options, ActivationKind kind, bool) const override {
    std::vector<CaseSpec> cases = OneDnnComparisons(options, kind);
    if (!options.float_conv) {
      for (CaseSpec& spec : OneDnnFloatConvComparisons(options, kind)) cases.push_back(std::move(spec));
    }
    return cases;
  }
  std::vector<CaseSpec> PatternSuiteCases(const SuiteOptions& options, const std::optional<std::string>& only,
                                          bool selected) const override {
    if (!selected || !only) return OneDnnPatternCases(options, only);
    std::vector<CaseSpec> cases;
    for (ActivationKind kind : kAllActivations) {
      if (options.activation && *options.activation != kind) continue;
      for (CaseSpec& spec : OneDnnPatternComparisons(options, *only, kind)) cases.push_back(std::move(spec));
    }
    return cases;
  }
  std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* why) const override {
    return onednn::CreatePath(spec, why);
  }
};
}  // namespace

OneDnnVariant VariantOf(const CaseSpec& spec) {
  return spec.backend == kUnfused ? OneDnnVariant::unfused : OneDnnVariant::fused;
}

const Backend& OneDnnBackend() {
  static const OneDnn backend;
  return backend;
}

}  // namespace fusediff::fused::onednn

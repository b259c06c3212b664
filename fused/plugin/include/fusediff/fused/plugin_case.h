#pragma once
// The case a plugin is given once (fusediff_plugin.h fusediff_case), as one C++ struct built from a CaseSpec, with
// its two encodings: the C structs of the ABI header (in process) and JSON (the subprocess protocol's `prepare`
// message). The JSON field names are the C field names; enum fields are fusediff's names ("double_rounding").
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/fused_path.h"
#include "fusediff/model/pattern.h"
#include "fusediff/model/quant.h"
#include "fusediff/model/table.h"
#include "fusediff/plugin/fusediff_plugin.h"

namespace fusediff::fused::plugin {

// A quantization boundary with how values are rounded into it (fusediff_boundary).
struct PluginBoundary {
  ScalarType type = ScalarType::int8;
  bool narrow = false;
  int32_t qmin = 0, qmax = 0;
  float scale = 1.0f;
  int32_t zero_point = 0;
  RoundingMode rounding = RoundingMode::half_away_from_zero;
  ZeroPointOrder zero_point_order = ZeroPointOrder::after_rounding;
  friend bool operator==(const PluginBoundary&, const PluginBoundary&) = default;
};

struct PluginStage {
  std::string kind;  // the stage kind's token ("act", "add", ...)
  std::string rule;  // its arithmetic rule by fusediff's name; empty where it has none
  PluginBoundary out;
  PluginBoundary residual;
  int32_t window_kernel = 0, window_stride = 0, window_padding = 0;
  int32_t fc_outputs = 0;
  friend bool operator==(const PluginStage&, const PluginStage&) = default;
};

struct PluginCase {
  std::string name;
  Producer producer = Producer::conv2d;
  DrawLimits limits;  // max_batch ... transposed, weight_range
  RequantVariant requant = RequantVariant::double_rounding;
  IntermediateKind intermediate_kind = IntermediateKind::quantized;
  PluginBoundary intermediate;
  PluginBoundary output;
  PostOpArithmetic post_ops = PostOpArithmetic::exact;
  ActivationKind activation = ActivationKind::relu;
  float alpha = 0.0f;
  std::optional<TableKind> table_kind;  // none: no table handed over
  std::vector<int32_t> table_lut;
  std::vector<int32_t> table_knots;
  std::vector<PwlSegment> table_segments;
  std::vector<PluginStage> stages;
  std::vector<std::string> features;  // every feature the case uses (CaseFeatures)
  friend bool operator==(const PluginCase&, const PluginCase&) = default;
};

// The features a case uses, by name: "producer:conv2d", "producer:fc", "stage:KIND" for each stage,
// "table:lut" / "table:lut_interp" / "table:pwl" for the table handed over, "intermediate:f32",
// "intermediate:stored" (an f32 intermediate stored in a narrower float), "output:float", "conv:float",
// "fusion:NAME" for a fusion other than keep_all. A plugin gets the case only when it claims all of them.
std::vector<std::string> CaseFeatures(const CaseSpec& spec);

// The case as a plugin sees it, under its draw limits: the convention, the pattern's stages and the activation's
// table (the case's external table, or TFLite's LUTPopulate for the activation's input boundary: lut for an 8-bit
// one, lut_interp for int16 -> int16 with zero points 0; none otherwise).
PluginCase MakePluginCase(const CaseSpec& spec, const DrawLimits& limits);

// The convention the case describes (its stages aside): what a C++ plugin that wraps fusediff's own kernels
// rebuilds (bench/, tests).
Convention ConventionOf(const PluginCase& c);

// ---- JSON.
nlohmann::json ToJson(const PluginCase& c);
// Throws InputError naming `field` (e.g. "prepare.case.output.scale") for a missing or malformed field.
PluginCase PluginCaseFromJson(const nlohmann::json& j, const std::string& field = "case");

// ---- C. The C encoding of a case: owns every array and string the fusediff_case points into.
class CCase {
 public:
  explicit CCase(const PluginCase& c);
  CCase(const CCase&) = delete;
  CCase& operator=(const CCase&) = delete;
  const fusediff_case* get() const { return &case_; }

 private:
  PluginCase source_;
  std::vector<fusediff_stage> stages_;
  std::vector<fusediff_pwl_segment> segments_;
  std::vector<const char*> features_;
  fusediff_case case_{};
};
// The inverse (a C++ plugin reading its case; the round trip's tests). Reads the fields its struct_size covers;
// throws InputError for an enum value outside the header's.
PluginCase PluginCaseFromC(const fusediff_case& c);

// The C encoding of a batch of draws, into scratch that a transport reuses from batch to batch (the per-draw cost
// is a few pointer stores: the tensors are not copied). `messages`: one host-owned reason buffer per draw.
class CBatch {
 public:
  static constexpr uint32_t kMessageCapacity = 512;
  // Points the batch at draws[i] and y[i]; status poisoned to FUSEDIFF_ERROR, so a draw the plugin leaves alone
  // shows as one.
  fusediff_batch* Encode(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y);
  // What became of draw i after run().
  DrawOutcome Outcome(size_t i) const;

 private:
  std::vector<fusediff_draw> draws_;
  std::vector<fusediff_operands> operands_;
  std::vector<char> messages_;
  fusediff_batch batch_{};
};

// The enums' C values (fusediff_plugin.h) and back; the mapping tables are checked at compile time (abi.cpp).
int32_t ToC(ScalarType v);
int32_t ToC(RoundingMode v);
int32_t ToC(ZeroPointOrder v);
int32_t ToC(RequantVariant v);
int32_t ToC(IntermediateKind v);
int32_t ToC(PostOpArithmetic v);
int32_t ToC(ActivationKind v);
int32_t ToC(TableKind v);
int32_t ToC(Producer v);
int32_t ToC(ConvOp v);
int32_t ToC(WeightRange v);
// From C: InputError naming `field` for a value the header does not define.
ScalarType ScalarTypeFromC(int32_t v, const std::string& field);
RoundingMode RoundingFromC(int32_t v, const std::string& field);
ZeroPointOrder ZeroPointOrderFromC(int32_t v, const std::string& field);
RequantVariant RequantFromC(int32_t v, const std::string& field);
IntermediateKind IntermediateKindFromC(int32_t v, const std::string& field);
PostOpArithmetic PostOpsFromC(int32_t v, const std::string& field);
ActivationKind ActivationFromC(int32_t v, const std::string& field);
TableKind TableKindFromC(int32_t v, const std::string& field);
Producer ProducerFromC(int32_t v, const std::string& field);
WeightRange WeightRangeFromC(int32_t v, const std::string& field);

}  // namespace fusediff::fused::plugin

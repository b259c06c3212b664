#pragma once
// `fusediff export-onnx`: fusediff's patterns as QDQ ONNX models (opset 17, onnx_spec rules), with their draws as
// inputs, and two whole models for the bisect: a small ResNet-style network (QDQ with BN folded, or float with BN)
// and a model with two independent causes of output differences. Deterministic: weights and draws come from the
// counter-based generator.
#include <cstdint>
#include <string>
#include <vector>

#include "fusediff/fused/ort_runtime.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/pattern.h"
#include "fusediff/onnx/onnx_io.h"

namespace fusediff::bisect {

inline constexpr int64_t kExportOpset = 17;  // Debian's libonnx 1.12

struct ExportOptions {
  uint64_t seed = 1;
  // true: every scale a power of two, so that ONNX Runtime's f32 graph is exact and must equal the reference;
  // false: the intermediate and output scales times 3/4, so that a fused kernel's rounded multiplier meets exact ties.
  bool power_of_two = true;
  // u and y int16 (com.microsoft QuantizeLinear/DequantizeLinear; conv2d+act only); the name gains ".int16".
  bool int16 = false;
};

struct PatternExport {
  std::string name;  // "conv2d+act.relu"
  std::string stem;  // file stem "conv2d_act_relu"
  std::string model_bytes;
  std::vector<onnx_io::Tensor> inputs;  // the draw, as the float values of its codes
  std::string output;                   // the graph output: the final QuantizeLinear's codes
  // What the reference evaluates for the same draw.
  Pattern pattern;
  Convention convention;
  PatternDraw draw;
  bool exact_activation = true;  // relu, relu6 (clip): ORT's f32 graph is exact; otherwise MLAS approximations
};

// The (pattern, activation) pairs export-onnx writes, and those it lists as unsupported with the reason.
struct ExportPlan {
  std::vector<std::pair<std::string, ActivationKind>> supported;
  std::vector<std::pair<std::string, ActivationKind>> supported_int16;  // exported with ExportOptions::int16
  std::vector<std::string> unsupported;  // "conv2d+act.tanh: no opset-17 or com.microsoft operator mapping"
};
ExportPlan PlanPatternExports();
PatternExport BuildPatternExport(const std::string& pattern, ActivationKind activation, const ExportOptions& o);

// ORT with optimizations disabled against reference::GraphReference on the export's draw.
struct BaselineCheck {
  uint64_t elements = 0;
  uint64_t differing = 0;
  int64_t max_abs_lsb = 0;
  uint64_t allowed_near_tie = 0;       // +-1 where the reference classified the element near a rounding tie
  std::vector<std::string> listed;     // each differing element: index, reference, ORT, near a tie or not
  bool pass = false;                   // tolerance 0 for exact activations; elsewhere +-1 only near a tie
};
BaselineCheck VerifyBaseline(fused::ort::Runtime& runtime, const std::string& model_path, const PatternExport& e);

struct ModelExport {
  std::string name, stem, note;
  std::string model_bytes;
  std::vector<onnx_io::Tensor> inputs;
};
// conv-bn-relu, conv-bn, + residual, relu, global average pool, FC head (8 channels, 8x8, 10 classes).
//   qdq:   BN folded into the convolutions at export, every tensor quantized (int8);
//   float: BN kept as BatchNormalization with constant weights (ConvBNFusion and ConvActivationFusion apply).
ModelExport BuildResNet(bool qdq, const ExportOptions& o);
// Two branches of one input that ONNX Runtime changes independently: a QDQ uint8 average pool with an odd output
// zero point (output a; QDQSelectorActionTransformer -> QLinearAveragePool, which adds the zero point before its
// one rounding) and a float convolution + BatchNormalization (output b; ConvBNFusion rounds the folded weights). Disabling
// either alone leaves the other's differences: leave-one-out finds neither, one-on finds both.
ModelExport BuildTwinCauses(const ExportOptions& o);
// Transformer blocks as exporters write them, for ONNX Runtime's LayerNorm, SkipLayerNorm, RMS-norm and GELU fusions
// (transformer_models.cpp): fc+layernorm+act (GELU with Erf), fc+add+layernorm (bias + skip, [B, S, H]), the
// feed-forward block with GELU by Erf or by Tanh,
// an RMS norm, and QDQ int8 around a float LayerNormalization.
std::vector<ModelExport> BuildTransformerModels(const ExportOptions& o);

}  // namespace fusediff::bisect

// Transformer blocks built the way exporters write them, so that ONNX Runtime's normalization and GELU fusions
// (issue 30) fire on them: a LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div (LayerNormFusionL1/L2), an RMS
// norm decomposed (SimplifiedLayerNormFusion), a bias + skip Add before LayerNormalization (SkipLayerNormFusion,
// BiasSkipLayerNormFusion), and GELU written with Erf (GeluFusionL1/L2, BiasGeluFusion) or with Tanh (FastGeluFusion).
// Each model is float; one keeps QuantizeLinear/DequantizeLinear around a float LayerNormalization (the QDQ form
// of ORT's quantized transformers). `fusediff bisect` then measures what each fusion does to the outputs, in r.
#include <cmath>

#include "fusediff/bisect/export.h"
#include "fusediff/generators/counter_rng.h"

namespace fusediff::bisect {

namespace {

using onnx_io::DType;
using onnx_io::ModelBuilder;
using onnx_io::Tensor;
using Attr = ModelBuilder::Attribute;

// BERT-like sizes: rows of H = 64 features (ONNX Runtime's vectorised LayerNorm takes rows of 8 and more).
constexpr int64_t kBatch = 2, kSeq = 8, kIn = 32, kHidden = 64;

std::vector<float> Uniform(generators::CounterRng& rng, size_t n, double lo, double hi) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform01());
  return v;
}

void Scalar(ModelBuilder& b, const std::string& name, float value) { b.AddInitializer(Tensor::FromFloats(name, {}, {value})); }

// y = x W + bias, x [B, S, kIn] -> [B, S, kHidden], the bias around `offset`. Before a LayerNorm the offset is 6:
// each row's mean is large against its spread, where the order of a LayerNorm's sums shows most.
void Dense(ModelBuilder& b, generators::CounterRng& rng, const std::string& x, const std::string& y, double offset) {
  b.AddInitializer(Tensor::FromFloats("fc_w", {kIn, kHidden}, Uniform(rng, kIn * kHidden, -0.3, 0.3)));
  b.AddInitializer(Tensor::FromFloats("fc_b", {kHidden}, Uniform(rng, kHidden, offset - 0.5, offset + 0.5)));
  b.AddNode("MatMul", {x, "fc_w"}, {"fc_mm"});
  b.AddNode("Add", {"fc_mm", "fc_b"}, {y});
}

// The feed-forward block's second layer, [B, S, kHidden] -> [B, S, kIn]: ORT fuses a GELU only where its output is
// not a graph output (fast_gelu_fusion.cc, CheckNode: GetNodeOutputsInGraphOutputs(node).empty()).
void Dense2(ModelBuilder& b, generators::CounterRng& rng, const std::string& x, const std::string& y) {
  b.AddInitializer(Tensor::FromFloats("fc2_w", {kHidden, kIn}, Uniform(rng, kHidden * kIn, -0.2, 0.2)));
  b.AddNode("MatMul", {x, "fc2_w"}, {y});
}

void GammaBeta(ModelBuilder& b, generators::CounterRng& rng) {
  b.AddInitializer(Tensor::FromFloats("ln_gamma", {kHidden}, Uniform(rng, kHidden, 0.5, 1.5)));
  b.AddInitializer(Tensor::FromFloats("ln_beta", {kHidden}, Uniform(rng, kHidden, -0.2, 0.2)));
}

// LayerNorm over the last axis as PyTorch's exporter writes it (ORT's LayerNormFusion matches this chain).
void DecomposedLayerNorm(ModelBuilder& b, const std::string& x, const std::string& y) {
  const std::vector<Attr> last = {Attr::Ints("axes", {-1})};
  Scalar(b, "ln_two", 2.0f);
  Scalar(b, "ln_eps", 1e-5f);
  b.AddNode("ReduceMean", {x}, {"ln_mean"}, last);
  b.AddNode("Sub", {x, "ln_mean"}, {"ln_d"});
  b.AddNode("Pow", {"ln_d", "ln_two"}, {"ln_d2"});
  b.AddNode("ReduceMean", {"ln_d2"}, {"ln_var"}, last);
  b.AddNode("Add", {"ln_var", "ln_eps"}, {"ln_var_eps"});
  b.AddNode("Sqrt", {"ln_var_eps"}, {"ln_std"});
  b.AddNode("Div", {"ln_d", "ln_std"}, {"ln_xhat"});
  b.AddNode("Mul", {"ln_xhat", "ln_gamma"}, {"ln_scaled"});
  b.AddNode("Add", {"ln_scaled", "ln_beta"}, {y});
}

// GELU with Erf: x * 0.5 * (1 + erf(x / sqrt 2)) (GeluFusion).
void ErfGelu(ModelBuilder& b, const std::string& x, const std::string& y) {
  Scalar(b, "gelu_sqrt2", static_cast<float>(std::sqrt(2.0)));
  Scalar(b, "gelu_one", 1.0f);
  Scalar(b, "gelu_half", 0.5f);
  b.AddNode("Div", {x, "gelu_sqrt2"}, {"gelu_div"});
  b.AddNode("Erf", {"gelu_div"}, {"gelu_erf"});
  b.AddNode("Add", {"gelu_erf", "gelu_one"}, {"gelu_add"});
  b.AddNode("Mul", {x, "gelu_add"}, {"gelu_mul"});
  b.AddNode("Mul", {"gelu_mul", "gelu_half"}, {y});
}

// GELU with Tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (FastGeluFusion).
void TanhGelu(ModelBuilder& b, const std::string& x, const std::string& y) {
  Scalar(b, "fg_three", 3.0f);
  Scalar(b, "fg_c", 0.044715f);
  Scalar(b, "fg_k", static_cast<float>(std::sqrt(2.0 / 3.14159265358979323846)));
  Scalar(b, "fg_one", 1.0f);
  Scalar(b, "fg_half", 0.5f);
  b.AddNode("Pow", {x, "fg_three"}, {"fg_cube"});
  b.AddNode("Mul", {"fg_cube", "fg_c"}, {"fg_cubec"});
  b.AddNode("Add", {x, "fg_cubec"}, {"fg_inner"});
  b.AddNode("Mul", {"fg_inner", "fg_k"}, {"fg_scaled"});
  b.AddNode("Tanh", {"fg_scaled"}, {"fg_tanh"});
  b.AddNode("Add", {"fg_tanh", "fg_one"}, {"fg_add"});
  b.AddNode("Mul", {x, "fg_half"}, {"fg_halfx"});
  b.AddNode("Mul", {"fg_halfx", "fg_add"}, {y});
}

ModelExport Finish(ModelBuilder& b, ModelExport m, uint64_t seed, uint64_t stream, bool skip) {
  generators::CounterRng in(seed, 0x7f0, stream, generators::StreamPurpose::input);
  m.inputs.push_back(Tensor::FromFloats("x", {kBatch, kSeq, kIn}, Uniform(in, kBatch * kSeq * kIn, -2, 2)));
  if (skip) m.inputs.push_back(Tensor::FromFloats("skip", {kBatch, kSeq, kHidden}, Uniform(in, kBatch * kSeq * kHidden, -1, 1)));
  m.model_bytes = b.Serialize();
  return m;
}

ModelExport FcLayerNormGelu(const ExportOptions& o) {
  ModelExport m{"fc+layernorm+act.gelu", "fc_layernorm_gelu",
                "MatMul + bias, LayerNorm decomposed, GELU with Erf (LayerNormFusion, GeluFusion)", "", {}};
  generators::CounterRng rng(o.seed, 0x7f0, 1, generators::StreamPurpose::parameters);
  ModelBuilder b(m.stem, kExportOpset);
  b.AddInput("x", DType::float32, {kBatch, kSeq, kIn});
  Dense(b, rng, "x", "h", 6.0);
  GammaBeta(b, rng);
  DecomposedLayerNorm(b, "h", "n");
  ErfGelu(b, "n", "y");
  b.AddOutput("y", DType::float32, {kBatch, kSeq, kHidden});
  return Finish(b, std::move(m), o.seed, 1, false);
}

ModelExport FcAddLayerNorm(const ExportOptions& o) {
  ModelExport m{"fc+add+layernorm", "fc_add_layernorm",
                "MatMul + bias + skip [B, S, H], LayerNormalization (SkipLayerNormFusion, BiasSkipLayerNormFusion)", "", {}};
  generators::CounterRng rng(o.seed, 0x7f0, 2, generators::StreamPurpose::parameters);
  ModelBuilder b(m.stem, kExportOpset);
  b.AddInput("x", DType::float32, {kBatch, kSeq, kIn});
  b.AddInput("skip", DType::float32, {kBatch, kSeq, kHidden});
  Dense(b, rng, "x", "h", 6.0);
  GammaBeta(b, rng);
  b.AddNode("Add", {"h", "skip"}, {"s"});
  b.AddNode("LayerNormalization", {"s", "ln_gamma", "ln_beta"}, {"y"},
            {Attr::Int("axis", -1), Attr::Float("epsilon", 1e-5f)});
  b.AddOutput("y", DType::float32, {kBatch, kSeq, kHidden});
  return Finish(b, std::move(m), o.seed, 2, true);
}

// The feed-forward block: MatMul + bias, GELU (with Erf or with Tanh), MatMul.
ModelExport FeedForward(const ExportOptions& o, bool tanh) {
  ModelExport m{tanh ? "fc+act+fc.gelu_tanh" : "fc+act+fc.gelu_erf", tanh ? "ffn_gelu_tanh" : "ffn_gelu_erf",
                tanh ? "MatMul + bias, GELU with Tanh, MatMul (FastGeluFusion)"
                     : "MatMul + bias, GELU with Erf, MatMul (GeluFusion, BiasGeluFusion)",
                "",
                {}};
  generators::CounterRng rng(o.seed, 0x7f0, tanh ? 3 : 6, generators::StreamPurpose::parameters);
  ModelBuilder b(m.stem, kExportOpset);
  b.AddInput("x", DType::float32, {kBatch, kSeq, kIn});
  Dense(b, rng, "x", "h", 0.0);
  if (tanh) TanhGelu(b, "h", "g");
  else ErfGelu(b, "h", "g");
  Dense2(b, rng, "g", "y");
  b.AddOutput("y", DType::float32, {kBatch, kSeq, kIn});
  return Finish(b, std::move(m), o.seed, tanh ? 3 : 6, false);
}

ModelExport SimplifiedLayerNorm(const ExportOptions& o) {
  ModelExport m{"fc+rmsnorm", "fc_rmsnorm", "MatMul + bias, RMS norm decomposed (SimplifiedLayerNormFusion)", "", {}};
  generators::CounterRng rng(o.seed, 0x7f0, 4, generators::StreamPurpose::parameters);
  ModelBuilder b(m.stem, kExportOpset);
  b.AddInput("x", DType::float32, {kBatch, kSeq, kIn});
  Dense(b, rng, "x", "h", 6.0);
  GammaBeta(b, rng);
  Scalar(b, "rms_two", 2.0f);
  Scalar(b, "rms_eps", 1e-6f);
  b.AddNode("Pow", {"h", "rms_two"}, {"rms_sq"});
  b.AddNode("ReduceMean", {"rms_sq"}, {"rms_ms"}, {Attr::Ints("axes", {-1})});
  b.AddNode("Add", {"rms_ms", "rms_eps"}, {"rms_ms_eps"});
  b.AddNode("Sqrt", {"rms_ms_eps"}, {"rms"});
  b.AddNode("Div", {"h", "rms"}, {"rms_xhat"});
  b.AddNode("Mul", {"rms_xhat", "ln_gamma"}, {"y"});
  b.AddOutput("y", DType::float32, {kBatch, kSeq, kHidden});
  return Finish(b, std::move(m), o.seed, 4, false);
}

// QDQ int8 around a float LayerNormalization: DQ -> MatMul (int8 weights) -> Q/DQ -> LayerNormalization -> Q.
ModelExport QdqLayerNorm(const ExportOptions& o) {
  ModelExport m{"fc+layernorm.qdq", "fc_layernorm_qdq",
                "QDQ int8 MatMul, Q/DQ, float LayerNormalization, QuantizeLinear (the QDQ form of a quantized "
                "transformer)", "", {}};
  generators::CounterRng rng(o.seed, 0x7f0, 5, generators::StreamPurpose::parameters);
  ModelBuilder b(m.stem, kExportOpset);
  b.AddInput("x", DType::float32, {kBatch, kSeq, kIn});
  const auto qdq = [&](const std::string& in, const std::string& out, float scale, int32_t zp) {
    b.AddInitializer(Tensor::FromFloats(out + "_s", {}, {scale}));
    b.AddInitializer(Tensor::FromCodes(out + "_z", DType::int8, {}, {zp}));
    b.AddNode("QuantizeLinear", {in, out + "_s", out + "_z"}, {out + "_q"});
    b.AddNode("DequantizeLinear", {out + "_q", out + "_s", out + "_z"}, {out});
  };
  qdq("x", "xd", 1.0f / 64, 0);
  std::vector<int32_t> wq(kIn * kHidden);
  for (int32_t& c : wq) c = static_cast<int32_t>(std::lround(254 * rng.uniform01() - 127));
  b.AddInitializer(Tensor::FromCodes("w_q", DType::int8, {kIn, kHidden}, wq));
  b.AddInitializer(Tensor::FromFloats("w_s", {}, {1.0f / 512}));
  b.AddInitializer(Tensor::FromCodes("w_z", DType::int8, {}, {0}));
  b.AddNode("DequantizeLinear", {"w_q", "w_s", "w_z"}, {"w"});
  b.AddNode("MatMul", {"xd", "w"}, {"mm"});
  b.AddInitializer(Tensor::FromFloats("fc_b", {kHidden}, Uniform(rng, kHidden, 1.5, 2.5)));
  b.AddNode("Add", {"mm", "fc_b"}, {"h"});
  qdq("h", "hd", 1.0f / 32, -64);
  GammaBeta(b, rng);
  b.AddNode("LayerNormalization", {"hd", "ln_gamma", "ln_beta"}, {"n"},
            {Attr::Int("axis", -1), Attr::Float("epsilon", 1e-5f)});
  b.AddInitializer(Tensor::FromFloats("y_s", {}, {1.0f / 32}));
  b.AddInitializer(Tensor::FromCodes("y_z", DType::int8, {}, {0}));
  b.AddNode("QuantizeLinear", {"n", "y_s", "y_z"}, {"y"});
  b.AddOutput("y", DType::int8, {kBatch, kSeq, kHidden});
  return Finish(b, std::move(m), o.seed, 5, false);
}

}  // namespace

std::vector<ModelExport> BuildTransformerModels(const ExportOptions& o) {
  return {FcLayerNormGelu(o), FcAddLayerNorm(o), FeedForward(o, false), FeedForward(o, true), SimplifiedLayerNorm(o),
          QdqLayerNorm(o)};
}

}  // namespace fusediff::bisect

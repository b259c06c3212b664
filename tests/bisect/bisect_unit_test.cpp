// The bisect's pieces without ONNX Runtime: the optimizer list, the measurements, "explain", input families and
// ONNX/NumPy files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "fusediff/bisect/bisect.h"
#include "fusediff/bisect/bisect_report.h"
#include "fusediff/bisect/export.h"
#include "fusediff/model/errors.h"

namespace fusediff::bisect {
namespace {

TEST(OptimizerList, PinnedListHoldsRulesAndTransformersOfOneVersion) {
  const OptimizerList& list = PinnedOptimizers();
  EXPECT_EQ(list.onnxruntime, "1.30.0");
  bool conv_bn_rule = false, qdq = false, nchwc = false;
  for (const Optimizer& o : list.optimizers) {
    conv_bn_rule |= o.name == "ConvBNFusion" && o.kind == "rewrite_rule";
    qdq |= o.name == "QDQSelectorActionTransformer" && o.kind == "transformer";
    nchwc |= o.name == "NchwcTransformer" && o.level == "layout";
  }
  EXPECT_TRUE(conv_bn_rule);
  EXPECT_TRUE(qdq);
  EXPECT_TRUE(nchwc);
}

TEST(OptimizerList, MalformedListsAreRefused) {
  EXPECT_THROW(ParseOptimizerList("{", "l.json"), InputError);
  EXPECT_THROW(ParseOptimizerList(R"({"format":"other","optimizers":[{"name":"A"}]})", "l.json"), InputError);
  const std::string twice = R"({"format":"fusediff-ort-optimizers/1","optimizers":[{"name":"A"},{"name":"A"}]})";
  EXPECT_THROW(ParseOptimizerList(twice, "l.json"), InputError);
  const std::string comma = R"({"format":"fusediff-ort-optimizers/1","optimizers":[{"name":"A,B"}]})";
  EXPECT_THROW(ParseOptimizerList(comma, "l.json"), InputError);
  const std::string ok = R"({"format":"fusediff-ort-optimizers/1","optimizers":[{"name":"A"},{"name":"B"}]})";
  EXPECT_EQ(ParseOptimizerList(ok, "l.json").names(), (std::vector<std::string>{"A", "B"}));
}

TEST(OptimizerList, TheSessionConfigValueSeparatesNamesBySemicolons) {
  EXPECT_EQ(fused::ort::DisableOptimizersValue({"ConvBNFusion", "NchwcTransformer"}), "ConvBNFusion;NchwcTransformer");
  EXPECT_EQ(std::string(fused::ort::kDisableOptimizersKey), "optimization.disable_specified_optimizers");
}

TEST(Measurements, SummarizeTakesMedianAndQuartiles) {
  const Perf p = Summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(p.repeats, 5);
  EXPECT_DOUBLE_EQ(p.median_ms, 3);
  EXPECT_DOUBLE_EQ(p.q1_ms, 2);
  EXPECT_DOUBLE_EQ(p.q3_ms, 4);
  EXPECT_DOUBLE_EQ(p.min_ms, 1);
  EXPECT_DOUBLE_EQ(p.max_ms, 5);
}

// Latencies from one distribution hold ratio 1 in their interval; 20 % faster excludes it; the same seed gives the
// same interval, another seed another.
TEST(Measurements, TheBootstrapIntervalOfTheMedianRatioIsDeterministicAndSeparates) {
  std::vector<std::vector<double>> base(3), same(3), faster(3);
  for (size_t c = 0; c < 3; ++c) {
    for (int i = 0; i < 15; ++i) {
      const double noise = 0.02 * std::sin(7.0 * i + 3.0 * static_cast<double>(c));  // +-2 %, no trend
      base[c].push_back(10 * (1 + noise));
      same[c].push_back(10 * (1 + 0.02 * std::sin(5.0 * i + 1.0 * static_cast<double>(c))));
      faster[c].push_back(8 * (1 + noise));
    }
  }
  const RatioInterval a = BootstrapMedianRatio(same, base, 1, 7);
  EXPECT_LE(a.lo, 1);
  EXPECT_GE(a.hi, 1);
  const RatioInterval b = BootstrapMedianRatio(faster, base, 1, 7);
  EXPECT_NEAR(b.ratio, 0.8, 1e-12);
  EXPECT_LT(b.hi, 1);
  const RatioInterval again = BootstrapMedianRatio(same, base, 1, 7), other = BootstrapMedianRatio(same, base, 2, 7);
  EXPECT_EQ(again.lo, a.lo);
  EXPECT_EQ(again.hi, a.hi);
  EXPECT_TRUE(other.lo != a.lo || other.hi != a.hi);
}

TEST(Measurements, NodeDeltaCountsEveryOpTypeThatChanged) {
  const auto d = NodeDelta({{"Conv", 2}, {"Relu", 1}, {"QuantizeLinear", 3}},
                           {{"Conv", 1}, {"QuantizeLinear", 3}, {"com.microsoft.QLinearConv", 1}});
  EXPECT_EQ(d, (std::map<std::string, int64_t>{{"Conv", -1}, {"Relu", -1}, {"com.microsoft.QLinearConv", 1}}));
}

onnx_io::ModelInfo OneOutput(std::optional<onnx_io::TensorQuant> q) {
  onnx_io::ModelInfo m;
  m.outputs.push_back({"y", q ? onnx_io::DType::int8 : onnx_io::DType::float32, {4}});
  m.output_quant.push_back(q);
  return m;
}

TEST(Measurements, QuantizedOutputsAreComparedInCodes) {
  onnx_io::TensorQuant q;
  q.codes = true;
  const Outputs base{{{1, 2, 3, 4}}, {4}, {}}, step{{{1, 3, 1, 4}}, {4}, {}};
  const auto d = CompareOutputs(OneOutput(q), base, step);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].unit, "lsb");
  EXPECT_EQ(d[0].differing, 2u);
  EXPECT_DOUBLE_EQ(d[0].max_units, 2);
  EXPECT_EQ(d[0].histogram, (std::map<int64_t, uint64_t>{{-2, 1}, {1, 1}}));
}

TEST(Measurements, DequantizedOutputsAreComparedInTheirScale) {
  onnx_io::TensorQuant q;
  q.scale = 0.25;
  const Outputs base{{{0.5, 1.0, 0, 0}}, {4}, {}}, step{{{0.75, 1.0, 0, -0.5}}, {4}, {}};
  const auto d = CompareOutputs(OneOutput(q), base, step);
  EXPECT_DOUBLE_EQ(d[0].max_units, 2);  // -0.5 / 0.25
  EXPECT_EQ(d[0].histogram, (std::map<int64_t, uint64_t>{{-2, 1}, {1, 1}}));
}

TEST(Measurements, FloatOutputsAreComparedInUlpsOfTheirLargestValue) {
  const Outputs base{{{1.0, 0.5, 0, 0}}, {4}, {}}, step{{{1.0, 0.5 + std::ldexp(1.0, -22), 0, 0}}, {4}, {}};
  const auto d = CompareOutputs(OneOutput(std::nullopt), base, step);
  EXPECT_EQ(d[0].unit, "f32_ulp_of_max");
  EXPECT_DOUBLE_EQ(d[0].step, std::ldexp(1.0, -23));
  EXPECT_DOUBLE_EQ(d[0].max_units, 2);
  EXPECT_TRUE(d[0].histogram.empty());
}

TEST(Explain, TheUnionOfSinglesMustEqualAllOnValueForValue) {
  const Diff a{{{0, 1}, 5}}, b{{{0, 7}, 2}}, a_again{{{0, 1}, 5}}, a_other{{{0, 1}, 4}};
  EXPECT_TRUE(Explains({&a, &b}, Diff{{{0, 1}, 5}, {{0, 7}, 2}}));
  EXPECT_FALSE(Explains({&a, &b}, Diff{{{0, 1}, 5}, {{0, 7}, 3}}));  // a value only the combination gives
  EXPECT_FALSE(Explains({&a, &b}, Diff{{{0, 1}, 5}}));               // a single moves what all-on leaves
  EXPECT_FALSE(Explains({&a}, Diff{{{0, 1}, 5}, {{0, 9}, 1}}));      // all-on moves more
  EXPECT_TRUE(Explains({&a, &a_again}, Diff{{{0, 1}, 5}}));          // two singles agreeing on an element
  EXPECT_FALSE(Explains({&a, &a_other}, Diff{{{0, 1}, 5}}));         // two singles disagreeing on it
  EXPECT_TRUE(Explains({}, Diff{}));
}

TEST(Explain, DifferencesAreInKeyOrderAndSkipEqualOutputs) {
  const Outputs base{{{1, 2, 3}, {4, 5}}, {3, 2}, {}}, step{{{1, 7, 3}, {4, 5}}, {3, 2}, {}},
      nan{{{1, NAN, 3}, {4, 5}}, {3, 2}, {}};
  EXPECT_EQ(Differences(base, step), (Diff{{{0, 1}, 7}}));
  EXPECT_TRUE(Differences(base, base).empty());
  EXPECT_TRUE(Differences(nan, nan).empty());  // NaN where the baseline has NaN is no difference
  EXPECT_EQ(Differences(base, nan).size(), 1u);
}

onnx_io::ModelInfo QdqInput() {
  onnx_io::ModelInfo m;
  m.path = "m.onnx";
  m.inputs.push_back({"x", onnx_io::DType::float32, {1, 2, -1, 3}});
  onnx_io::TensorQuant q;
  q.scale = 0.25;
  q.zero_point = 3;
  q.type = onnx_io::DType::int8;
  m.input_quant.push_back(q);
  return m;
}

TEST(Inputs, FamiliesAreDeterministicAndShaped) {
  const auto a = GenerateInputs(QdqInput(), 2, 7), b = GenerateInputs(QdqInput(), 2, 7);
  ASSERT_EQ(a.size(), 2 * InputFamilies().size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].feeds[0].bytes, b[i].feeds[0].bytes);
  EXPECT_EQ(a[0].feeds[0].dims, (std::vector<int64_t>{1, 2, 1, 3}));  // a symbolic dimension becomes 1
  EXPECT_NE(GenerateInputs(QdqInput(), 1, 8)[1].feeds[0].bytes, a[2].feeds[0].bytes);  // another seed
  for (const InputSet& s : a) {
    const onnx_io::Tensor& t = s.feeds[0];
    for (size_t i = 0; i < t.elements(); ++i) {
      const double v = t.value(i);
      if (s.family == "zero") {
        EXPECT_EQ(v, 0);
      }
      if (s.family == "positive") {
        EXPECT_GE(v, 0);
      }
      if (s.family == "negative") {
        EXPECT_LE(v, 0);
      }
      if (s.family == "uniform") {
        EXPECT_TRUE(v >= 0.25 * (-128 - 3) && v <= 0.25 * (127 - 3));
      }
      if (s.family == "aimed") {
        // On a rounding tie of the input's quantization, or within two steps of an end of its range.
        const double code = v / 0.25 + 3;
        const bool tie = std::fabs(code - std::floor(code) - 0.5) < 1e-9;
        const bool edge = code >= 126 || code <= -127;
        EXPECT_TRUE(tie || edge) << v;
      }
    }
  }
}

TEST(Files, TensorsRoundTripThroughPbAndNpy) {
  const auto t = onnx_io::Tensor::FromFloats("x", {2, 3}, {1, -2, 3.5f, 0, 7, -0.25f});
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "fusediff_bisect_files";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "x.pb", std::ios::binary) << onnx_io::SerializeTensorPb(t);
    std::ofstream(dir / "x.npy", std::ios::binary) << onnx_io::SerializeNpy(t);
  }
  for (const char* f : {"x.pb", "x.npy"}) {
    const auto back = onnx_io::ReadTensorFile((dir / f).string());
    EXPECT_EQ(back.name, "x");
    EXPECT_EQ(back.dims, t.dims);
    EXPECT_EQ(back.bytes, t.bytes);
  }
  std::ofstream(dir / "bad.npy", std::ios::binary) << "not numpy";
  EXPECT_THROW(onnx_io::ReadTensorFile((dir / "bad.npy").string()), InputError);
  EXPECT_THROW(onnx_io::ReadTensorFile((dir / "x.txt").string()), InputError);
  std::ofstream(dir / "bad.onnx", std::ios::binary) << "garbage";
  EXPECT_THROW(onnx_io::ReadModel((dir / "bad.onnx").string()), InputError);
  EXPECT_THROW(onnx_io::ReadModel((dir / "missing.onnx").string()), InputError);
  // A tensor that names no input of the model, and one of the wrong type.
  onnx_io::ModelInfo m = QdqInput();
  EXPECT_THROW(ReadInputs(m, {(dir / "x.pb").string()}), InputError);  // x is [2, 3], the model wants [1, 2, ?, 3]
  m.inputs[0].dims = {2, 3};
  EXPECT_EQ(ReadInputs(m, {(dir / "x.pb").string()}).size(), 1u);
  m.inputs[0].name = "other";
  EXPECT_THROW(ReadInputs(m, {(dir / "x.pb").string()}), InputError);
}

TEST(Export, ModelsReadBackWithTheirQuantization) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "fusediff_bisect_export";
  std::filesystem::create_directories(dir);
  const PatternExport e = BuildPatternExport("conv2d+add+act", ActivationKind::relu, {});
  std::ofstream(dir / "m.onnx", std::ios::binary) << e.model_bytes;
  const onnx_io::ModelInfo m = onnx_io::ReadModel((dir / "m.onnx").string());
  EXPECT_EQ(m.opset, kExportOpset);
  ASSERT_EQ(m.inputs.size(), 2u);  // x and the residual r
  ASSERT_TRUE(m.input_quant[0].has_value());
  EXPECT_DOUBLE_EQ(m.input_quant[0]->scale, 0.0625);
  ASSERT_TRUE(m.output_quant[0].has_value());
  EXPECT_TRUE(m.output_quant[0]->codes);
  EXPECT_EQ(m.node_counts.at("Add"), 1);
  EXPECT_EQ(m.node_counts.at("Conv"), 1);
  // Deterministic: the same seed writes the same bytes.
  EXPECT_EQ(BuildPatternExport("conv2d+add+act", ActivationKind::relu, {}).model_bytes, e.model_bytes);
  EXPECT_THROW(BuildPatternExport("conv2d+act", ActivationKind::tanh, {}), InputError);
  EXPECT_FALSE(PlanPatternExports().unsupported.empty());
  // The average pool and the FC chains: DQ -> AveragePool -> Q into an even zero point (where ort_qlinear is ONNX's
  // QuantizeLinear), and a second Gemm over the first layer's (or the activation's) codes.
  const PatternExport avg = BuildPatternExport("conv2d+act+avgpool", ActivationKind::relu, {});
  EXPECT_EQ(avg.name, "conv2d+act+avgpool.relu");
  const Stage* pool = find_stage(avg.pattern, StageKind::avg_pool);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->pool_rule, AvgPoolRule::ort_qlinear);
  EXPECT_EQ(pool->out.zero_point % 2, 0);
  std::ofstream(dir / "avg.onnx", std::ios::binary) << avg.model_bytes;
  EXPECT_EQ(onnx_io::ReadModel((dir / "avg.onnx").string()).node_counts.at("AveragePool"), 1);
  const PatternExport chain = BuildPatternExport("fc+fc", ActivationKind::relu, {});
  EXPECT_EQ(chain.name, "fc+fc");  // no activation stage: no activation in the name
  EXPECT_EQ(chain.draw.stages.at(0).weights.size(), chain.draw.stages.at(0).bias.size() * 8);
  std::ofstream(dir / "fcfc.onnx", std::ios::binary) << chain.model_bytes;
  const onnx_io::ModelInfo fcfc = onnx_io::ReadModel((dir / "fcfc.onnx").string());
  EXPECT_EQ(fcfc.node_counts.at("Gemm"), 2);
  EXPECT_EQ(fcfc.outputs[0].dims, (std::vector<int64_t>{4, 4}));
  const ExportPlan plan = PlanPatternExports();
  auto supported = [&](const std::string& p, ActivationKind k) {
    return std::find(plan.supported.begin(), plan.supported.end(), std::make_pair(p, k)) != plan.supported.end();
  };
  EXPECT_TRUE(supported("conv2d+act+avgpool", ActivationKind::gelu_erf));
  EXPECT_TRUE(supported("fc+act+fc", ActivationKind::sigmoid));
  EXPECT_FALSE(supported("fc+act+fc", ActivationKind::gelu_erf));  // listed with the measured reason
  EXPECT_FALSE(supported("fc+act+fc", ActivationKind::silu));
  EXPECT_EQ(plan.supported_int16.size(), 5u);  // conv2d+act with each exported activation
}


// JUnit lists the transformers that act (fired and kept, blacklisted, refused); those that never fired are counted and
// named in the suite's properties; the text ends with the closing line (issue 24).
TEST(Report, JUnitListsWhatActedAndCountsTheRest) {
  BisectResult r;
  const auto step = [](const std::string& subject, const std::string& verdict, bool fired) {
    Step s;
    s.kind = "one_on";
    s.subject = subject;
    s.verdict = verdict;
    s.fired = fired;
    return s;
  };
  r.steps = {step("ConvBNFusion", "blacklist", true), step("ConstantSharing", "keep", true),
             step("GeluFusion", "not_fired", false), step("LayerNormFusion", "not_fired", false),
             step("NchwcTransformer", "refused", false)};
  r.steps[4].refusal = "no kernel";
  r.steps[4].refusal_phase = "create";
  const std::string x = ToJUnit(r);
  EXPECT_NE(x.find("tests=\"3\" failures=\"1\" skipped=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("<property name=\"not_fired\" value=\"2\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<property name=\"not_fired.names\" value=\"GeluFusion,LayerNormFusion\"/>"), std::string::npos) << x;
  EXPECT_EQ(x.find("name=\"GeluFusion\""), std::string::npos) << x;
  EXPECT_NE(x.find("<testcase classname=\"bisect\" name=\"ConstantSharing\"/>"), std::string::npos) << x;
  const std::string text = ToText(r);
  EXPECT_TRUE(text.ends_with("1 passed, 1 failed, 1 refused, 2 did not fire (5 transformers)\n")) << text;
}

}  // namespace
}  // namespace fusediff::bisect

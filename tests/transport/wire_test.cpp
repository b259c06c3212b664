// The protocol's messages: a batch of draws survives the run message whole (what plugin-host and the offline
// answers rebuild), a result fills exactly the batch it answers, and a reply that answers anything else is a
// ProtocolError naming what is wrong.
#include <gtest/gtest.h>

#include "fusediff/fused/plugin_subprocess.h"
#include "fusediff/fused/plugin_wire.h"

namespace fusediff::fused::plugin {
namespace {

PatternDraw Draw(int32_t seed) {
  PatternDraw d;
  d.conv.op(ConvOp::conv2d)
      .batch(1)
      .input_size(3, 4)
      .input_channels(2)
      .output_channels(2)
      .kernel_size(2, 1)
      .stride(1, 2)
      .dilation(1, 1)
      .padding(0, 1, 1, 0)
      .input_quant(QuantParams{QuantType{ScalarType::uint8, false}, 0.0123f, 17})
      .weight_scales({0.5f, 0.25f})
      .weights({1, -2, 3, -4, 5, -6, 7, -8})
      .bias({100, -100});
  for (int32_t i = 0; i < 24; ++i) d.input.push_back((i * 37 + seed) % 256);
  d.stages.resize(2);
  d.stages[1].codes = {1, 2, 3};
  d.stages[1].bn.gamma = {1.5f};
  return d;
}

TEST(Wire, RunCarriesEveryFieldOfTheDraws) {
  const std::vector<PatternDraw> draws = {Draw(1), Draw(2)};
  const std::vector<size_t> counts = {7, 9};
  const Frame decoded = Frame::Decode(EncodeRun(draws, counts).Encode());
  std::vector<size_t> back_counts;
  const std::vector<PatternDraw> back = DecodeRun(decoded, &back_counts);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back_counts, counts);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].input, draws[i].input);
    EXPECT_EQ(back[i].conv.weights(), draws[i].conv.weights());
    EXPECT_EQ(back[i].conv.weight_scales(), draws[i].conv.weight_scales());
    EXPECT_EQ(back[i].conv.bias(), draws[i].conv.bias());
    EXPECT_EQ(back[i].conv.input_quant(), draws[i].conv.input_quant());
    EXPECT_EQ(back[i].conv.padding_left(), 1);
    EXPECT_EQ(back[i].conv.stride_width(), 2);
    EXPECT_EQ(back[i].conv.output_height(), draws[i].conv.output_height());
    ASSERT_EQ(back[i].stages.size(), 2u);
    EXPECT_EQ(back[i].stages[1].codes, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(back[i].stages[1].bn.gamma, (std::vector<float>{1.5f}));
    EXPECT_EQ(DrawDigest(back[i]), DrawDigest(draws[i]));
  }
  EXPECT_NE(DrawDigest(draws[0]), DrawDigest(draws[1]));
  // A batch is a few arrays whatever its size: the scalars as one table, each tensor end to end with its offsets.
  EXPECT_EQ(decoded.find("scalars")->shape, (std::vector<int64_t>{2, 27}));
  EXPECT_EQ(decoded.find("input_codes")->dtype, Dtype::i32);
  EXPECT_EQ(decoded.find("input_codes")->shape, (std::vector<int64_t>{48}));
  EXPECT_EQ(decoded.get<int64_t>("input_codes.offsets")[1], 24);
  EXPECT_EQ(decoded.find("weights")->dtype, Dtype::i8);
  EXPECT_EQ(decoded.find("operands.0.codes"), nullptr);  // no draw has any
  EXPECT_EQ(decoded.get<int32_t>("operands.1.codes").size(), 6u);
  EXPECT_EQ(decoded.arrays().size(), 14u);  // 2 + 2 x (4 tensors + 2 operand tensors)
}

// `f` with its array `name` replaced by `values` (int64).
Frame WithArray(const Frame& f, const std::string& name, const std::vector<int64_t>& values) {
  Frame out;
  out.header = f.header;
  for (const FrameArray& a : f.arrays()) {
    if (a.name == name) out.add<int64_t>(a.name, values);
    else if (a.dtype == Dtype::i8) out.add<int8_t>(a.name, f.get<int8_t>(a.name), a.shape);
    else if (a.dtype == Dtype::i32) out.add<int32_t>(a.name, f.get<int32_t>(a.name), a.shape);
    else if (a.dtype == Dtype::i64) out.add<int64_t>(a.name, f.get<int64_t>(a.name), a.shape);
    else out.add<float>(a.name, f.get<float>(a.name), a.shape);
  }
  return out;
}

TEST(Wire, RunWithBrokenOffsetsOrScalarsIsAProtocolError) {
  const std::vector<PatternDraw> draws = {Draw(1), Draw(2)};
  const std::vector<size_t> counts = {7, 9};
  const Frame good = EncodeRun(draws, counts);
  const auto error_of = [&](Frame f) {
    std::vector<size_t> back;
    try {
      DecodeRun(Frame::Decode(f.Encode()), &back);
    } catch (const ProtocolError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(WithArray(good, "input_codes.offsets", {0, 30, 24})),
            "run: input_codes.offsets: expected 3 offsets from 0 to 48");
  EXPECT_EQ(error_of(WithArray(good, "input_codes.offsets", {0, 50, 48})), "run: input_codes.offsets[2]: decreasing");
  Frame no_column = good;
  no_column.header["columns"][0] = "opx";
  EXPECT_EQ(error_of(no_column), "run.columns: no column 'op'");
  Frame fewer = good;
  fewer.header["draw_count"] = 3;
  EXPECT_EQ(error_of(fewer), "run: scalars: expected 3 draws x 27 columns");
}

TEST(Wire, ResultFillsTheBatchItAnswers) {
  std::vector<int32_t> a = {1, 2, 3}, b = {0, 0};
  const std::vector<std::span<int32_t>> y = {a, b};
  const std::vector<DrawOutcome> outcomes = {{DrawOutcome::Status::ok, "", "k1"},
                                             {DrawOutcome::Status::rejected, "too wide", ""}};
  const Frame result = Frame::Decode(EncodeResult(y, outcomes).Encode());
  std::vector<int32_t> a2(3, -1), b2(2, -1);
  const std::vector<std::span<int32_t>> y2 = {a2, b2};
  std::vector<DrawOutcome> back(2);
  DecodeResult(result, y2, back);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(back[0].implementation, "k1");
  EXPECT_EQ(back[1].status, DrawOutcome::Status::rejected);
  EXPECT_EQ(back[1].reason, "too wide");
  EXPECT_EQ(b2, (std::vector<int32_t>{-1, -1}));  // a rejected draw's outputs are left alone

  std::vector<DrawOutcome> three(3);
  std::vector<int32_t> c(1);
  const std::vector<std::span<int32_t>> y3 = {a2, b2, c};
  EXPECT_THROW(DecodeResult(result, y3, three), ProtocolError);  // another batch size
  std::vector<int32_t> short_a(2);
  const std::vector<std::span<int32_t>> wrong = {short_a, b2};
  try {
    DecodeResult(result, wrong, back);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "result: array y has 5 values, the batch's 2 draws have 4 outputs");
  }
  Frame twice = result;
  twice.header["rejected"].push_back({{"draw", 1}, {"reason", "again"}});
  try {
    DecodeResult(twice, y2, back);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "result.rejected[1].draw: 1 is not a draw of this batch of 2, or is given twice");
  }
  Frame error("error");
  error.header["message"] = "out of memory";
  try {
    DecodeResult(error, y2, back);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "the plugin answered run with an error: out of memory");
  }
}

TEST(Wire, HelloCarriesTheDeclaration) {
  PluginHello hello;
  hello.name = "x";
  hello.version = "2.1";
  hello.abi_major = FUSEDIFF_PLUGIN_ABI_MAJOR;
  hello.features = {"producer:conv2d", "stage:act"};
  hello.declaration.requant = RequantVariant::single_rounding;
  hello.declaration.threading = Threading::instance_per_thread;
  hello.declaration.preferred_batch = 128;
  hello.declaration.limits.max_channels = 16;
  hello.declaration.limits.transposed = false;
  const PluginHello back = HelloFromReply(Frame::Decode(HelloReply(hello).Encode()));
  EXPECT_EQ(back.name, "x");
  EXPECT_EQ(back.features, hello.features);
  EXPECT_EQ(back.declaration, hello.declaration);
  Frame old = HelloReply(hello);
  old.header["protocol"] = 1;  // the JSON object per draw of protocol 1
  EXPECT_THROW(HelloFromReply(old), ProtocolError);
}

}  // namespace
}  // namespace fusediff::fused::plugin

// Models and tensors fusediff did not write, without ONNX Runtime: every element type in .pb (raw and typed
// fields), .npy and raw files; binding by name and by position; unsupported features; generated ranges; units per
// type; the expected-output check; the memory budget.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/errors.h"
#include "test_util.h"

namespace fusediff::bisect {
namespace {

using onnx_io::DType;

using test::Scratch;
using test::Write;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::vector<DType> kEveryType = {DType::float32, DType::uint8,  DType::int8,    DType::uint16, DType::int16,
                                       DType::int32,   DType::int64,  DType::bool_,   DType::float16, DType::float64,
                                       DType::uint32,  DType::uint64, DType::bfloat16};

TEST(Types, EveryTypeRoundTripsThroughPbAndNpy) {
  const std::filesystem::path dir = Scratch("roundtrip");
  for (DType t : kEveryType) {
    const std::vector<double> values = t == DType::bool_ ? std::vector<double>{1, 0, 1, 1, 0, 0}
                                                         : std::vector<double>{0, 1, 2, 3, 100, 7};
    const auto tensor = onnx_io::Tensor::FromValues("v", t, {2, 3}, values);
    ASSERT_EQ(tensor.bytes.size(), 6 * onnx_io::element_size(t)) << onnx_io::to_string(t);
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(tensor.value(i), values[i]) << onnx_io::to_string(t);
    const std::string pb = Write(dir / "v.pb", onnx_io::SerializeTensorPb(tensor));
    const std::string npy = Write(dir / "v.npy", onnx_io::SerializeNpy(tensor));
    for (const std::string& f : {pb, npy}) {
      const auto back = onnx_io::ReadTensorFile(f);
      EXPECT_EQ(back.type, t) << f << " " << onnx_io::to_string(t);
      EXPECT_EQ(back.dims, tensor.dims);
      EXPECT_EQ(back.bytes, tensor.bytes) << f << " " << onnx_io::to_string(t);
    }
    EXPECT_EQ(onnx_io::parse_dtype(onnx_io::to_string(t), "type"), t);
  }
}

TEST(Types, HalfAndBfloat16RoundToNearestEven) {
  // 1 + 2^-11 is halfway between binary16's 1 and 1 + 2^-10: even is 1. 1 + 3 * 2^-11 rounds up to 1 + 2^-9.
  const auto h = onnx_io::Tensor::FromValues("h", DType::float16, {3}, {1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11), 65504});
  EXPECT_EQ(h.value(0), 1.0);
  EXPECT_EQ(h.value(1), 1 + std::ldexp(1, -9));
  EXPECT_EQ(h.bits(2), 0x7BFFu);
  const auto b = onnx_io::Tensor::FromValues("b", DType::bfloat16, {2}, {1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8)});
  EXPECT_EQ(b.value(0), 1.0);
  EXPECT_EQ(b.value(1), 1 + std::ldexp(1, -6));
  EXPECT_EQ(b.bits(0), 0x3F80u);
}

// ONNX's typed fields (onnx.proto, TensorProto): what exporters write when they do not use raw_data.
TEST(Types, PbTypedFieldsAreReadForEveryType) {
  const std::filesystem::path dir = Scratch("typed");
  auto read = [&](const onnx::TensorProto& p) {
    return onnx_io::ReadTensorPb(Write(dir / "t.pb", p.SerializeAsString()));
  };
  onnx::TensorProto p;
  p.add_dims(2);
  p.set_data_type(onnx::TensorProto::DOUBLE);
  p.add_double_data(0.1);
  p.add_double_data(-3);
  auto t = read(p);
  EXPECT_EQ(t.value(0), 0.1);
  EXPECT_EQ(t.value(1), -3);
  p.clear_double_data();
  p.set_data_type(onnx::TensorProto::FLOAT16);  // the bits in int32_data
  p.add_int32_data(0x3C00);
  p.add_int32_data(0xC000);
  t = read(p);
  EXPECT_EQ(t.value(0), 1.0);
  EXPECT_EQ(t.value(1), -2.0);
  p.set_data_type(onnx::TensorProto::BOOL);
  p.clear_int32_data();
  p.add_int32_data(1);
  p.add_int32_data(0);
  EXPECT_EQ(read(p).value(0), 1);
  p.set_data_type(onnx::TensorProto::UINT32);
  p.clear_int32_data();
  p.add_uint64_data(4000000000u);
  p.add_uint64_data(7);
  t = read(p);
  EXPECT_EQ(t.value(0), 4e9);
  EXPECT_EQ(t.bytes.size(), 8u);
  p.set_data_type(onnx::TensorProto::UINT64);
  p.set_uint64_data(0, uint64_t{1} << 63);
  EXPECT_EQ(read(p).bits(0), uint64_t{1} << 63);
  p.set_data_type(onnx::TensorProto::INT64);
  p.clear_uint64_data();
  p.add_int64_data(-5);
  EXPECT_NE(ErrorOf([&] { read(p); }).find("holds 1 values, the dims need 2"), std::string::npos);
  p.set_data_type(onnx::TensorProto::STRING);
  EXPECT_NE(ErrorOf([&] { read(p); }).find("unsupported feature [string type]"), std::string::npos);
  p.set_data_type(onnx::TensorProto::COMPLEX64);
  EXPECT_NE(ErrorOf([&] { read(p); }).find("unsupported feature [element type]: element type COMPLEX64"),
            std::string::npos);
}

TEST(Types, NpyVersionsByteOrderAndShapesAreChecked) {
  const std::filesystem::path dir = Scratch("npy");
  const auto t = onnx_io::Tensor::FromValues("x", DType::int16, {2}, {1, -2});
  std::string v1 = onnx_io::SerializeNpy(t);
  // Version 2.0: a 4-byte header length (numpy/lib/format.py).
  const uint16_t len = static_cast<uint16_t>(static_cast<uint8_t>(v1[8]) | (static_cast<uint8_t>(v1[9]) << 8));
  std::string v2 = v1.substr(0, 6) + std::string("\x02\x00", 2) + std::string(1, char(len & 0xff)) +
                   std::string(1, char(len >> 8)) + std::string(2, '\0') + v1.substr(10);
  EXPECT_EQ(onnx_io::ReadNpy(Write(dir / "x2.npy", v2), "x").bytes, t.bytes);
  std::string big = v1;
  big.replace(big.find("<i2"), 3, ">i2");
  EXPECT_NE(ErrorOf([&] { onnx_io::ReadNpy(Write(dir / "big.npy", big), "x"); }).find("'>i2' is not supported"),
            std::string::npos);
  std::string shape = v1;
  shape.replace(shape.find("(2,)"), 4, "(x,)");
  EXPECT_NE(ErrorOf([&] { onnx_io::ReadNpy(Write(dir / "s.npy", shape), "x"); }).find("shape entry"), std::string::npos);
}

TEST(Types, ByteSizesOverflowIsCaught) {
  EXPECT_EQ(onnx_io::ByteSize(DType::float32, {1, 3, 8, 8}), 768u);
  EXPECT_FALSE(onnx_io::ByteSize(DType::float64, {int64_t{1} << 40, int64_t{1} << 30}).has_value());
  EXPECT_EQ(onnx_io::DimsText({1, 100000}), "[1,100000]");
}

// A model read through onnx_io from a ModelProto built here: inputs, outputs and nodes as given.
std::string ModelWith(const std::function<void(onnx::GraphProto&)>& build, const std::filesystem::path& path) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *m.mutable_graph();
  auto* n = g.add_node();
  n->set_op_type("Identity");
  n->add_input("x");
  n->add_output("y");
  build(g);
  return Write(path, m.SerializeAsString());
}

void TensorValue(onnx::ValueInfoProto* v, const std::string& name, int type, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

TEST(Unsupported, SequencesStringsAndTrainingOpsAreNamed) {
  const std::filesystem::path dir = Scratch("unsupported");
  const std::string seq = ModelWith([](onnx::GraphProto& g) {
    auto* in = g.add_input();
    in->set_name("x");
    in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
    TensorValue(g.add_output(), "y", 1, {1});
  }, dir / "seq.onnx");
  EXPECT_NE(ErrorOf([&] { onnx_io::ReadModel(seq); }).find("unsupported feature [sequence type]: input 'x' is a sequence"),
            std::string::npos);
  const std::string str = ModelWith([](onnx::GraphProto& g) {
    TensorValue(g.add_input(), "x", onnx::TensorProto::STRING, {1});
    TensorValue(g.add_output(), "y", onnx::TensorProto::STRING, {1});
  }, dir / "str.onnx");
  EXPECT_NE(ErrorOf([&] { onnx_io::ReadModel(str); }).find("unsupported feature [string type]"), std::string::npos);
  const std::string training = ModelWith([](onnx::GraphProto& g) {
    TensorValue(g.add_input(), "x", 1, {1});
    TensorValue(g.add_output(), "y", 1, {1});
    g.mutable_node(0)->set_domain("ai.onnx.preview.training");
    g.mutable_node(0)->set_op_type("Gradient");
  }, dir / "training.onnx");
  EXPECT_NE(ErrorOf([&] { onnx_io::ReadModel(training); })
                .find("unsupported feature [training op]: ai.onnx.preview.training.Gradient"),
            std::string::npos);
}

onnx_io::ModelInfo TwoInputs() {
  onnx_io::ModelInfo m;
  m.path = "m.onnx";
  m.inputs = {{"0", DType::float32, {2}}, {"mask", DType::int64, {2}}};
  m.outputs = {{"y", DType::float32, {2}}};
  m.input_quant.resize(2);
  m.input_range.resize(2);
  m.output_quant.resize(1);
  return m;
}

TEST(Binding, UnnamedTensorsBindByPositionAsOnnxsRunnerDoes) {
  const std::filesystem::path dir = Scratch("binding");
  const std::filesystem::path set = dir / "test_data_set_0";
  std::filesystem::create_directories(set);
  Write(set / "input_0.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("", DType::float32, {2}, {1, 2})));
  Write(set / "input_1.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("", DType::int64, {2}, {0, 1})));
  Write(set / "output_0.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("", DType::float32, {2}, {1, 2})));
  const auto sets = ReadInputs(TwoInputs(), {dir.string()});
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].feeds[0].name, "0");
  EXPECT_EQ(sets[0].feeds[1].name, "mask");
  EXPECT_EQ(sets[0].feeds[1].type, DType::int64);
  ASSERT_EQ(sets[0].expected.size(), 1u);
  EXPECT_EQ(sets[0].expected[0]->name, "y");
  // A third unnamed tensor has no input to bind to; a named one that names no input is refused with the names quoted.
  Write(set / "input_2.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("", DType::float32, {2}, {1, 2})));
  EXPECT_NE(ErrorOf([&] { ReadInputs(TwoInputs(), {dir.string()}); })
                .find("binds by position to model input 2, but the model has 2 ('0', 'mask')"),
            std::string::npos);
  std::filesystem::remove(set / "input_2.pb");
  Write(set / "input_1.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("other", DType::int64, {2}, {0, 1})));
  EXPECT_NE(ErrorOf([&] { ReadInputs(TwoInputs(), {dir.string()}); })
                .find("tensor 'other' names no model input (model inputs: '0', 'mask')"),
            std::string::npos);
  // Named after an input, it binds by name whatever its position.
  Write(set / "input_1.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("0", DType::float32, {2}, {5, 6})));
  Write(set / "input_0.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("mask", DType::int64, {2}, {1, 1})));
  const auto swapped = ReadInputs(TwoInputs(), {dir.string()});
  EXPECT_EQ(swapped[0].feeds[0].value(0), 5);
  EXPECT_EQ(swapped[0].feeds[1].value(0), 1);
}

TEST(Binding, PositionsSortNumerically) {
  onnx_io::ModelInfo m;
  m.path = "m.onnx";
  for (int i = 0; i < 12; ++i) m.inputs.push_back({"in" + std::to_string(i), DType::float32, {1}});
  m.input_quant.resize(12);
  m.input_range.resize(12);
  const std::filesystem::path dir = Scratch("positions");
  for (int i = 0; i < 12; ++i) {
    Write(dir / ("input_" + std::to_string(i) + ".pb"),
          onnx_io::SerializeTensorPb(onnx_io::Tensor::FromValues("", DType::float32, {1}, {double(i)})));
  }
  const auto sets = ReadInputs(m, {dir.string()});
  for (int i = 0; i < 12; ++i) EXPECT_EQ(sets[0].feeds[i].value(0), i);
}

TEST(Binding, RawFilesTakeTheModelsTypeAndTheGivenShape) {
  const std::filesystem::path dir = Scratch("raw");
  const auto t = onnx_io::Tensor::FromValues("mask", DType::int64, {2}, {1, 0});
  const std::string raw = Write(dir / "mask.raw", std::string(t.bytes.begin(), t.bytes.end()));
  onnx_io::ModelInfo m = TwoInputs();
  m.inputs = {m.inputs[1]};
  m.inputs[0].dims = {-1};
  EXPECT_NE(ErrorOf([&] { ReadInputs(m, {raw}); }).find("give --shape mask=D0,D1,..."), std::string::npos);
  InputOptions o;
  o.shapes["mask"] = {2};
  const auto sets = ReadInputs(m, {raw}, o);
  EXPECT_EQ(sets[0].feeds[0].bytes, t.bytes);
  o.shapes["mask"] = {3};
  EXPECT_NE(ErrorOf([&] { ReadInputs(m, {raw}, o); }).find("holds 16 bytes, int64 [3] needs 24"), std::string::npos);
  o.max_bytes = 8;
  o.shapes["mask"] = {2};
  EXPECT_NE(ErrorOf([&] { ReadInputs(m, {raw}, o); }).find("16 bytes (with the files before it 16 bytes): over --max-bytes 8"),
            std::string::npos);
}

TEST(Generators, IntegerInputsRespectTheirRanges) {
  onnx_io::ModelInfo m = TwoInputs();
  m.inputs.push_back({"ids", DType::int64, {4, 8}});
  m.input_quant.resize(3);
  m.input_range.push_back(onnx_io::IndexRange{0, 50, "Gather(table 'emb' of 50 rows)"});
  m.inputs.push_back({"count", DType::int32, {16}});
  m.input_quant.resize(4);
  m.input_range.resize(4);
  m.inputs.push_back({"flag", DType::bool_, {16}});
  m.input_quant.resize(5);
  m.input_range.resize(5);
  InputOptions o;
  o.per_family = 2;
  o.int_range = {-3, 5};
  const auto sets = GenerateInputs(m, o);
  for (const InputSet& s : sets) {
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(s.feeds[1].value(i) == 0 || s.feeds[1].value(i) == 1);  // mask
    for (size_t i = 0; i < 32; ++i) EXPECT_TRUE(s.feeds[2].value(i) >= 0 && s.feeds[2].value(i) < 50);
    for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(s.feeds[3].value(i) >= -3 && s.feeds[3].value(i) < 5);
    for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(s.feeds[4].bytes[i] <= 1);
  }
  EXPECT_EQ(InputRangeNote(m, 2, o.int_range), "input 'ids' (int64): [0, 49], the model's: Gather(table 'emb' of 50 rows)");
  EXPECT_EQ(InputRangeNote(m, 3, o.int_range), "input 'count' (int32): [-3, 4], the default (--int-range -3:5)");
  EXPECT_EQ(GenerateInputs(m, o)[5].feeds[2].bytes, sets[5].feeds[2].bytes);  // deterministic
}

TEST(Generators, FloatInputsOfEveryWidthAndTheBudget) {
  onnx_io::ModelInfo m;
  m.path = "m.onnx";
  for (DType t : {DType::float16, DType::bfloat16, DType::float64}) m.inputs.push_back({onnx_io::to_string(t), t, {3, -1}});
  m.input_quant.resize(3);
  m.input_range.resize(3);
  const auto sets = GenerateInputs(m, 1, 3);
  for (const InputSet& s : sets) {
    for (const auto& t : s.feeds) {
      ASSERT_EQ(t.dims, (std::vector<int64_t>{3, 1}));
      for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(t.value(i)) && std::fabs(t.value(i)) <= 4) << t.name;
    }
  }
  onnx_io::ModelInfo huge;
  huge.path = "huge.onnx";
  huge.inputs.push_back({"x", DType::float32, {1, 100000, 100000, 100}});
  huge.input_quant.resize(1);
  huge.input_range.resize(1);
  InputOptions o;
  o.max_bytes = kDefaultMaxBytes;
  EXPECT_EQ(ErrorOf([&] { GenerateInputs(huge, o); }),
            "huge.onnx: input 'x' (float32 [1,100000,100000,100]) needs 4000000000000 bytes per set, 32 sets: over "
            "--max-bytes 4294967296 bytes");
}

TEST(Units, EachTypeIsComparedInItsOwnUnit) {
  EXPECT_EQ(UnitOf(DType::float16, std::nullopt), "f16_ulp_of_max");
  EXPECT_EQ(UnitOf(DType::int64, std::nullopt), "int");
  EXPECT_EQ(UnitOf(DType::bool_, std::nullopt), "int");
  EXPECT_EQ(UnitOf(DType::uint8, onnx_io::TensorQuant{}), "lsb");
  EXPECT_EQ(UlpAt(1.0, DType::float16), std::ldexp(1, -10));
  EXPECT_EQ(UlpAt(1.0, DType::bfloat16), std::ldexp(1, -7));
  EXPECT_EQ(UlpAt(1.0, DType::float64), std::ldexp(1, -52));
  EXPECT_EQ(UlpAt(std::ldexp(1, -20), DType::float16), std::ldexp(1, -24));  // below the normals: the subnormal step
  onnx_io::ModelInfo m;
  m.outputs = {{"ids", DType::int64, {2}}};
  m.output_quant.resize(1);
  // Two int64 values one apart beyond 2^53 are the same double: their bits tell them apart.
  const int64_t big = (int64_t{1} << 60) + 1;
  const double as_double = static_cast<double>(big);
  const Outputs base{{{as_double, 3}}, {2}, {{static_cast<uint64_t>(big), 3}}};
  const Outputs step{{{as_double, 5}}, {2}, {{static_cast<uint64_t>(big + 1), 5}}};
  const auto d = CompareOutputs(m, base, step);
  EXPECT_EQ(d[0].unit, "int");
  EXPECT_EQ(d[0].differing, 2u);
  EXPECT_EQ(d[0].max_units, 2);
  EXPECT_EQ(Differences(base, step).size(), 2u);
}

TEST(Expected, TheRunnersToleranceDtypeAndShape) {
  onnx_io::ModelInfo m;
  m.outputs = {{"y", DType::float32, {3}}, {"n", DType::int64, {1}}};
  InputSet set;
  set.where = "test_data_set_0";
  set.expected = {onnx_io::Tensor::FromValues("y", DType::float32, {3}, {1, 100, NAN}),
                  onnx_io::Tensor::FromValues("n", DType::int32, {1}, {4})};
  const std::vector<onnx_io::Tensor> got = {onnx_io::Tensor::FromValues("y", DType::float32, {3}, {1.0000001, 100.2, NAN}),
                                            onnx_io::Tensor::FromValues("n", DType::int64, {1}, {4})};
  ExpectedCheck c;
  CheckExpected(m, set, got, c);
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_TRUE(c.checked);
  EXPECT_FALSE(c.agree);
  EXPECT_EQ(c.outputs[0].mismatched, 1u);  // 100.2: 0.2 > 1e-7 + 1e-3 * 100; 1 + 1e-7 within; NaN equals NaN
  EXPECT_NEAR(c.outputs[0].max_abs, 0.2, 1e-5);
  EXPECT_EQ(c.outputs[1].problem, "ONNX Runtime returns int64, the test expects int32");
  ExpectedCheck loose;
  loose.rtol = 0.01;
  set.expected[1] = got[1];
  CheckExpected(m, set, got, loose);
  EXPECT_TRUE(loose.agree);
  const std::filesystem::path dir = Scratch("expected");
  Write(dir / "data.json", R"({"rtol": 0.5, "atol": 0.25})");
  BisectOptions o;
  ExpectedTolerances((dir / "model.onnx").string(), o, c);
  EXPECT_EQ(c.rtol, 0.5);
  EXPECT_EQ(c.atol, 0.25);
  o.expected_atol = 0;
  ExpectedTolerances((dir / "model.onnx").string(), o, c);
  EXPECT_EQ(c.atol, 0);
  EXPECT_EQ(c.tolerance_source, "--expected-rtol/--expected-atol");
  Write(dir / "data.json", R"({"rtol": "x"})");
  EXPECT_NE(ErrorOf([&] { ExpectedTolerances((dir / "model.onnx").string(), BisectOptions{}, c); }).find("\"rtol\": expected"),
            std::string::npos);
}

}  // namespace
}  // namespace fusediff::bisect

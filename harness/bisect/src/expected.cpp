// ONNX's backend test data brings the peer's answer: output_K.pb. The baseline (every transformer off) is checked
// against it the way ONNX's test runner checks a backend (onnx/backend/test/runner/__init__.py,
// assert_similar_outputs: the same dtype, then numpy.testing.assert_allclose with the test's rtol and atol).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/errors.h"

namespace fusediff::bisect {

namespace {

double Tolerance(const nlohmann::json& j, const char* key, double fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number() || !(j[key].get<double>() >= 0)) {
    throw InputError(where + ": \"" + key + "\": expected a non-negative number");
  }
  return j[key].get<double>();
}

}  // namespace

void ExpectedTolerances(const std::string& model_path, const BisectOptions& options, ExpectedCheck& check) {
  check.rtol = 1e-3;  // onnx/backend/test/loader/__init__.py: rtol = 1e-3, atol = 1e-7 unless data.json says
  check.atol = 1e-7;
  check.tolerance_source = "ONNX runner default";
  const std::filesystem::path data = std::filesystem::path(model_path).parent_path() / "data.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(data, ec)) {
    std::ifstream in(data);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
      throw InputError(data.string() + ": not JSON (" + e.what() + ")");
    }
    check.rtol = Tolerance(j, "rtol", check.rtol, data.string());
    check.atol = Tolerance(j, "atol", check.atol, data.string());
    check.tolerance_source = data.string();
  }
  if (options.expected_rtol || options.expected_atol) {
    check.rtol = options.expected_rtol.value_or(check.rtol);
    check.atol = options.expected_atol.value_or(check.atol);
    check.tolerance_source = "--expected-rtol/--expected-atol";
  }
}

void CheckExpected(const onnx_io::ModelInfo& model, const InputSet& set, const std::vector<onnx_io::Tensor>& outputs,
                   ExpectedCheck& check) {
  if (set.expected.empty()) return;
  check.checked = true;
  for (size_t o = 0; o < model.outputs.size(); ++o) {
    ExpectedOutput e;
    e.set = set.where;
    e.output = model.outputs[o].name;
    const std::optional<onnx_io::Tensor>& want = set.expected[o];
    const onnx_io::Tensor& got = outputs[o];
    if (!want) {
      e.problem = "no output_" + std::to_string(o) + ".pb for it";
    } else if (want->type != got.type) {
      e.problem = "ONNX Runtime returns " + onnx_io::to_string(got.type) + ", the test expects " + onnx_io::to_string(want->type);
    } else if (want->dims != got.dims) {
      e.problem = "ONNX Runtime returns shape " + onnx_io::DimsText(got.dims) + ", the test expects " +
                  onnx_io::DimsText(want->dims);
    } else {
      e.elements = got.elements();
      const bool integer = !onnx_io::is_float(got.type);
      for (size_t i = 0; i < e.elements; ++i) {
        const double a = got.value(i), x = want->value(i);
        if (std::isnan(a) && std::isnan(x)) continue;  // assert_allclose: equal_nan=True
        // Integers beyond 2^53 are compared by their bits: a double would round them together.
        const bool equal = integer ? got.bits(i) == want->bits(i) : a == x;
        const double diff = std::fabs(a - x);
        if (!equal && !(diff <= check.atol + check.rtol * std::fabs(x))) ++e.mismatched;
        if (!equal) e.max_abs = std::max(e.max_abs, std::isnan(diff) ? INFINITY : diff);
      }
    }
    if (!e.problem.empty() || e.mismatched > 0) check.agree = false;
    check.outputs.push_back(std::move(e));
  }
}

}  // namespace fusediff::bisect

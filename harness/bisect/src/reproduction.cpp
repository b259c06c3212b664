// Standalone reproductions of the sessions ONNX Runtime refused: the model, the exact options and a short
// onnxruntime-node script, so that a refusal can be shown to anyone without fusediff.
#include <stdlib.h>

#include <cstdio>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::bisect {

namespace {

std::string OneLine(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return text;
}

// The script: the options onnxruntime-node gets are the runner's (fused/onnxruntime/runner/runner.js) and those the
// in-process runtime sets through the C API, so the session is the one fusediff created.
std::string Script(const fused::ort::SessionSpec& spec, const std::string& phase, const std::string& message,
                   const std::string& runtime_version) {
  nlohmann::json options = {{"graphOptimizationLevel", spec.level}, {"intraOpNumThreads", 1}, {"interOpNumThreads", 1},
                            {"executionMode", "sequential"},       {"logSeverityLevel", 3}};
  nlohmann::json extra = nlohmann::json::object();
  if (!spec.disabled.empty()) extra[fused::ort::kDisableOptimizersKey] = fused::ort::DisableOptimizersValue(spec.disabled);
  for (const auto& [key, value] : spec.config) extra[key] = value;
  if (!extra.empty()) options["extra"] = extra;
  std::string js;
  js += "'use strict';\n";
  js += "// Written by `fusediff bisect`: " + runtime_version + " refused this session (at " + phase + "):\n";
  js += "//   " + OneLine(message) + "\n";
  js += "// Run with onnxruntime-node 1.30.0: NODE_PATH=/path/to/node_modules node repro.js\n";
  js += "// Exit 1 and ONNX Runtime's message: refused again; exit 0: not reproduced.\n";
  js += "const fs = require('fs');\nconst path = require('path');\nconst ort = require('onnxruntime-node');\n";
  js += "const options = " + options.dump() + ";\n";
  js += "const arrays = { float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,\n"
        "  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,\n"
        "  uint64: BigUint64Array, float16: Uint16Array, bool: Uint8Array };\n";
  js += "function feeds(set) {  // inputs/set_K/inputs.json: name, type, dims and the raw little-endian file\n"
        "  const dir = path.join(__dirname, 'inputs', set);\n"
        "  const out = {};\n"
        "  for (const t of JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json')))) {\n"
        "    const bytes = fs.readFileSync(path.join(dir, t.file));\n"
        "    const copy = new Uint8Array(bytes.length);\n"
        "    copy.set(bytes);\n"
        "    const Ctor = arrays[t.type];\n"
        "    out[t.name] = new ort.Tensor(t.type, new Ctor(copy.buffer, 0, bytes.length / Ctor.BYTES_PER_ELEMENT), t.dims);\n"
        "  }\n"
        "  return out;\n"
        "}\n";
  js += "(async () => {\n  try {\n";
  js += "    const session = await ort.InferenceSession.create(path.join(__dirname, 'model.onnx'), options);\n";
  if (phase == "run") {
    js += "    for (const set of fs.readdirSync(path.join(__dirname, 'inputs')).sort()) await session.run(feeds(set));\n";
  }
  js += "    console.log('not reproduced: the session was created" + std::string(phase == "run" ? " and ran" : "") + "');\n";
  js += "    process.exit(0);\n  } catch (e) {\n    console.log('refused: ' + e.message);\n    process.exit(1);\n  }\n})();\n";
  return js;
}

void WriteInputs(const std::filesystem::path& dir, const std::vector<std::vector<onnx_io::Tensor>>& sets) {
  for (size_t k = 0; k < sets.size(); ++k) {
    char set[32];
    std::snprintf(set, sizeof set, "set_%04zu", k);
    const std::filesystem::path folder = dir / "inputs" / set;
    std::filesystem::create_directories(folder);
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < sets[k].size(); ++i) {
      const onnx_io::Tensor& t = sets[k][i];
      const std::string file = "input_" + std::to_string(i) + ".raw";
      reports::WriteFileAtomically((folder / file).string(), std::string(t.bytes.begin(), t.bytes.end()));
      list.push_back({{"name", t.name}, {"type", onnx_io::to_string(t.type)}, {"dims", t.dims}, {"file", file}});
    }
    reports::WriteFileAtomically((folder / "inputs.json").string(), list.dump(1) + "\n");
  }
}

}  // namespace

std::string ReproductionRoot(const std::string& given) {
  if (!given.empty()) {
    std::filesystem::create_directories(given);
    return given;
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "fusediff-repro-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a folder for reproductions in /tmp");
  return tmpl;
}

std::string WriteReproduction(const std::string& dir, const fused::ort::SessionSpec& spec, const std::string& phase,
                              const std::string& message, const std::vector<std::vector<onnx_io::Tensor>>& sets,
                              const std::string& runtime_version) {
  const std::filesystem::path folder(dir);
  std::filesystem::create_directories(folder);
  reports::WriteFileAtomically((folder / "model.onnx").string(), onnx_io::ReadModelBytes(spec.model));
  std::string options = "# " + runtime_version + " refused this session at " + phase + ": " + OneLine(message) + "\n";
  options += "graph_optimization_level=" + spec.level + "\n";
  if (!spec.disabled.empty()) {
    options += std::string(fused::ort::kDisableOptimizersKey) + "=" + fused::ort::DisableOptimizersValue(spec.disabled) + "\n";
  }
  for (const auto& [key, value] : spec.config) options += key + "=" + value + "\n";
  options += "intra_op_num_threads=1\ninter_op_num_threads=1\nexecution_mode=sequential\n";
  reports::WriteFileAtomically((folder / "options.txt").string(), options);
  if (phase == "run") WriteInputs(folder, sets);
  reports::WriteFileAtomically((folder / "repro.js").string(), Script(spec, phase, message, runtime_version));
  return dir;
}

}  // namespace fusediff::bisect

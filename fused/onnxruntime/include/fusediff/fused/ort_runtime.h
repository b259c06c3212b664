#pragma once
// ONNX Runtime as a path under test for whole models: sessions at a graph optimization level with named graph
// transformers disabled, their saved optimized models, outputs and timings. One interface (Runtime); the
// implementation drives onnxruntime-node (pinned in fused/onnxruntime/runner/package-lock.json) through a Node
// runner that it starts as a child process and speaks line-delimited JSON with.
#include <memory>
#include <string>
#include <vector>

#include "fusediff/onnx/onnx_io.h"

namespace fusediff::fused::ort {

// The session config key ONNX Runtime reads the disabled transformer and rewrite-rule names from
// (onnxruntime_session_options_config_keys.h). Its value separates names by ';'
// (InferenceSession::ctor splits it on ';'; another separator yields one unknown name, silently ignored).
inline constexpr const char* kDisableOptimizersKey = "optimization.disable_specified_optimizers";
std::string DisableOptimizersValue(const std::vector<std::string>& names);  // "A;B"

struct SessionSpec {
  std::string model;
  std::string level = "all";              // disabled | basic | extended | layout | all
  std::vector<std::string> disabled;      // graph transformer and rewrite-rule names
  std::string optimized_model;            // where ORT saves the optimized model; empty: not saved
};

struct SessionHandle {
  int id = 0;
  std::vector<std::string> inputs, outputs;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string version() const = 0;  // "onnxruntime-node 1.30.0 (node 20.20.2)"
  // Throws InputError when ORT refuses the model (message: ORT's).
  virtual SessionHandle Create(const SessionSpec& spec) = 0;
  virtual std::vector<onnx_io::Tensor> Run(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) = 0;
  // Every set of feeds, in one request: the outputs per set.
  virtual std::vector<std::vector<onnx_io::Tensor>> RunAll(const SessionHandle& s,
                                                           const std::vector<std::vector<onnx_io::Tensor>>& sets) = 0;
  // Milliseconds of `repeats` runs after `warmup` unmeasured ones.
  virtual std::vector<double> Time(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds, int warmup,
                                   int repeats) = 0;
  virtual void Release(const SessionHandle& s) = 0;
  // Create, run every set, time the first set (`repeats` > 0: `throwaway` unmeasured runs, then `warmup`, then
  // `repeats` timed), release: one request per session.
  struct Evaluation {
    std::vector<std::vector<onnx_io::Tensor>> results;
    std::vector<double> ms;
  };
  virtual Evaluation Evaluate(const SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& sets,
                              int throwaway, int warmup, int repeats) = 0;
  // Seconds spent inside ONNX Runtime's own calls so far (session creation, runs, release), as the runner timed them.
  virtual double ort_seconds() const = 0;
};

// Where the runner lives: $FUSEDIFF_ORT_RUNNER_DIR, else the source tree's fused/onnxruntime/runner.
std::string RunnerDirectory();
// Starts `node runner.js`. Throws InputError (exit 2) naming the missing path and `bash scripts/setup.sh` when
// onnxruntime-node is not installed there or node is missing.
std::unique_ptr<Runtime> StartNodeRuntime();

}  // namespace fusediff::fused::ort

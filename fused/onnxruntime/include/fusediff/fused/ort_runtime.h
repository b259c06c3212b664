#pragma once
// ONNX Runtime as a path under test for whole models: sessions at a graph optimization level with named graph
// transformers disabled, their saved optimized models, outputs and timings. One interface (Runtime), two
// implementations of the same library, onnxruntime-node's libonnxruntime.so.1 (pinned in
// fused/onnxruntime/runner/package-lock.json): in process through ONNX Runtime's C API (the default: no runner to
// start, no pipe, no copies), or through a Node runner started as a child process (line-delimited JSON).
#include <memory>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/onnx/onnx_io.h"

namespace fusediff::fused::ort {

// ONNX Runtime refused a session: creating it ("create": loading, optimizing or checking the graph) or running it
// ("run"). The message is ONNX Runtime's. A bisect records it as a step's verdict; uncaught, it exits 2.
class Refused : public InputError {
 public:
  Refused(std::string phase, const std::string& message) : InputError(message), phase_(std::move(phase)) {}
  const std::string& phase() const { return phase_; }

 private:
  std::string phase_;
};

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
  // Other session config entries, as given (`optimization.enable_gelu_approximation` = "1").
  std::vector<std::pair<std::string, std::string>> config;
};

struct SessionHandle {
  int id = 0;
  std::vector<std::string> inputs, outputs;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string version() const = 0;  // "onnxruntime-node 1.30.0 (node 20.20.2)"
  // Throws Refused when ORT refuses the model (message: ORT's).
  virtual SessionHandle Create(const SessionSpec& spec) = 0;
  virtual std::vector<onnx_io::Tensor> Run(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) = 0;
  virtual void Release(const SessionHandle& s) = 0;
  // Create, run every set (Refused where ONNX Runtime refuses either), time the first set (`repeats` > 0: `throwaway` unmeasured runs, then `warmup`, then
  // `repeats` timed), release: one request per session. Fills `e`, reusing its buffers (a bisect evaluates
  // hundreds of sessions of the same shapes).
  struct Evaluation {
    std::vector<std::vector<onnx_io::Tensor>> results;  // [set][output]
    std::vector<double> ms;
  };
  virtual void Evaluate(const SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& sets, int throwaway,
                        int warmup, int repeats, Evaluation& e) = 0;
  // One run of a created session, its outputs dropped: the milliseconds ONNX Runtime's run took (by default the wall
  // time around Run). Throws Refused where ONNX Runtime refuses the run.
  virtual double TimedRun(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds);
  // Times sessions against each other on one set of feeds: `warmup` runs of each, then `repeats` rounds of one run of
  // each, alternating which goes first (A B, B A, ...), so that drift (clock frequency, caches, other load) falls
  // on all alike. ms[k][i]: session k's run in round i.
  std::vector<std::vector<double>> TimeAlternating(const std::vector<SessionHandle>& sessions,
                                                   const std::vector<onnx_io::Tensor>& feeds, int warmup, int repeats);
  // Releases every session and the runtime itself (in process: the environment, timed inside; the Node runner: it
  // exits). Nothing may be created after it; the destructor calls it.
  virtual void Close() = 0;
  // Seconds spent inside ONNX Runtime's own calls so far (environment and session creation, runs, release), timed
  // around those calls alone.
  virtual double ort_seconds() const = 0;
};

// Where the runner lives: $FUSEDIFF_ORT_RUNNER_DIR, else the source tree's fused/onnxruntime/runner.
std::string RunnerDirectory();
// The library both implementations run: RunnerDirectory()'s onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1.
std::string LibraryPath();
// Sets ORT_DISABLE_TELEMETRY=1 unless the environment already has it: both Start functions call it first.
void DisableTelemetry();
// Starts `node runner.js`. Throws InputError (exit 2) naming the missing path and `bash scripts/setup.sh` when
// onnxruntime-node is not installed there or node is missing.
std::unique_ptr<Runtime> StartNodeRuntime();
// Loads LibraryPath() into this process and drives it through the C API. Throws InputError (exit 2) naming the
// missing library and `bash scripts/setup.sh`, or when fusediff was built without the C API's header.
std::unique_ptr<Runtime> StartInProcessRuntime();
// Whether this build has the in-process implementation (the C API's header was found at configure time).
bool HaveInProcessRuntime();
// The one fusediff uses: in process where built with it, unless $FUSEDIFF_ORT_RUNTIME=node; else the Node runner.
std::unique_ptr<Runtime> StartRuntime();

}  // namespace fusediff::fused::ort

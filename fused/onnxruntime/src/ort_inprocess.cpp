// ONNX Runtime in process: the same libonnxruntime.so.1 the Node runner loads (onnxruntime-node's), opened with
// dlopen and driven through the C API (OrtGetApiBase). The header is the C API's as ONNX Runtime ships it, from a
// registry package (fused/onnxruntime/capi, installed by scripts/setup.sh); the library answers the header's API
// version as long as it is not newer than the library's own. Sessions get exactly what the runner gives them
// (onnxruntime-node's defaults plus runner.js's options): one intra-op and one inter-op thread, sequential
// execution, the CPU provider, log severity 3, the graph optimization level, the optimized model's path and the
// session config entries as given.
#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <type_traits>

#include "fusediff/fused/ort_runtime.h"
#include "fusediff/model/errors.h"

#ifdef FUSEDIFF_HAVE_ORT_C_API
#include <onnxruntime_c_api.h>
#endif

namespace fusediff::fused::ort {

#ifndef FUSEDIFF_HAVE_ORT_C_API

bool HaveInProcessRuntime() { return false; }

std::unique_ptr<Runtime> StartInProcessRuntime() {
  throw InputError("fusediff was built without ONNX Runtime's C API header (fused/onnxruntime/capi): run "
                   "`bash scripts/setup.sh` and configure again, or set FUSEDIFF_ORT_RUNTIME=node");
}

#else

namespace {

using Clock = std::chrono::steady_clock;

class InProcessRuntime final : public Runtime {
 private:
  // Calls into ONNX Runtime, adding the call's wall time (and only its) to ort_s_: every API call counts inside,
  // fusediff's own work between them (names, copies of the outputs) outside.
  template <typename F>
  auto Call(F&& f) {
    const auto start = Clock::now();
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      ort_s_ += std::chrono::duration<double>(Clock::now() - start).count();
    } else {
      auto result = f();
      ort_s_ += std::chrono::duration<double>(Clock::now() - start).count();
      return result;
    }
  }

 public:
  explicit InProcessRuntime(const std::string& library) {
    // Loading is ONNX Runtime's own work (relocating the library, its static constructors): timed inside.
    lib_ = Call([&] { return ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL); });
    if (lib_ == nullptr) throw InputError("cannot load ONNX Runtime '" + library + "': " + ::dlerror());
    using GetApiBase = const OrtApiBase* (*)();
    const auto get_base = reinterpret_cast<GetApiBase>(::dlsym(lib_, "OrtGetApiBase"));
    if (get_base == nullptr) throw InputError(library + ": no OrtGetApiBase (not ONNX Runtime?)");
    const OrtApiBase* base = get_base();
    api_ = base->GetApi(ORT_API_VERSION);
    if (api_ == nullptr) {
      throw InputError(library + " (ONNX Runtime " + base->GetVersionString() + ") does not offer C API version " +
                       std::to_string(ORT_API_VERSION) + ": it is older than the header fusediff was built with");
    }
    version_ = std::string("onnxruntime ") + base->GetVersionString() + " (in process: " +
               std::filesystem::path(library).filename().string() + " of onnxruntime-node)";
    // The environment is ONNX Runtime's own set-up (logging, the CPU provider's registries): its time counts inside.
    Check(Call([&] { return api_->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "fusediff", &env_); }), nullptr);
    Check(Call([&] { return api_->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &cpu_); }), nullptr);
    Check(Call([&] { return api_->GetAllocatorWithDefaultOptions(&allocator_); }), nullptr);
  }

  ~InProcessRuntime() override { Close(); }

  // The library stays loaded: ONNX Runtime's own static state is torn down at exit, not at dlclose.
  void Close() override {
    for (auto& [id, s] : sessions_) Call([&] { api_->ReleaseSession(s); });
    sessions_.clear();
    handles_.clear();
    if (cpu_ != nullptr) Call([&] { api_->ReleaseMemoryInfo(cpu_); });
    if (env_ != nullptr) Call([&] { api_->ReleaseEnv(env_); });
    cpu_ = nullptr;
    env_ = nullptr;
  }

  std::string version() const override { return version_; }

  SessionHandle Create(const SessionSpec& spec) override {
    if (env_ == nullptr) throw std::runtime_error("ONNX Runtime: the runtime is closed");
    OrtSessionOptions* options = nullptr;
    Check(Call([&] { return api_->CreateSessionOptions(&options); }), nullptr);
    OrtSession* session = nullptr;
    const GraphOptimizationLevel level = Level(spec.level);
    const std::string disabled = DisableOptimizersValue(spec.disabled);
    try {
      Check(Call([&] { return api_->SetSessionGraphOptimizationLevel(options, level); }), "create");
      Check(Call([&] { return api_->SetIntraOpNumThreads(options, 1); }), nullptr);
      Check(Call([&] { return api_->SetInterOpNumThreads(options, 1); }), nullptr);
      Check(Call([&] { return api_->SetSessionExecutionMode(options, ORT_SEQUENTIAL); }), nullptr);
      Check(Call([&] { return api_->SetSessionLogSeverityLevel(options, 3); }), nullptr);
      if (!spec.optimized_model.empty()) {
        Check(Call([&] { return api_->SetOptimizedModelFilePath(options, spec.optimized_model.c_str()); }), nullptr);
      }
      if (!spec.disabled.empty()) {
        Check(Call([&] { return api_->AddSessionConfigEntry(options, kDisableOptimizersKey, disabled.c_str()); }), "create");
      }
      for (const auto& [key, value] : spec.config) {
        Check(Call([&] { return api_->AddSessionConfigEntry(options, key.c_str(), value.c_str()); }), "create");
      }
      Check(Call([&] { return api_->CreateSession(env_, spec.model.c_str(), options, &session); }), "create");
    } catch (...) {
      Call([&] { api_->ReleaseSessionOptions(options); });
      throw;
    }
    Call([&] { api_->ReleaseSessionOptions(options); });
    SessionHandle h;
    h.id = next_id_++;
    sessions_[h.id] = session;
    h.inputs = Names(session, true);
    h.outputs = Names(session, false);
    handles_[h.id] = h;
    return h;
  }

  // One timed call per phase (wrap the feeds, run, describe the outputs, release): the clock costs about 30 ns a read
  // here, and a run of a small model a few microseconds.
  std::vector<onnx_io::Tensor> Run(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) override {
    std::vector<onnx_io::Tensor> out;
    RunInto(s, feeds, &out);
    return out;
  }

  // One run; its outputs copied into `out` (its buffers reused) unless null (a timed or warm-up run).
  void RunInto(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds, std::vector<onnx_io::Tensor>* out) {
    OrtSession* session = SessionOf(s.id);
    const SessionHandle& h = handles_.at(s.id);
    std::vector<const char*> input_names, output_names;
    for (const onnx_io::Tensor& t : feeds) input_names.push_back(t.name.c_str());
    for (const auto& n : h.outputs) output_names.push_back(n.c_str());
    std::vector<OrtValue*> inputs(feeds.size(), nullptr);
    std::vector<OrtValue*> outputs(h.outputs.size(), nullptr);
    try {
      // ONNX Runtime reads the bytes in place (no copy); the run does not write its inputs.
      Check(Call([&] {
              for (size_t i = 0; i < feeds.size(); ++i) {
                const onnx_io::Tensor& t = feeds[i];
                OrtStatus* st = api_->CreateTensorWithDataAsOrtValue(
                    cpu_, const_cast<uint8_t*>(t.bytes.data()), t.bytes.size(), t.dims.data(), t.dims.size(),
                    static_cast<ONNXTensorElementDataType>(t.type), &inputs[i]);
                if (st != nullptr) return st;
              }
              return static_cast<OrtStatus*>(nullptr);
            }),
            "run");
      const double before = ort_s_;
      Check(Call([&] {
              return api_->Run(session, nullptr, input_names.data(), inputs.data(), inputs.size(), output_names.data(),
                               output_names.size(), outputs.data());
            }),
            "run");
      run_s_ = ort_s_ - before;
      if (out != nullptr) CopyOutputs(h.outputs, outputs, *out);
    } catch (...) {
      Release(inputs);
      Release(outputs);
      throw;
    }
    Release(inputs);
    Release(outputs);
  }

  void Release(const SessionHandle& s) override {
    OrtSession* session = SessionOf(s.id);
    Call([&] { api_->ReleaseSession(session); });
    sessions_.erase(s.id);
    handles_.erase(s.id);
  }

  void Evaluate(const SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& sets, int throwaway,
                int warmup, int repeats, Evaluation& e) override {
    const SessionHandle h = Create(spec);
    e.results.resize(sets.size());
    e.ms.clear();
    try {
      for (size_t k = 0; k < sets.size(); ++k) RunInto(h, sets[k], &e.results[k]);
      if (repeats > 0 && !sets.empty()) {
        for (int i = 0; i < throwaway + warmup; ++i) RunInto(h, sets.front(), nullptr);
        for (int i = 0; i < repeats; ++i) {
          RunInto(h, sets.front(), nullptr);
          e.ms.push_back(run_s_ * 1000.0);  // ONNX Runtime's Run call alone
        }
      }
    } catch (...) {
      Release(h);
      throw;
    }
    Release(h);
  }

  double ort_seconds() const override { return ort_s_; }

  double TimedRun(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) override {
    RunInto(s, feeds, nullptr);
    return run_s_ * 1000.0;  // ONNX Runtime's Run call alone
  }

 private:

  static GraphOptimizationLevel Level(const std::string& level) {
    if (level == "disabled") return ORT_DISABLE_ALL;
    if (level == "basic") return ORT_ENABLE_BASIC;
    if (level == "extended") return ORT_ENABLE_EXTENDED;
    if (level == "layout") return ORT_ENABLE_LAYOUT;
    if (level == "all") return ORT_ENABLE_ALL;
    throw InputError("graph optimization level '" + level + "': expected disabled, basic, extended, layout or all");
  }

  // Throws ONNX Runtime's message: Refused where ORT refused the model ("create") or the feeds ("run"), a
  // runtime_error (exit 3) where a call that takes no user input failed (`refusal` null).
  void Check(OrtStatus* status, const char* refusal) {
    if (status == nullptr) return;
    const std::string message = std::string("ONNX Runtime: ") + api_->GetErrorMessage(status);
    api_->ReleaseStatus(status);
    if (refusal != nullptr) throw Refused(refusal, message);
    throw std::runtime_error(message);
  }

  OrtSession* SessionOf(int id) const {
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) throw std::runtime_error("no ONNX Runtime session " + std::to_string(id));
    return it->second;
  }

  std::vector<std::string> Names(OrtSession* session, bool inputs) {
    size_t count = 0;
    Check(Call([&] { return inputs ? api_->SessionGetInputCount(session, &count) : api_->SessionGetOutputCount(session, &count); }),
          nullptr);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      char* name = nullptr;
      Check(Call([&] {
              return inputs ? api_->SessionGetInputName(session, i, allocator_, &name)
                            : api_->SessionGetOutputName(session, i, allocator_, &name);
            }),
            nullptr);
      names.emplace_back(name);
      Check(Call([&] { return api_->AllocatorFree(allocator_, name); }), nullptr);
    }
    return names;
  }

  // Copies of the outputs into `out` (its buffers reused): their types, shapes and data read in two timed calls, the
  // copies made outside them.
  void CopyOutputs(const std::vector<std::string>& names, const std::vector<OrtValue*>& values,
                   std::vector<onnx_io::Tensor>& out) {
    struct View {
      OrtTensorTypeAndShapeInfo* info = nullptr;
      ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
      size_t rank = 0, count = 0;
      void* data = nullptr;
    };
    std::vector<View> views(values.size());
    out.resize(values.size());
    auto release_infos = [&] {
      for (View& v : views) {
        if (v.info != nullptr) api_->ReleaseTensorTypeAndShapeInfo(v.info);
        v.info = nullptr;
      }
    };
    OrtStatus* status = Call([&] {
      for (View& v : views) {
        const size_t o = static_cast<size_t>(&v - views.data());
        OrtStatus* st = api_->GetTensorTypeAndShape(values[o], &v.info);
        if (st == nullptr) st = api_->GetTensorElementType(v.info, &v.type);
        if (st == nullptr) st = api_->GetDimensionsCount(v.info, &v.rank);
        if (st == nullptr) st = api_->GetTensorShapeElementCount(v.info, &v.count);
        if (st == nullptr) st = api_->GetTensorMutableData(values[o], &v.data);
        if (st != nullptr) return st;
      }
      return static_cast<OrtStatus*>(nullptr);
    });
    if (status == nullptr) {
      for (size_t o = 0; o < views.size(); ++o) out[o].dims.resize(views[o].rank);
      status = Call([&] {
        for (size_t o = 0; o < views.size(); ++o) {
          if (OrtStatus* st = api_->GetDimensions(views[o].info, out[o].dims.data(), views[o].rank)) return st;
        }
        return static_cast<OrtStatus*>(nullptr);
      });
    }
    Call(release_infos);
    Check(status, nullptr);
    for (size_t o = 0; o < views.size(); ++o) {
      onnx_io::Tensor& t = out[o];
      t.name = names[o];
      const auto type = static_cast<int32_t>(views[o].type);  // ONNX Runtime numbers types as ONNX does
      if (!onnx_io::is_supported_dtype(type)) {
        onnx_io::ThrowUnsupported("ONNX Runtime output " + names[o], "element type",
                                  "element type " + std::to_string(type) + " is not one fusediff reads");
      }
      t.type = static_cast<onnx_io::DType>(type);
      const size_t bytes = views[o].count * onnx_io::element_size(t.type);
      t.bytes.resize(bytes);
      if (bytes > 0) std::memcpy(t.bytes.data(), views[o].data, bytes);
    }
  }

  void Release(std::vector<OrtValue*>& values) {
    Call([&] {
      for (OrtValue*& v : values) {
        if (v != nullptr) api_->ReleaseValue(v);
        v = nullptr;
      }
    });
  }

  void* lib_ = nullptr;
  const OrtApi* api_ = nullptr;
  OrtEnv* env_ = nullptr;
  OrtMemoryInfo* cpu_ = nullptr;
  OrtAllocator* allocator_ = nullptr;
  std::map<int, OrtSession*> sessions_;
  std::map<int, SessionHandle> handles_;
  int next_id_ = 1;
  double ort_s_ = 0;
  double run_s_ = 0;  // the last Run call's
  std::string version_;
};

}  // namespace

bool HaveInProcessRuntime() { return true; }

std::unique_ptr<Runtime> StartInProcessRuntime() {
  const std::string library = LibraryPath();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(library, ec)) {
    throw InputError("ONNX Runtime is not installed: " + library + " is missing; run `bash scripts/setup.sh` (npm ci "
                     "--ignore-scripts in " + RunnerDirectory() + ")");
  }
  DisableTelemetry();
  return std::make_unique<InProcessRuntime>(library);
}

#endif

}  // namespace fusediff::fused::ort

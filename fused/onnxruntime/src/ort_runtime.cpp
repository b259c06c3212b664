#include "fusediff/fused/ort_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fusediff/model/errors.h"

extern char** environ;

namespace fusediff::fused::ort {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64(const std::vector<uint8_t>& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint32_t{in[i]} << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::vector<uint8_t> Unbase64(const std::string& in) {
  int table[256];
  for (int& t : table) t = -1;
  for (int k = 0; k < 64; ++k) table[static_cast<unsigned char>(kAlphabet[k])] = k;
  std::vector<uint8_t> out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    const int v = table[static_cast<unsigned char>(ch)];
    if (v < 0) continue;  // '=' padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return out;
}

nlohmann::json TensorJson(const onnx_io::Tensor& t) {
  return {{"name", t.name}, {"type", onnx_io::to_string(t.type)}, {"dims", t.dims}, {"data", Base64(t.bytes)}};
}

std::vector<onnx_io::Tensor> TensorsOf(const nlohmann::json& list) {
  std::vector<onnx_io::Tensor> out;
  for (const auto& o : list) {
    onnx_io::Tensor t;
    t.name = o.at("name").get<std::string>();
    t.type = onnx_io::parse_dtype(o.at("type").get<std::string>(), "ONNX Runtime output " + t.name);
    t.dims = o.at("dims").get<std::vector<int64_t>>();
    t.bytes = Unbase64(o.at("data").get<std::string>());
    out.push_back(std::move(t));
  }
  return out;
}

class NodeRuntime final : public Runtime {
 public:
  NodeRuntime(const std::string& node, const std::string& script) {
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("cannot create pipes for the ONNX Runtime runner: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    std::vector<std::string> args = {node, script};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawnp(&pid_, node.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_child[0]);
    ::close(from_child[1]);
    if (rc != 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      throw InputError("cannot start '" + node + "' (" + std::strerror(rc) +
                       "): ONNX Runtime needs Node.js >= 18; run `bash scripts/setup.sh`");
    }
    to_ = ::fdopen(to_child[1], "w");
    from_ = ::fdopen(from_child[0], "r");
    const nlohmann::json v = Call({{"op", "version"}});
    version_ = "onnxruntime-node " + v.at("ort").get<std::string>() + " (node " + v.at("node").get<std::string>() + ")";
  }

  ~NodeRuntime() override { Close(); }

  void Close() override {
    if (to_) std::fclose(to_);  // EOF: the runner finishes its queue and exits
    if (from_) std::fclose(from_);
    to_ = from_ = nullptr;
    if (pid_ > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

  std::string version() const override { return version_; }

  void Evaluate(const SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& sets, int throwaway,
                int warmup, int repeats, Evaluation& e) override {
    nlohmann::json req = SpecJson(spec);
    req["op"] = "evaluate";
    req["sets"] = nlohmann::json::array();
    for (const auto& feeds : sets) {
      nlohmann::json set = nlohmann::json::array();
      for (const auto& t : feeds) set.push_back(TensorJson(t));
      req["sets"].push_back(std::move(set));
    }
    req["throwaway"] = throwaway;
    req["warmup"] = warmup;
    req["repeats"] = repeats;
    const nlohmann::json a = Call(req, /*input_error=*/true);
    e.results.clear();
    e.ms.clear();
    for (const auto& result : a.at("results")) e.results.push_back(TensorsOf(result));
    if (a.contains("ms")) e.ms = a.at("ms").get<std::vector<double>>();
  }

  static nlohmann::json SpecJson(const SessionSpec& spec) {
    nlohmann::json req = {{"op", "create"}, {"model", spec.model}, {"level", spec.level}};
    nlohmann::json config = nlohmann::json::object();
    if (!spec.disabled.empty()) config[kDisableOptimizersKey] = DisableOptimizersValue(spec.disabled);
    for (const auto& [key, value] : spec.config) config[key] = value;
    req["config"] = config;
    req["optimized"] = spec.optimized_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(spec.optimized_model);
    return req;
  }

  SessionHandle Create(const SessionSpec& spec) override {
    const nlohmann::json a = Call(SpecJson(spec), /*input_error=*/true);
    SessionHandle h;
    h.id = a.at("session").get<int>();
    h.inputs = a.at("inputs").get<std::vector<std::string>>();
    h.outputs = a.at("outputs").get<std::vector<std::string>>();
    return h;
  }

  std::vector<onnx_io::Tensor> Run(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) override {
    nlohmann::json req = {{"op", "run"}, {"session", s.id}, {"feeds", nlohmann::json::array()}};
    for (const auto& t : feeds) req["feeds"].push_back(TensorJson(t));
    return TensorsOf(Call(req, /*input_error=*/true).at("outputs"));
  }

  void Release(const SessionHandle& s) override { Call({{"op", "release"}, {"session", s.id}}); }
  double ort_seconds() const override { return ort_ms_ / 1000.0; }

  // The runner's own timing around session.run (process.hrtime), one run per request.
  double TimedRun(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) override {
    nlohmann::json req = {{"op", "time"}, {"session", s.id}, {"warmup", 0}, {"repeats", 1}, {"feeds", nlohmann::json::array()}};
    for (const auto& t : feeds) req["feeds"].push_back(TensorJson(t));
    return Call(req, /*input_error=*/true).at("ms").at(0).get<double>();
  }

 private:
  nlohmann::json Call(const nlohmann::json& req, bool input_error = false) {
    if (to_ == nullptr) throw std::runtime_error("the ONNX Runtime runner is closed");
    const std::string line = req.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), to_) != line.size() || std::fflush(to_) != 0) {
      throw std::runtime_error("the ONNX Runtime runner stopped reading (it exited)");
    }
    std::string answer;
    char buffer[65536];
    while (std::fgets(buffer, sizeof buffer, from_) != nullptr) {
      answer += buffer;
      if (!answer.empty() && answer.back() == '\n') break;
    }
    if (answer.empty()) throw std::runtime_error("the ONNX Runtime runner exited without an answer");
    nlohmann::json a = nlohmann::json::parse(answer);
    if (!a.value("ok", false)) {
      const std::string error = "ONNX Runtime: " + a.value("error", std::string("unknown error"));
      if (input_error) throw Refused(a.value("phase", std::string("create")), error);
      throw std::runtime_error(error);
    }
    ort_ms_ += a.value("ort_ms", 0.0);
    return a;
  }

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string version_;
  double ort_ms_ = 0;
};

}  // namespace

double Runtime::TimedRun(const SessionHandle& s, const std::vector<onnx_io::Tensor>& feeds) {
  const auto start = std::chrono::steady_clock::now();
  Run(s, feeds);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::vector<std::vector<double>> Runtime::TimeAlternating(const std::vector<SessionHandle>& sessions,
                                                          const std::vector<onnx_io::Tensor>& feeds, int warmup,
                                                          int repeats) {
  for (int i = 0; i < warmup; ++i) {
    for (const SessionHandle& s : sessions) TimedRun(s, feeds);
  }
  std::vector<std::vector<double>> ms(sessions.size());
  for (int i = 0; i < repeats; ++i) {
    for (size_t k = 0; k < sessions.size(); ++k) {
      const size_t at = i % 2 == 0 ? k : sessions.size() - 1 - k;
      ms[at].push_back(TimedRun(sessions[at], feeds));
    }
  }
  return ms;
}

std::string DisableOptimizersValue(const std::vector<std::string>& names) {
  std::string value;
  for (const auto& n : names) value += (value.empty() ? "" : ";") + n;
  return value;
}

std::string RunnerDirectory() {
  if (const char* dir = std::getenv("FUSEDIFF_ORT_RUNNER_DIR"); dir != nullptr && *dir != '\0') return dir;
  return FUSEDIFF_ORT_RUNNER_DIR;
}

std::string LibraryPath() {
  return (std::filesystem::path(RunnerDirectory()) / "node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1")
      .string();
}

void DisableTelemetry() {
  // ONNX Runtime 1.30 records telemetry events by default; on Linux it persists them in an SQLite database under
  // ~/.cache/Microsoft/DeveloperTools/.onnxruntime (growing by every session, fsync'ed at session creation and at
  // exit: measured 0.1-0.2 s of a bisect). A test harness records nothing in the user's home. ORT reads the switch
  // from the environment at start; a value the user set stays.
  ::setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
}

std::unique_ptr<Runtime> StartRuntime() {
  const char* which = std::getenv("FUSEDIFF_ORT_RUNTIME");
  const std::string choice = which != nullptr ? which : "";
  if (choice == "node") return StartNodeRuntime();
  if (!choice.empty() && choice != "in-process") {
    throw InputError("FUSEDIFF_ORT_RUNTIME: expected in-process or node, got '" + choice + "'");
  }
  return HaveInProcessRuntime() ? StartInProcessRuntime() : StartNodeRuntime();
}

std::unique_ptr<Runtime> StartNodeRuntime() {
  const std::filesystem::path dir = RunnerDirectory();
  const std::filesystem::path library = LibraryPath();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "runner.js", ec) || !std::filesystem::is_regular_file(library, ec)) {
    throw InputError("ONNX Runtime is not installed: " + library.string() +
                     " is missing; run `bash scripts/setup.sh` (npm ci --ignore-scripts in " + dir.string() + ")");
  }
  DisableTelemetry();  // the runner inherits the environment
  const char* node = std::getenv("FUSEDIFF_NODE");
  ::signal(SIGPIPE, SIG_IGN);  // a runner that died is reported by the failed write, not by a signal
  return std::make_unique<NodeRuntime>(node != nullptr && *node != '\0' ? node : "node", (dir / "runner.js").string());
}

}  // namespace fusediff::fused::ort

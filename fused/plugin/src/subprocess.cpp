// The subprocess transport (exec:, --isolate) and the protocol's server side (plugin-host).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "fusediff/fused/plugin_child.h"
#include "fusediff/fused/plugin_subprocess.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

namespace {

// "graph" for a field the plugin leaves to the case's graph, else fusediff's name; and back.
template <typename E>
nlohmann::json OrGraph(const std::optional<E>& v) {
  return v ? nlohmann::json(std::string(to_string(*v))) : nlohmann::json("graph");
}
template <typename E, typename... Values>
std::optional<E> GraphOr(const nlohmann::json& d, const char* key, Values... values) {
  if (!d.contains(key)) return std::nullopt;
  const std::string name = d[key].is_string() ? d[key].get<std::string>() : std::string();
  if (name == "graph") return std::nullopt;
  for (E v : {values...}) {
    if (name == to_string(v)) return v;
  }
  throw ProtocolError(std::string("hello.declaration.") + key + ": " + d[key].dump() + " is not one of its names");
}

nlohmann::json DeclarationJson(const PluginDeclaration& d) {
  return {{"requant", OrGraph(d.requant)},
          {"intermediate_kind", OrGraph(d.intermediate_kind)},
          {"post_ops", OrGraph(d.post_ops)},
          {"threading", std::string(to_string(d.threading))},
          {"preferred_batch", d.preferred_batch},
          {"max_batch", d.limits.max_batch},
          {"max_spatial", d.limits.max_spatial},
          {"max_channels", d.limits.max_channels},
          {"max_kernel", d.limits.max_kernel},
          {"max_stride", d.limits.max_stride},
          {"max_dilation", d.limits.max_dilation},
          {"transposed", d.limits.transposed ? 1 : 0},
          {"weight_range", d.limits.weights == WeightRange::full ? "full" : "symmetric"}};
}

// A declaration from JSON: absent or 0 limits keep the host's defaults, as a zero-filled C declaration does.
PluginDeclaration DeclarationFromJson(const nlohmann::json& d) {
  if (!d.is_object()) throw ProtocolError("hello.declaration: expected an object");
  PluginDeclaration out;
  out.requant = GraphOr<RequantVariant>(d, "requant", RequantVariant::exact, RequantVariant::double_rounding,
                                        RequantVariant::single_rounding, RequantVariant::f32_half_even,
                                        RequantVariant::f32_zero_point_first);
  out.intermediate_kind = GraphOr<IntermediateKind>(d, "intermediate_kind", IntermediateKind::quantized,
                                                    IntermediateKind::f32);
  out.post_ops = GraphOr<PostOpArithmetic>(d, "post_ops", PostOpArithmetic::exact, PostOpArithmetic::binary32,
                                           PostOpArithmetic::binary32_libm);
  const auto threading = GraphOr<Threading>(d, "threading", Threading::serial, Threading::instance_per_thread,
                                            Threading::shared);
  out.threading = threading.value_or(Threading::serial);
  const auto number = [&](const char* key, auto& into) {
    if (!d.contains(key)) return;
    if (!d[key].is_number_integer() || d[key].get<int64_t>() < 0) {
      throw ProtocolError(std::string("hello.declaration.") + key + ": expected a non-negative integer");
    }
    if (d[key].get<int64_t>() > 0) into = static_cast<std::remove_reference_t<decltype(into)>>(d[key].get<int64_t>());
  };
  number("preferred_batch", out.preferred_batch);
  number("max_batch", out.limits.max_batch);
  number("max_spatial", out.limits.max_spatial);
  number("max_channels", out.limits.max_channels);
  number("max_kernel", out.limits.max_kernel);
  number("max_stride", out.limits.max_stride);
  number("max_dilation", out.limits.max_dilation);
  out.limits.transposed = d.contains("transposed") && d["transposed"].is_number_integer() && d["transposed"] != 0;
  if (d.contains("weight_range")) {
    if (d["weight_range"] == "full") out.limits.weights = WeightRange::full;
    else if (d["weight_range"] == "symmetric") out.limits.weights = WeightRange::symmetric;
    else throw ProtocolError("hello.declaration.weight_range: expected \"symmetric\" or \"full\"");
  }
  return out;
}

// Children that finished a case, kept for the next case of the same command (a child's start, fusediff's own for
// --isolate, costs tens of milliseconds: more than a case's draws). A parked child has said hello; the next case
// prepares it again. Children still parked when fusediff exits see their stdin close and exit.
class ChildPool {
 public:
  static ChildPool& instance() {
    static ChildPool* pool = new ChildPool;  // never destroyed: fusediff may end with _Exit
    return *pool;
  }
  std::unique_ptr<ChildProcess> Take(const std::vector<std::string>& argv, PluginHello* hello) {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Parked>& idle = idle_[Key(argv)];
    if (idle.empty()) return nullptr;
    Parked p = std::move(idle.back());
    idle.pop_back();
    *hello = std::move(p.hello);
    return std::move(p.child);
  }
  void Park(const std::vector<std::string>& argv, std::unique_ptr<ChildProcess> child, const PluginHello& hello) {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Parked>& idle = idle_[Key(argv)];
    if (idle.size() < kMaxIdle) idle.push_back(Parked{std::move(child), hello});
    else child->Close(Frame("bye"), std::chrono::milliseconds(2000));
  }

 private:
  static constexpr size_t kMaxIdle = 64;
  struct Parked {
    std::unique_ptr<ChildProcess> child;
    PluginHello hello;
  };
  static std::string Key(const std::vector<std::string>& argv) {
    std::string key;
    for (const std::string& a : argv) key.append(a).push_back('\0');
    return key;
  }
  std::mutex mutex_;
  std::map<std::string, std::vector<Parked>> idle_;
};

class SubprocessTransport : public Transport {
 public:
  SubprocessTransport(std::vector<std::string> argv, std::string what) : argv_(std::move(argv)), what_(std::move(what)) {}
  ~SubprocessTransport() override { Close(); }

  PluginHello Hello() override {
    if (!child_ || !child_->running()) Start();
    return hello_;
  }

  std::string Prepare(const PluginCase& c) override {
    case_ = c;
    if (!child_ || !child_->running()) Start();
    try {
      return SendPrepare();
    } catch (const ChildLost& e) {  // before any draw: the plugin cannot take the case at all
      throw InputError(what_ + ": the child was lost on prepare: " + e.what());
    }
  }

  void Run(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
           std::span<DrawOutcome> outcomes) override {
    std::vector<size_t> counts;
    for (const std::span<int32_t>& out : y) counts.push_back(out.size());
    try {
      if (!child_ || !child_->running()) {
        Start();  // after a child lost the previous batch: the same hello, the same case
        if (case_ && !SendPrepare().empty()) throw ProtocolError("the restarted child rejected the case it accepted");
      }
      const Frame reply = child_->Call(EncodeRun(draws, counts), subprocess_settings().batch_timeout);
      DecodeResult(reply, y, outcomes);
    } catch (const ChildLost& lost) {
      if (draws.size() > 1) {
        // Which draws lose the child: each again on its own (a fresh child for each one that is lost).
        for (size_t i = 0; i < draws.size(); ++i) Run(draws.subspan(i, 1), y.subspan(i, 1), outcomes.subspan(i, 1));
        return;
      }
      outcomes[0] = DrawOutcome{lost.timeout() ? DrawOutcome::Status::timeout : DrawOutcome::Status::crashed,
                                what_ + ": " + lost.what(), ""};
    } catch (const ProtocolError& e) {
      throw InputError(what_ + ": " + e.what());
    }
  }

  bool out_of_process() const override { return true; }

  // The case is over: a healthy child waits for the next case of the same command.
  void Close() override {
    if (child_ && child_->running()) ChildPool::instance().Park(argv_, std::move(child_), hello_);
    child_.reset();
  }

 private:
  void Start() {
    if ((child_ = ChildPool::instance().Take(argv_, &hello_))) return;
    child_ = std::make_unique<ChildProcess>(argv_);
    try {
      hello_ = HelloFromReply(child_->Call(HelloRequest(), subprocess_settings().batch_timeout));
    } catch (const ChildLost& e) {
      throw InputError(what_ + ": no hello from the child: " + e.what());
    } catch (const ProtocolError& e) {
      throw InputError(what_ + ": hello: " + e.what());
    }
  }
  std::string SendPrepare() {
    try {
      const Frame reply = child_->Call(PrepareRequest(*case_), subprocess_settings().batch_timeout);
      if (reply.type() == "rejected") {
        const auto it = reply.header.find("reason");
        return it != reply.header.end() && it->is_string() ? it->get<std::string>() : "rejected (no reason given)";
      }
      ExpectReply(reply, "prepared", "prepare");
      return "";
    } catch (const ProtocolError& e) {
      throw InputError(what_ + ": prepare: " + e.what());
    }
  }

  std::vector<std::string> argv_;
  std::string what_;
  std::unique_ptr<ChildProcess> child_;
  PluginHello hello_;
  std::optional<PluginCase> case_;
};

void WriteAll(int fd, const std::vector<std::byte>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("plugin-host: write: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

// Answers one request through the transport.
Frame Answer(const Frame& request, Transport& transport) {
  const std::string type = request.type();
  if (type == "hello") {
    const auto major = request.header.find("abi_major");
    if (major == request.header.end() || *major != FUSEDIFF_PLUGIN_ABI_MAJOR) {
      throw ProtocolError("hello: plugin-host speaks ABI major " + std::to_string(FUSEDIFF_PLUGIN_ABI_MAJOR));
    }
    return HelloReply(transport.Hello());
  }
  if (type == "prepare") {
    if (!request.header.contains("case")) throw ProtocolError("prepare: no case");
    const std::string why = transport.Prepare(PluginCaseFromJson(request.header["case"], "prepare.case"));
    Frame reply(why.empty() ? "prepared" : "rejected");
    if (!why.empty()) reply.header["reason"] = why;
    return reply;
  }
  if (type == "run") {
    std::vector<size_t> counts;
    const std::vector<PatternDraw> draws = DecodeRun(request, &counts);
    std::vector<std::vector<int32_t>> storage;
    std::vector<std::span<int32_t>> y;
    for (size_t n : counts) storage.emplace_back(n, INT32_MIN);  // poisoned
    for (std::vector<int32_t>& v : storage) y.emplace_back(v);
    std::vector<DrawOutcome> outcomes(draws.size());
    transport.Run(draws, y, outcomes);
    return EncodeResult(y, outcomes);
  }
  throw ProtocolError("unknown message type '" + type + "'");
}

}  // namespace

SubprocessSettings& subprocess_settings() {
  static SubprocessSettings settings = [] {
    SubprocessSettings s;
    if (const char* t = std::getenv("FUSEDIFF_PLUGIN_TIMEOUT"); t && *t) {
      char* end = nullptr;
      const double seconds = std::strtod(t, &end);
      if (*end != '\0' || !(seconds > 0)) throw InputError("FUSEDIFF_PLUGIN_TIMEOUT: expected seconds > 0");
      s.batch_timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    }
    return s;
  }();
  return settings;
}

std::vector<std::string> plugin_host_command() {
  if (!subprocess_settings().plugin_host.empty()) return subprocess_settings().plugin_host;
  if (const char* host = std::getenv("FUSEDIFF_PLUGIN_HOST"); host && *host) {
    std::vector<std::string> argv = split_command(host, "FUSEDIFF_PLUGIN_HOST");
    argv.push_back("plugin-host");
    return argv;
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw InputError("--isolate: cannot find this program (/proc/self/exe): " + error.message());
  return {self.string(), "plugin-host"};
}

std::unique_ptr<Transport> OpenSubprocess(std::vector<std::string> argv, std::string what) {
  return std::make_unique<SubprocessTransport>(std::move(argv), std::move(what));
}

namespace {
// The word's argument as written: the target and its options again ("a b,k=v").
std::string Rejoin(const PluginAddress& a) {
  std::string text = a.target;
  for (const auto& [key, value] : a.options) text += "," + key + "=" + value;
  return text;
}
}  // namespace

std::unique_ptr<Transport> OpenExec(const PluginAddress& a) {
  const std::string command = Rejoin(a);
  return OpenSubprocess(split_command(command, "exec:" + command), "exec:" + command);
}

std::unique_ptr<Transport> OpenIsolated(const PluginAddress& a) {
  std::vector<std::string> argv = plugin_host_command();
  argv.push_back(Rejoin(a));
  return OpenSubprocess(std::move(argv), "isolate:" + Rejoin(a));
}

Frame HelloRequest() {
  Frame f("hello");
  f.header["protocol"] = kProtocolVersion;
  f.header["abi_major"] = FUSEDIFF_PLUGIN_ABI_MAJOR;
  f.header["abi_minor_min"] = 0;
  f.header["abi_minor_max"] = FUSEDIFF_PLUGIN_ABI_MINOR;
  return f;
}

Frame HelloReply(const PluginHello& hello) {
  Frame f("hello");
  f.header["protocol"] = kProtocolVersion;
  f.header["name"] = hello.name;
  f.header["version"] = hello.version;
  f.header["abi_major"] = hello.abi_major;
  f.header["abi_minor"] = hello.abi_minor;
  f.header["features"] = hello.features;
  f.header["declaration"] = DeclarationJson(hello.declaration);
  return f;
}

PluginHello HelloFromReply(const Frame& reply) {
  ExpectReply(reply, "hello", "hello");
  const nlohmann::json& h = reply.header;
  const auto text = [&](const char* key) {
    if (!h.contains(key) || !h[key].is_string()) throw ProtocolError(std::string("hello.") + key + ": expected a string");
    return h[key].get<std::string>();
  };
  const auto number = [&](const char* key) {
    if (!h.contains(key) || !h[key].is_number_unsigned()) {
      throw ProtocolError(std::string("hello.") + key + ": expected a non-negative integer");
    }
    return h[key].get<uint32_t>();
  };
  if (number("protocol") != kProtocolVersion) {
    throw ProtocolError("hello.protocol: " + h["protocol"].dump() + ", this fusediff speaks " +
                        std::to_string(kProtocolVersion));
  }
  PluginHello hello;
  hello.name = text("name");
  hello.version = text("version");
  hello.abi_major = number("abi_major");
  hello.abi_minor = number("abi_minor");
  if (hello.abi_major != FUSEDIFF_PLUGIN_ABI_MAJOR || hello.abi_minor > FUSEDIFF_PLUGIN_ABI_MINOR) {
    throw ProtocolError("hello: ABI " + std::to_string(hello.abi_major) + "." + std::to_string(hello.abi_minor) +
                        ", this fusediff offers " + std::to_string(FUSEDIFF_PLUGIN_ABI_MAJOR) + ".0-" +
                        std::to_string(FUSEDIFF_PLUGIN_ABI_MINOR));
  }
  if (!h.contains("features") || !h["features"].is_array()) throw ProtocolError("hello.features: expected a list");
  for (const nlohmann::json& f : h["features"]) {
    if (!f.is_string()) throw ProtocolError("hello.features: expected strings");
    hello.features.push_back(f.get<std::string>());
  }
  hello.declaration = DeclarationFromJson(h.contains("declaration") ? h["declaration"] : nlohmann::json::object());
  return hello;
}

Frame PrepareRequest(const PluginCase& c) {
  Frame f("prepare");
  f.header["case"] = ToJson(c);
  return f;
}

int ServeProtocol(const std::function<std::unique_ptr<Transport>()>& open, int in_fd, int out_fd) {
  std::unique_ptr<Transport> transport = open();
  bool prepared = false;
  const auto read_some = [&](std::byte* out, size_t n) -> size_t {
    for (;;) {
      const ssize_t got = read(in_fd, out, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return 0;
    }
  };
  for (;;) {
    Frame request;
    if (!Frame::Read(read_some, &request) || request.type() == "bye") break;
    Frame reply;
    int status = 0;
    try {
      if (request.type() == "prepare" && prepared) {  // the next case: a fresh instance, as in process
        transport->Close();
        transport = open();
      }
      prepared = prepared || request.type() == "prepare";
      reply = Answer(request, *transport);
    } catch (const std::exception& e) {  // InputError, ProtocolError, FrameError: the host shows the message
      reply = Frame("error");
      reply.header["message"] = e.what();
      status = 2;
    }
    WriteAll(out_fd, reply.Encode());
    if (status != 0) return status;
  }
  transport->Close();
  return 0;
}

}  // namespace fusediff::fused::plugin

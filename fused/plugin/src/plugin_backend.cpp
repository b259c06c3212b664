#include "fusediff/fused/plugin_backend.h"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <thread>

#include "fusediff/fused/plugin_subprocess.h"
#include "fusediff/fused/plugin_transport.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/model/tolerance.h"

namespace fusediff::fused::plugin {

namespace {
// The transports, by the CaseSpec::backend value their words start with. One row each.
struct TransportKind {
  std::string_view path;
  std::string_view form;  // the word's form, for help and error messages
  std::unique_ptr<Transport> (*open)(const PluginAddress&);
};
constexpr TransportKind kTransports[] = {
    {"plugin", "plugin:PATH.so[,key=value...]", &OpenInProcess},
    {"isolate", "isolate:PATH.so[,key=value...]", &OpenIsolated},  // the same .so in a child (--isolate)
    {"exec", "exec:COMMAND", &OpenExec},                            // a child speaking the subprocess protocol
    {"offline", "offline:DIR", &OpenOfflineWord},                   // answers written by export-draws' answerer
};

const TransportKind& KindOf(std::string_view path) {
  for (const TransportKind& k : kTransports) {
    if (k.path == path) return k;
  }
  throw std::logic_error("plugin backend: no transport for path '" + std::string(path) + "'");
}

PluginAddress AddressOf(const CaseSpec& spec) { return ParseAddress(spec.backend, spec.backend_arg, "fused"); }

std::unique_ptr<Transport> Open(const CaseSpec& spec) {
  const PluginAddress a = AddressOf(spec);
  return KindOf(a.path).open(a);
}

// What each plugin word says about itself, asked once per process; the last one asked about is the run's plugin
// (provenance, the replay's library line).
std::mutex hello_mutex;
std::map<std::string, PluginHello> hellos;
const PluginHello* last_hello = nullptr;

const PluginHello& HelloOf(const CaseSpec& spec) {
  const std::string word = spec.backend + ":" + spec.backend_arg;
  {
    const std::lock_guard<std::mutex> lock(hello_mutex);
    if (auto it = hellos.find(word); it != hellos.end()) return *(last_hello = &it->second);
  }
  std::unique_ptr<Transport> t = Open(spec);
  PluginHello hello = t->Hello();
  t->Close();
  const std::lock_guard<std::mutex> lock(hello_mutex);
  return *(last_hello = &hellos.emplace(word, std::move(hello)).first->second);
}

std::vector<std::pair<std::string, std::string>> FactsOf(const CaseSpec& spec) {
  const PluginHello& h = HelloOf(spec);
  return {{"plugin_name", h.name},
          {"plugin_version", h.version},
          {"plugin_options", OptionsDigest(AddressOf(spec))},
          {"plugin_limits", format_draw_limits(h.declaration.limits)}};
}

std::string JoinComma(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// One plugin instance per case (one per calling thread where the plugin asks for that), the case prepared in each.
class PluginPath final : public FusedPath {
 public:
  PluginPath(const CaseSpec& spec, const PluginHello& hello, PluginCase c, std::unique_ptr<Transport> first)
      : spec_(spec),
        hello_(hello),
        case_(std::move(c)),
        out_of_process_(first->out_of_process()),
        per_thread_(hello.declaration.threading == Threading::instance_per_thread ||
                    (hello.declaration.threading == Threading::shared && out_of_process_)),
        first_(std::move(first)) {}
  ~PluginPath() override {
    if (first_) first_->Close();
    for (auto& [id, t] : instances_) t->Close();
  }

  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    std::fill(y.begin(), y.end(), INT32_MIN);  // poisoned as a batch's outputs are (driver's RunBatch)
    DrawOutcome outcome;
    const std::span<int32_t> ys[] = {y};
    RunBatch(std::span<const PatternDraw>(&draw, 1), ys, std::span<DrawOutcome>(&outcome, 1));
    if (outcome.status != DrawOutcome::Status::ok) {
      if (rejected) *rejected = outcome.reason;
      return false;
    }
    return true;
  }
  void RunBatch(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
                std::span<DrawOutcome> outcomes) override {
    Instance().Run(draws, y, outcomes);
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const DrawOutcome& o : outcomes) {
      if (o.status != DrawOutcome::Status::ok || o.implementation.empty()) continue;
      last_implementation_ = o.implementation;
      if (std::find(implementations_.begin(), implementations_.end(), o.implementation) == implementations_.end()) {
        implementations_.push_back(o.implementation);
      }
    }
  }
  // At least 1: a plugin's draws go through RunBatch, where a lost draw is crashed or timeout, never unsupported.
  size_t preferred_batch() const override { return std::max<size_t>(1, hello_.declaration.preferred_batch); }
  bool out_of_process() const override { return out_of_process_; }
  DrawLimits draw_limits() const override { return hello_.declaration.limits; }
  int32_t max_batch() const override { return hello_.declaration.limits.max_batch; }
  WeightRange weight_range() const override { return hello_.declaration.limits.weights; }
  bool concurrent() const override { return hello_.declaration.threading != Threading::serial; }
  std::vector<std::string> implementations() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return implementations_;
  }
  RunInfo last_run() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    RunInfo info;
    info.implementation = last_implementation_;
    return info;
  }

 private:
  // The calling thread's instance: the first one for a serial plugin or a shared one in process; otherwise one per
  // thread, the first (prepared when the path was made) going to the first thread that asks, whichever it is.
  Transport& Instance() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!per_thread_) return *first_;
    auto [it, fresh] = instances_.try_emplace(std::this_thread::get_id());
    if (fresh && first_) {
      it->second = std::move(first_);
    } else if (fresh) {
      it->second = Open(spec_);
      if (std::string why = it->second->Prepare(case_); !why.empty()) {
        throw InputError("plugin " + hello_.name + ": a second instance rejected the case its first took: " + why);
      }
    }
    return *it->second;
  }

  CaseSpec spec_;
  PluginHello hello_;
  PluginCase case_;
  bool out_of_process_;
  bool per_thread_;
  mutable std::mutex mutex_;
  std::unique_ptr<Transport> first_;  // per_thread_: until a thread claims it
  std::map<std::thread::id, std::unique_ptr<Transport>> instances_;
  std::vector<std::string> implementations_;
  std::string last_implementation_;
};

class Plugins final : public Backend {
 public:
  std::string_view name() const override { return "plugin"; }
  std::vector<std::string> paths() const override {
    std::vector<std::string> out;
    for (const TransportKind& k : kTransports) out.emplace_back(k.path);
    return out;
  }
  std::vector<std::string> words() const override {
    std::vector<std::string> out;
    for (const TransportKind& k : kTransports) out.emplace_back(k.form);
    return out;
  }
  bool ClaimsWord(std::string_view word) const override {
    for (const TransportKind& k : kTransports) {
      if (word.size() > k.path.size() && word.substr(0, k.path.size()) == k.path && word[k.path.size()] == ':') return true;
    }
    return false;
  }
  void SelectPath(std::string_view word, CaseSpec& spec) const override {
    const size_t colon = word.find(':');
    spec.backend = std::string(word.substr(0, colon));
    spec.backend_arg = std::string(word.substr(colon + 1));
    (void)ParseAddress(spec.backend, spec.backend_arg, "fused");  // the word's syntax, checked where it is read
  }
  std::string PathWord(const CaseSpec& spec) const override { return spec.backend + ":" + spec.backend_arg; }
  // Every plugin's cases of one graph see the same draws, wherever its file lies: the draws depend on its draw
  // limits, which replay lines carry and check.
  std::string SampleWord(const CaseSpec&) const override { return "plugin"; }
  bool black_box() const override { return true; }
  // The run's plugin, once one was asked about (nothing in a run without one): its declaration is a claim, so the
  // results carry it and the report prints it beside the verdicts.
  KeyValues provenance() const override {
    const std::lock_guard<std::mutex> lock(hello_mutex);
    if (!last_hello) return {};
    return {{"library", "plugin " + last_hello->name},
            {"version", last_hello->version},
            {"abi", std::to_string(last_hello->abi_major) + "." + std::to_string(last_hello->abi_minor)},
            {"declaration", describe(last_hello->declaration)},
            {"draw_limits", format_draw_limits(last_hello->declaration.limits)}};
  }
  std::string LibraryDescription() const override {
    const std::lock_guard<std::mutex> lock(hello_mutex);
    if (!last_hello) return {};
    return "plugin " + last_hello->name + " " + last_hello->version + ", declares " + describe(last_hello->declaration);
  }
  std::vector<std::string> stage_kinds() const override {
    std::vector<std::string> names;
    for (StageKind kind : known_stage_kinds()) names.emplace_back(kind.token());
    return names;
  }
  std::vector<std::string> patterns() const override {
    std::vector<std::string> names;
    for (const PatternInfo& info : known_patterns()) names.emplace_back(info.name);
    return names;
  }
  Convention DeclaredConvention(const CaseSpec& spec) const override {
    return plugin::DeclaredConvention(HelloOf(spec).declaration, spec.convention);
  }
  // The built-in tables' tolerance for the table the case hands over: a plugin that applies it is judged as they are.
  Tolerance DefaultTolerance(const CaseSpec& spec) const override {
    if (!has_stage(spec.pattern, StageKind::activation)) return Tolerance{};
    const Convention act = activation_convention(spec.pattern, spec.convention);
    const TableKind kind = act.intermediate.q.type.bits() == 8 ? TableKind::lut : TableKind::lut_interp;
    return builtin_table_tolerance(kind, act.activation.kind);
  }
  std::vector<CaseSpec> SuiteCases(const CaseSpec& builtin_case, const CaseSpec& path) const override {
    const CaseSpec& c = builtin_case;
    if (c.backend != kBuiltInPath || c.source != SampleSource::conv || c.comparison != Comparison::same_convention) {
      return {};
    }
    const PluginHello& hello = HelloOf(path);
    CaseSpec spec = c;
    spec.backend = path.backend;
    spec.backend_arg = path.backend_arg;
    spec.table.reset();
    spec.table_kind = TableKind::lut;
    // "relu.int8.lut.conv" -> "relu.int8.plugin-NAME.conv"; the word appended where the name has none.
    // Built by appending: GCC 12 misreports "literal" + std::string&& (model/diagnostics.h).
    std::string old_word(1, '.');
    old_word.append(to_string(c.table_kind)).append(".");
    std::string new_word(".plugin-");
    new_word.append(hello.name).append(".");
    if (const size_t at = spec.name.find(old_word); at != std::string::npos) {
      spec.name.replace(at, old_word.size(), new_word);
    } else {
      spec.name += new_word.substr(0, new_word.size() - 1);
    }
    if (!(DeclaredConvention(spec) == spec.convention)) spec.comparison = Comparison::cross_convention;
    spec.backend_facts = FactsOf(spec);
    return {spec};
  }
  std::vector<std::string> ReplayFactKeys() const override {
    return {"plugin_name", "plugin_version", "plugin_options", "plugin_limits"};
  }
  void CheckReplayFacts(const CaseSpec& spec, std::vector<std::string>* warnings) const override {
    const std::vector<std::pair<std::string, std::string>> now = FactsOf(spec);
    for (const auto& [key, written] : spec.backend_facts) {
      const auto it = std::find_if(now.begin(), now.end(), [&](const auto& kv) { return kv.first == key; });
      if (it == now.end() || it->second == written) continue;
      const std::string difference = "replay." + key + ": the line names " + written + ", " + PathWord(spec) +
                                     " is " + it->second;
      if (key == "plugin_limits") {
        throw InputError(difference + ": its draws would be generated under other limits, not the draw replayed");
      }
      if (key == "plugin_options") throw InputError(difference + ": the options digest does not match the word's");
      if (warnings) warnings->push_back(difference);
    }
  }
  std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* why) const override {
    const PluginHello& hello = HelloOf(spec);
    const auto unsupported = [&](std::string reason) -> std::unique_ptr<FusedPath> {
      if (why) *why = std::move(reason);
      return nullptr;
    };
    if (spec.mutant != Mutant::none) {
      return unsupported("plugin " + hello.name + " runs as built: fusediff injects no mutant (" +
                         std::string(to_string(spec.mutant)) + ") into it");
    }
    PluginCase c = MakePluginCase(spec, hello.declaration.limits);
    for (const std::string& feature : c.features) {
      // "*": every feature (offline: the answerer rejects at prepare what it cannot compute).
      if (std::find(hello.features.begin(), hello.features.end(), feature) == hello.features.end() &&
          std::find(hello.features.begin(), hello.features.end(), "*") == hello.features.end()) {
        return unsupported("plugin " + hello.name + " does not claim feature '" + feature + "' (it claims " +
                           JoinComma(hello.features) + ")");
      }
    }
    std::unique_ptr<Transport> t = Open(spec);
    if (std::string reason = t->Prepare(c); !reason.empty()) {
      t->Close();
      return unsupported("plugin " + hello.name + " rejected the case: " + reason);
    }
    return std::make_unique<PluginPath>(spec, hello, std::move(c), std::move(t));
  }
};
}  // namespace

const Backend& PluginBackend() {
  static const Plugins backend;
  return backend;
}

}  // namespace fusediff::fused::plugin

// The in-process transport: a plugin library opened with dlopen, spoken to through fusediff_plugin.h.
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "fusediff/fused/plugin_transport.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

namespace {
// The oldest and newest minor of ABI major FUSEDIFF_PLUGIN_ABI_MAJOR this host reads.
constexpr uint32_t kMinorMin = 0;
constexpr uint32_t kMinorMax = FUSEDIFF_PLUGIN_ABI_MINOR;

// The API table's size at each minor this host reads: a table shorter than its minor's is refused.
constexpr size_t kApiSizeAtMinor0 = sizeof(fusediff_plugin_api);
constexpr size_t kDeclarationSizeAtMinor0 = sizeof(fusediff_declaration);

struct Library {
  const fusediff_plugin_api* api = nullptr;
};

// Opened libraries by path, never closed: the strings they hand out (name, features, implementation names) stay
// valid for the process's life.
const Library& OpenLibrary(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, Library> libraries;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = libraries.find(path); it != libraries.end()) return it->second;
  const std::string where = "plugin " + path;
  // A bare name would be searched for in the library path: a plugin is named by its file.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw InputError(where + ": cannot load: " + std::string(dlerror()));
  dlerror();
  void* symbol = dlsym(handle, FUSEDIFF_PLUGIN_ENTRY);
  if (const char* error = dlerror(); error || !symbol) {
    throw InputError(where + ": no entry symbol " + FUSEDIFF_PLUGIN_ENTRY + " (" + (error ? error : "null") +
                     "): is it built with FUSEDIFF_PLUGIN_EXPORT and extern \"C\"?");
  }
  const auto entry = reinterpret_cast<fusediff_plugin_entry_fn>(symbol);
  const fusediff_host host{sizeof(fusediff_host), FUSEDIFF_PLUGIN_ABI_MAJOR, kMinorMin, kMinorMax};
  const fusediff_plugin_api* api = entry(&host);
  const std::string offered = "major " + std::to_string(FUSEDIFF_PLUGIN_ABI_MAJOR) + ", minors " +
                              std::to_string(kMinorMin) + " to " + std::to_string(kMinorMax);
  if (!api) throw InputError(where + ": speaks none of the ABI versions this fusediff offers (" + offered + ")");
  if (api->struct_size < offsetof(fusediff_plugin_api, abi_minor) + sizeof(api->abi_minor)) {
    throw InputError(where + ": its API table is " + std::to_string(api->struct_size) + " bytes: too small to say its version");
  }
  if (api->abi_major != FUSEDIFF_PLUGIN_ABI_MAJOR || api->abi_minor < kMinorMin || api->abi_minor > kMinorMax) {
    throw InputError(where + ": speaks ABI " + std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor) +
                     ", this fusediff offers " + offered);
  }
  if (api->struct_size < kApiSizeAtMinor0) {
    throw InputError(where + ": its API table is " + std::to_string(api->struct_size) + " bytes, ABI " +
                     std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor) + " needs " +
                     std::to_string(kApiSizeAtMinor0));
  }
  if (!api->name || !api->version || !api->create || !api->destroy || !api->declare || !api->prepare || !api->run ||
      (api->feature_count > 0 && !api->features)) {
    throw InputError(where + ": its API table leaves a required entry null (name, version, features, create, destroy, "
                     "declare, prepare, run)");
  }
  return libraries.emplace(path, Library{api}).first->second;
}

std::optional<RequantVariant> DeclaredRequant(int32_t v, const std::string& field) {
  if (v == FUSEDIFF_GRAPH) return std::nullopt;
  return RequantFromC(v, field);
}

class InProcess final : public Transport {
 public:
  explicit InProcess(const PluginAddress& a) : where_("plugin " + a.target), api_(*OpenLibrary(a.target).api) {
    std::vector<fusediff_option> options;
    for (const auto& [key, value] : a.options) options.push_back(fusediff_option{sizeof(fusediff_option), key.c_str(), value.c_str()});
    fusediff_message message = NewMessage();
    instance_ = api_.create(options.data(), static_cast<uint32_t>(options.size()), &message);
    if (!instance_) throw InputError(where_ + ": refused to create an instance: " + Text(message));
  }
  ~InProcess() override { Close(); }

  PluginHello Hello() override {
    PluginHello h;
    h.name = api_.name;
    h.version = api_.version;
    h.abi_major = api_.abi_major;
    h.abi_minor = api_.abi_minor;
    for (uint32_t i = 0; i < api_.feature_count; ++i) h.features.emplace_back(api_.features[i] ? api_.features[i] : "");
    fusediff_declaration d{};
    d.struct_size = sizeof(fusediff_declaration);
    d.requant = d.intermediate_kind = d.post_ops = FUSEDIFF_GRAPH;  // what a plugin that leaves them declares
    if (api_.declare(instance_, &d) != FUSEDIFF_OK) throw InputError(where_ + ": declare() failed");
    if (d.struct_size < kDeclarationSizeAtMinor0) {
      throw InputError(where_ + ": declare() set struct_size " + std::to_string(d.struct_size) + " (at least " +
                       std::to_string(kDeclarationSizeAtMinor0) + ")");
    }
    const std::string field = where_ + ": declaration";
    PluginDeclaration& out = h.declaration;
    out.requant = DeclaredRequant(d.requant, field + ".requant");
    if (d.intermediate_kind != FUSEDIFF_GRAPH) {
      out.intermediate_kind = IntermediateKindFromC(d.intermediate_kind, field + ".intermediate_kind");
    }
    if (d.post_ops != FUSEDIFF_GRAPH) out.post_ops = PostOpsFromC(d.post_ops, field + ".post_ops");
    out.limits.weights = WeightRangeFromC(d.weight_range, field + ".weight_range");
    switch (d.threading) {
      case FUSEDIFF_THREADING_SERIAL: out.threading = Threading::serial; break;
      case FUSEDIFF_THREADING_INSTANCE_PER_THREAD: out.threading = Threading::instance_per_thread; break;
      case FUSEDIFF_THREADING_SHARED: out.threading = Threading::shared; break;
      default: throw InputError(field + ".threading: " + std::to_string(d.threading) + " is no fusediff_threading");
    }
    if (d.preferred_batch > 0) out.preferred_batch = d.preferred_batch;
    const auto limit = [&](int32_t declared, int32_t& into, const char* name) {
      if (declared < 0) throw InputError(field + "." + name + ": " + std::to_string(declared) + " (expected >= 0)");
      if (declared > 0) into = declared;
    };
    limit(d.max_batch, out.limits.max_batch, "max_batch");
    limit(d.max_spatial, out.limits.max_spatial, "max_spatial");
    limit(d.max_channels, out.limits.max_channels, "max_channels");
    limit(d.max_kernel, out.limits.max_kernel, "max_kernel");
    limit(d.max_stride, out.limits.max_stride, "max_stride");
    limit(d.max_dilation, out.limits.max_dilation, "max_dilation");
    out.limits.transposed = d.transposed != 0;
    return h;
  }

  std::string Prepare(const PluginCase& c) override {
    case_ = std::make_unique<CCase>(c);
    fusediff_message message = NewMessage();
    const int32_t status = api_.prepare(instance_, case_->get(), &message);
    if (status == FUSEDIFF_OK) return {};
    if (status == FUSEDIFF_REJECTED) {
      const std::string why = Text(message);
      return why.empty() ? "the plugin rejected the case (no reason given)" : why;
    }
    throw InputError(where_ + ": prepare() returned " + std::to_string(status) + ": " + Text(message));
  }

  void Run(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
           std::span<DrawOutcome> outcomes) override {
    // The batch's C encoding is the call's own: a shared plugin's instance runs batches from several threads.
    CBatch encoding;
    fusediff_batch* batch = encoding.Encode(draws, y);
    if (const int32_t status = api_.run(instance_, batch); status != FUSEDIFF_OK) {
      throw InputError(where_ + ": run() returned " + std::to_string(status) + " on a batch of " +
                       std::to_string(draws.size()) + " draws of case " + (case_ ? case_->get()->name : "?"));
    }
    for (size_t i = 0; i < draws.size(); ++i) outcomes[i] = encoding.Outcome(i);
  }

  void Close() override {
    if (instance_) api_.destroy(instance_);
    instance_ = nullptr;
  }

 private:
  fusediff_message NewMessage() {
    message_.assign(CBatch::kMessageCapacity, '\0');
    return fusediff_message{sizeof(fusediff_message), CBatch::kMessageCapacity, message_.data()};
  }
  std::string Text(const fusediff_message& m) const { return std::string(m.text, strnlen(m.text, m.capacity)); }

  std::string where_;
  const fusediff_plugin_api& api_;
  void* instance_ = nullptr;
  std::unique_ptr<CCase> case_;
  std::vector<char> message_;
};
}  // namespace

std::unique_ptr<Transport> OpenInProcess(const PluginAddress& a) { return std::make_unique<InProcess>(a); }

}  // namespace fusediff::fused::plugin

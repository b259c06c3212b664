#pragma once
// How fusediff talks to a plugin: one interface for every transport (in process through the C ABI, a child process
// over the subprocess protocol, answers read back offline). The plugin backend (plugin_backend.h) knows only this.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusediff/fused/plugin_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/fused_path.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused::plugin {

// How the host may call a plugin's instances (fusediff_threading).
enum class Threading { serial, instance_per_thread, shared };
std::string_view to_string(Threading t);

// What the plugin declares it implements (fusediff_declaration): unset fields follow the case's graph.
struct PluginDeclaration {
  std::optional<RequantVariant> requant;
  std::optional<IntermediateKind> intermediate_kind;
  std::optional<PostOpArithmetic> post_ops;
  Threading threading = Threading::serial;
  uint32_t preferred_batch = 64;
  DrawLimits limits;  // every draw's properties (weights: the weight range)
  friend bool operator==(const PluginDeclaration&, const PluginDeclaration&) = default;
};
// "requant=double_rounding intermediate=graph post_ops=graph weights=symmetric threading=serial": the declaration as
// the report prints it beside the verdict.
std::string describe(const PluginDeclaration& d);
// "batch:2/spatial:10/channels:8/kernel:3/stride:2/dilation:2/transposed:1/weights:symmetric": the draw limits a
// replay line carries (they decide the draws).
std::string format_draw_limits(const DrawLimits& l);
// The declared convention: the graph's with the declared fields put in (and the roundings each implies: a
// requantization's fixed rounding; binary32 post-ops' half-to-even output rounding and zero-point order).
Convention DeclaredConvention(const PluginDeclaration& d, const Convention& graph);

struct PluginHello {
  std::string name, version;
  uint32_t abi_major = 0, abi_minor = 0;
  std::vector<std::string> features;  // claimed
  PluginDeclaration declaration;
};

// A plugin's address: the path word's target (a .so, a command, a folder) and its key=value options, in the order
// written ("plugin:lib.so,mode=fast" -> target "lib.so", options {mode: fast}).
struct PluginAddress {
  std::string path;    // the CaseSpec::backend value ("plugin")
  std::string target;
  std::vector<std::pair<std::string, std::string>> options;
};
// Parses CaseSpec::backend_arg ("TARGET[,key=value...]"); InputError naming `field` for an empty target, an option
// without '=', a key given twice, or a ';' or quote anywhere (a replay line could not carry it).
PluginAddress ParseAddress(std::string_view path, std::string_view arg, std::string_view field);
// FNV-1a 64 of the options sorted by key ("key=value\n" each), 16 hex digits: the replay line's options digest.
std::string OptionsDigest(const PluginAddress& a);

class Transport {
 public:
  virtual ~Transport() = default;
  // Who the plugin is, what it claims and declares (the version negotiation already done).
  virtual PluginHello Hello() = 0;
  // The case, given once before its draws: empty when accepted, else the plugin's reason.
  virtual std::string Prepare(const PluginCase& c) = 0;
  // One batch of the prepared case: draws[i] -> y[i] (host-owned, sized by pattern_output_geometry, poisoned
  // before the call), outcomes[i] what became of it.
  virtual void Run(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
                   std::span<DrawOutcome> outcomes) = 0;
  // The end of the case (bye).
  virtual void Close() = 0;
  // A child process: it answers one request at a time on its one socket (a shared plugin behind it gets one child
  // per calling thread), and computes while the host compares (FusedPath::out_of_process).
  virtual bool out_of_process() const { return false; }
};

// In process: the shared library at a.target, through the C ABI (dlopen RTLD_NOW | RTLD_LOCAL; the library stays
// loaded for the process's life). InputError (exit 2) for a missing file, a missing entry symbol, no common version,
// an API table too small, or a plugin that refuses its options.
std::unique_ptr<Transport> OpenInProcess(const PluginAddress& a);

}  // namespace fusediff::fused::plugin

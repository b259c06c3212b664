#pragma once
// A stage kind is one module. This is its model side: everything fusediff asks about a stage without running it
// (boundary, shape, legality, whether it is elementwise, its descriptor, results and replay fields). The other
// sides register under the same token: the exact evaluation (reference/stage_eval.h), the built-in fused kernel
// (fused/pattern_kernel.h) and the generator's operand draws (generators/targets.h). A kind's model side registers
// once (register_stage_kind); the built-in kinds are listed in stage_registry.cpp. std only.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/model/pattern.h"

namespace fusediff {

// One parameter of a stage as a results file writes it (key order is the file's order).
using StageFieldValue = std::variant<std::string, int32_t, float, QuantParams, PoolWindow>;
struct StageField {
  std::string key;
  StageFieldValue value;
};

// A results file's stage object, read back; each call throws the format's own error naming the field when the
// key is missing or holds another type.
class StageFieldReader {
 public:
  virtual ~StageFieldReader() = default;
  virtual bool has(std::string_view key) const = 0;
  virtual std::string text(std::string_view key) const = 0;
  virtual int32_t integer(std::string_view key) const = 0;
  virtual float float32(std::string_view key) const = 0;
  virtual QuantParams quant(std::string_view key) const = 0;
  virtual PoolWindow window(std::string_view key) const = 0;
  // The field's text through a model parser (parse_add_rule, ...): its InputError becomes the format's own error.
  template <typename Parser>
  auto parsed(std::string_view key, Parser parse) const {
    const std::string t = text(key);
    try {
      return parse(t, path(key));
    } catch (const InputError& e) {
      invalid(key, e.what());
      throw;  // not reached: invalid() throws
    }
  }

 protected:
  virtual std::string path(std::string_view key) const = 0;
  [[noreturn]] virtual void invalid(std::string_view key, const std::string& why) const = 0;
};

// A replay string's fields: take() removes a required one (InputError when missing), has() asks.
class ReplayFieldSource {
 public:
  virtual ~ReplayFieldSource() = default;
  virtual bool has(std::string_view key) const = 0;
  virtual std::string take(std::string_view key) const = 0;
};

class StageKindModule {
 public:
  virtual ~StageKindModule() = default;
  virtual StageKind kind() const = 0;
  // One output element per input element, from that element alone: the per-code statistics stay keyed by the
  // activation's input code, and a failing draw shrinks to one output position.
  virtual bool elementwise() const = 0;
  // The quantization of the tensor the stage writes, given the one it reads.
  virtual QuantParams output_boundary(const Stage& s, const QuantParams& in, const Convention& c) const = 0;
  virtual PatternGeometry output_geometry(const Stage&, const PatternGeometry& in) const { return in; }
  // Throws InputError naming `field` ("pattern.<token>") when the stage's parameters are malformed.
  virtual void validate(const Stage& s, const QuantParams& in, const Convention& c, const std::string& field) const = 0;
  // "add tflite r=... s=..." for describe_pattern; empty when the stage has no parameters worth saying.
  virtual std::string describe(const Stage& s, Fusion fusion, bool f32_intermediate) const = 0;
  // The replay string's fields, in order; `for_samples`: only those that change the draws (the sample key).
  virtual std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool for_samples) const = 0;
  virtual void parse_replay_fields(Stage& s, const ReplayFieldSource& fields) const = 0;
  // The results file's stage object, after "kind".
  virtual std::vector<StageField> results_fields(const Stage& s) const = 0;
  virtual void read_results_fields(Stage& s, const StageFieldReader& fields) const = 0;
  // Fusion legality (model/pattern.h fusion_illegality): what the graph's facts rule out for this stage, checked
  // before the pattern's own offer; then what the fusion itself rules out. Empty when legal.
  virtual std::string facts_illegality(const Stage&, const Convention&, const FusionFacts&) const { return {}; }
  virtual std::string fusion_illegality(const Stage&, const Pattern&, Fusion, const Convention&,
                                        std::span<const int32_t> /*table*/) const {
    return {};
  }
  // Why the (legal) fusion computes the graph's own outputs at this stage (model/pattern.h fusion_keeps_meaning);
  // empty when it does not or the stage is not what it changes.
  virtual std::string fusion_keeps_meaning(const Stage&, const Pattern&, Fusion, const Convention&,
                                           std::span<const int32_t> /*table*/) const {
    return {};
  }
  // Where the stage writes a float instead of codes (it must then be the pattern's last): its format, and why the
  // reference's bound does not cover the fused side under `fusion` (model/pattern.h float_output); nullopt: codes.
  virtual std::optional<FloatOutput> float_output(const Stage&, Fusion) const { return std::nullopt; }
};

// Registers a kind's model side; InputError when its token is taken or spells no name ([a-z0-9_]+).
void register_stage_kind(std::unique_ptr<const StageKindModule> module);
// The module of `kind`; InputError naming it and the known tokens when none claims it.
const StageKindModule& stage_module(StageKind kind);
// The kind spelled `token`; InputError "FIELD: unknown stage 'TOKEN' (known: act, add, ...)" otherwise.
StageKind parse_stage_kind(std::string_view token, std::string_view field);
// Every registered kind, in registration order (the built-ins first).
std::vector<StageKind> known_stage_kinds();

// Registers a pattern (its name must parse: a producer and registered stage tokens); it then joins known_patterns()
// and `fusediff patterns --list`. The strings and the span must outlive the process (literals, statics).
void register_pattern(const PatternInfo& info);

// True when every stage of `p` is elementwise (StageKindModule::elementwise).
bool pattern_is_elementwise(const Pattern& p);

// The built-in kinds' model sides (harness/model/src/stages/*.cpp), listed once by the registry.
std::unique_ptr<const StageKindModule> make_activation_stage();
std::unique_ptr<const StageKindModule> make_add_stage();
std::unique_ptr<const StageKindModule> make_max_pool_stage();
std::unique_ptr<const StageKindModule> make_avg_pool_stage();
std::unique_ptr<const StageKindModule> make_fully_connected_stage();
std::unique_ptr<const StageKindModule> make_batchnorm_stage();
std::unique_ptr<const StageKindModule> make_mul_stage();
std::unique_ptr<const StageKindModule> make_layernorm_stage();

}  // namespace fusediff

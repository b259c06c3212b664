#include "fusediff/model/backend.h"

#include <algorithm>
#include <stdexcept>

#include "fusediff/model/errors.h"

namespace fusediff {

namespace {
// Function-local, so that a backend registering from a static initializer (a test file) finds it constructed.
std::vector<const Backend*>& Registry() {
  static std::vector<const Backend*> backends;
  return backends;
}

bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// ".WORD.", built by appending (GCC 12 misreports "literal" + std::string&&: model/diagnostics.h).
std::string Dotted(const std::string& word) {
  std::string out(1, '.');
  out += word;
  out += '.';
  return out;
}

std::string JoinOr(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " or " : ", ";
    out += items[i];
  }
  return out;
}
}  // namespace

bool Backend::ClaimsWord(std::string_view word) const { return Contains(words(), word); }

void RegisterBackend(const Backend& backend) {
  std::vector<const Backend*>& registry = Registry();
  if (std::find(registry.begin(), registry.end(), &backend) != registry.end()) return;
  for (const Backend* other : registry) {
    for (const std::string& path : backend.paths()) {
      if (Contains(other->paths(), path)) {
        throw std::logic_error("backend " + std::string(backend.name()) + ": path '" + path + "' is " +
                               std::string(other->name()) + "'s");
      }
    }
    for (const std::string& word : backend.words()) {
      if (Contains(other->words(), word)) {
        throw std::logic_error("backend " + std::string(backend.name()) + ": word '" + word + "' is " +
                               std::string(other->name()) + "'s");
      }
    }
  }
  ConventionNames names = backend.convention_names();
  for (auto& [name, rule] : names.add_rules) RegisterAddRuleName(std::move(name), rule);
  for (auto& [name, preset] : names.float_boundary_presets) RegisterFloatBoundaryPreset(std::move(name), preset);
  for (DefectRuleKind& rule : backend.DefectRules()) RegisterDefectRule(std::move(rule));
  for (DefectModelKind& model : backend.DefectModels()) RegisterDefectModel(std::move(model));
  registry.push_back(&backend);
}

std::vector<const Backend*> RegisteredBackends() { return Registry(); }

const Backend* FindBackend(std::string_view path) {
  for (const Backend* backend : Registry()) {
    if (Contains(backend->paths(), path)) return backend;
  }
  return nullptr;
}

const Backend& BackendOf(const CaseSpec& spec, std::string_view field) {
  if (const Backend* backend = FindBackend(spec.backend)) return *backend;
  std::vector<std::string> known;
  for (const Backend* backend : Registry()) {
    for (const std::string& path : backend->paths()) known.push_back(path);
  }
  throw InputError(std::string(field) + ": no registered backend offers path '" + spec.backend + "' (registered: " +
                   (known.empty() ? std::string("none") : JoinOr(known)) + ")");
}

std::string KnownPathWords() {
  std::vector<std::string> words;
  for (const Backend* backend : Registry()) {
    for (const std::string& word : backend->words()) words.push_back(word);
  }
  return words.empty() ? "no registered backend" : JoinOr(words);
}

bool BackendImplements(const Backend& backend, const Pattern& pattern, std::string* why) {
  const std::vector<std::string> kinds = backend.stage_kinds();
  for (const Stage& stage : pattern.stages) {
    if (!Contains(kinds, to_string(stage.kind))) {
      if (why) *why = "backend " + std::string(backend.name()) + " implements no " + std::string(to_string(stage.kind)) + " stage";
      return false;
    }
  }
  if (!Contains(backend.patterns(), pattern_name(pattern))) {
    if (why) *why = "backend " + std::string(backend.name()) + " does not implement the " + pattern_name(pattern) + " pattern";
    return false;
  }
  return true;
}

std::vector<CaseSpec> DefaultSuiteCases(const Backend& backend, const CaseSpec& builtin_case, const CaseSpec& path) {
  const CaseSpec& c = builtin_case;
  if (c.backend != kBuiltInPath || c.source != SampleSource::conv || c.comparison != Comparison::same_convention ||
      c.fusion != Fusion::keep_all || !BackendImplements(backend, c.pattern, nullptr)) {
    return {};
  }
  CaseSpec spec = c;
  const std::string old_word = Dotted(fused_path_name(c));
  spec.backend = path.backend;
  spec.backend_arg = path.backend_arg;
  spec.table.reset();
  // The case's name with this path's word for the built-in one ("relu.int8.lut.conv" -> "relu.int8.WORD.conv"), or
  // with the word appended where the name has none (the pattern cases').
  if (const size_t at = spec.name.find(old_word); at != std::string::npos) {
    spec.name.replace(at, old_word.size(), Dotted(fused_path_name(spec)));
  } else {
    spec.name += '.';
    spec.name += fused_path_name(spec);
  }
  return {spec};
}

}  // namespace fusediff

namespace fusediff {

std::string_view to_string(DrawOutcome::Status s) {
  switch (s) {
    case DrawOutcome::Status::ok: return "ok";
    case DrawOutcome::Status::rejected: return "rejected";
    case DrawOutcome::Status::crashed: return "crashed";
    case DrawOutcome::Status::timeout: return "timeout";
  }
  return "?";
}

void FusedPath::RunBatch(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
                         std::span<DrawOutcome> outcomes) {
  for (size_t i = 0; i < draws.size(); ++i) {
    DrawOutcome& o = outcomes[i];
    o = DrawOutcome{};
    if (!Run(draws[i], y[i], &o.reason)) {
      o.status = DrawOutcome::Status::rejected;
      continue;
    }
    o.implementation = last_run().implementation;
  }
}

}  // namespace fusediff

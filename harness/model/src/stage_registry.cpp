// The stage kinds fusediff knows: the built-ins, listed once here, and any registered at start-up (a test's stage).
// Registration happens before any run; afterwards the registry is only read, from any thread.
#include <algorithm>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

std::vector<std::unique_ptr<const StageKindModule>>& Registry() {
  static std::vector<std::unique_ptr<const StageKindModule>> modules = [] {
    std::vector<std::unique_ptr<const StageKindModule>> m;
    // The order is that of fusion_illegality's per-stage rules (residual-shape before fc-input-flattened before
    // activation-supported; the pool rule before fold-linear-only).
    m.push_back(make_add_stage());
    m.push_back(make_max_pool_stage());
    m.push_back(make_avg_pool_stage());
    m.push_back(make_fully_connected_stage());
    m.push_back(make_activation_stage());
    m.push_back(make_batchnorm_stage());
    m.push_back(make_mul_stage());
    m.push_back(make_layernorm_stage());
    return m;
  }();
  return modules;
}

const StageKindModule* Find(std::string_view token) {
  for (const auto& m : Registry()) {
    if (m->kind().token() == token) return m.get();
  }
  return nullptr;
}

std::string KnownTokens() {
  std::string known;
  for (const auto& m : Registry()) known += (known.empty() ? "" : ", ") + std::string(m->kind().token());
  return known;
}

}  // namespace

void register_stage_kind(std::unique_ptr<const StageKindModule> module) {
  const std::string_view token = module->kind().token();
  const bool spelled = !token.empty() && std::all_of(token.begin(), token.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
  });
  if (!spelled) throw InputError("stage kind '" + std::string(token) + "': a token is [a-z0-9_]+");
  if (Find(token)) throw InputError("stage kind '" + std::string(token) + "' is registered twice");
  Registry().push_back(std::move(module));
}

const StageKindModule& stage_module(StageKind kind) {
  if (const StageKindModule* m = Find(kind.token())) return *m;
  throw InputError("stage kind '" + std::string(kind.token()) + "' has no module (known: " + KnownTokens() + ")");
}

StageKind parse_stage_kind(std::string_view token, std::string_view field) {
  if (const StageKindModule* m = Find(token)) return m->kind();
  throw InputError(std::string(field) + ": unknown stage '" + std::string(token) + "' (known: " + KnownTokens() + ")");
}

std::vector<StageKind> known_stage_kinds() {
  std::vector<StageKind> kinds;
  for (const auto& m : Registry()) kinds.push_back(m->kind());
  return kinds;
}

bool pattern_is_elementwise(const Pattern& p) {
  return std::all_of(p.stages.begin(), p.stages.end(),
                     [](const Stage& s) { return stage_module(s.kind).elementwise(); });
}

}  // namespace fusediff

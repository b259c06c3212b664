#include "fusediff/model/case_spec.h"

#include <map>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/table.h"

namespace fusediff {

std::string_view to_string(FusedKind k) {
  switch (k) {
    case FusedKind::lut: return "lut";
    case FusedKind::lut_interp: return "lut_interp";
    case FusedKind::pwl: return "pwl";
  }
  return "?";
}

std::string_view to_string(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::use_output_scale: return "use-output-scale";
  }
  return "?";
}

std::string_view to_string(SampleSource s) { return s == SampleSource::conv ? "conv" : "sweep"; }

FusedKind parse_fused_kind(std::string_view text, std::string_view field) {
  if (text == "lut") return FusedKind::lut;
  if (text == "lut_interp") return FusedKind::lut_interp;
  if (text == "pwl") return FusedKind::pwl;
  throw InputError(std::string(field) + ": unknown fused path '" + std::string(text) +
                   "' (expected lut, lut_interp or pwl)");
}

Mutant parse_mutant(std::string_view text, std::string_view field) {
  if (text == "none") return Mutant::none;
  if (text == "use-output-scale") return Mutant::use_output_scale;
  throw InputError(std::string(field) + ": unknown mutant '" + std::string(text) + "' (expected use-output-scale)");
}

SampleSource parse_sample_source(std::string_view text, std::string_view field) {
  if (text == "conv") return SampleSource::conv;
  if (text == "sweep") return SampleSource::sweep;
  throw InputError(std::string(field) + ": unknown sample source '" + std::string(text) + "' (expected conv or sweep)");
}

namespace {
// The fields that fix a case's samples, in a fixed order: shared by canonical_key and the replay string.
std::string CanonicalFields(const CaseSpec& s) {
  const Convention& c = s.convention;
  std::string out;
  out += "source=" + std::string(to_string(s.source));
  out += ";act=" + std::string(to_string(c.activation.kind));
  out += ";alpha=" + format_float32(c.activation.alpha);
  out += ";requant=" + std::string(to_string(c.requant));
  out += ";u=" + format_quant_params(c.intermediate.q);
  out += ";u_round=" + std::string(to_string(c.intermediate.rounding));
  out += ";y=" + format_quant_params(c.output.q);
  out += ";y_round=" + std::string(to_string(c.output.rounding));
  out += ";zp_order=" + std::string(to_string(c.output.zero_point_order));
  out += ";fused=" + std::string(to_string(s.fused));
  return out;
}
}  // namespace

std::string canonical_key(const CaseSpec& spec) {
  if (!spec.table) return CanonicalFields(spec);  // unchanged for built-in tables: existing streams stay put
  return CanonicalFields(spec) + ";table=" + table_fingerprint_hex(*spec.table);
}

uint64_t case_stream_id(const CaseSpec& spec) {
  // FNV-1a, 64 bit: stable across platforms and compilers (std::hash is not).
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char ch : canonical_key(spec)) {
    hash ^= ch;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t effective_samples(const CaseSpec& spec) {
  return spec.source == SampleSource::sweep ? spec.convention.intermediate.q.type.code_count() : spec.samples;
}

std::string format_replay(const ReplayKey& key) {
  std::string text = "fusediff-replay/1;seed=" + std::to_string(key.seed) + ";sample=" + std::to_string(key.sample) +
                     ";name=" + key.spec.name + ";" + CanonicalFields(key.spec) + ";mutant=" +
                     std::string(to_string(key.spec.mutant));
  // The table itself cannot travel in a replay string: its fingerprint names it, and parse_replay says so.
  if (key.spec.table) text += ";table=" + table_fingerprint_hex(*key.spec.table);
  return text;
}

ReplayKey parse_replay(std::string_view text) {
  constexpr std::string_view kPrefix = "fusediff-replay/1;";
  if (!text.starts_with(kPrefix)) {
    throw InputError("replay: '" + std::string(text.substr(0, 40)) + "' does not start with " + std::string(kPrefix));
  }
  text.remove_prefix(kPrefix.size());
  std::map<std::string, std::string, std::less<>> fields;
  while (!text.empty()) {
    size_t end = text.find(';');
    std::string_view item = text.substr(0, end);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) throw InputError("replay: field '" + std::string(item) + "' has no '='");
    auto [it, inserted] = fields.emplace(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    if (!inserted) throw InputError("replay: field '" + it->first + "' appears twice");
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  auto take = [&fields](const char* name) {
    auto it = fields.find(name);
    if (it == fields.end()) throw InputError(std::string("replay: missing field '") + name + "'");
    std::string value = it->second;
    fields.erase(it);
    return value;
  };
  ReplayKey key;
  key.seed = static_cast<uint64_t>(parse_int(take("seed"), "replay.seed"));
  key.sample = static_cast<uint64_t>(parse_int(take("sample"), "replay.sample"));
  CaseSpec& s = key.spec;
  s.name = take("name");
  s.source = parse_sample_source(take("source"), "replay.source");
  Convention& c = s.convention;
  c.activation.kind = parse_activation_kind(take("act"), "replay.act");
  c.activation.alpha = parse_float32(take("alpha"), "replay.alpha");
  c.requant = parse_requant_variant(take("requant"), "replay.requant");
  c.intermediate.q = parse_quant_params(take("u"), "replay.u", QuantParams{});
  c.intermediate.rounding = parse_rounding_mode(take("u_round"), "replay.u_round");
  c.output.q = parse_quant_params(take("y"), "replay.y", QuantParams{});
  c.output.rounding = parse_rounding_mode(take("y_round"), "replay.y_round");
  c.output.zero_point_order = parse_zero_point_order(take("zp_order"), "replay.zp_order");
  s.fused = parse_fused_kind(take("fused"), "replay.fused");
  s.mutant = parse_mutant(take("mutant"), "replay.mutant");
  if (auto it = fields.find("table"); it != fields.end()) {
    throw InputError("replay.table: the sample used an external table (fingerprint " + it->second +
                     "); replay it with `fusediff gate DESCRIPTOR.json`, which lists its codes");
  }
  if (!fields.empty()) throw InputError("replay: unknown field '" + fields.begin()->first + "'");
  validate(c);
  s.samples = key.sample + 1;
  return key;
}

}  // namespace fusediff

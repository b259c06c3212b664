#include "fusediff/model/known_defects.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "fusediff/model/errors.h"
#include "fusediff/model/formulation.h"

#include "named_enum.h"

namespace fusediff {

namespace {
using detail::NameOf;
using detail::ParseNamed;
constexpr detail::Names<LedgerKind, 2> kKinds{{{"known_defect", LedgerKind::known_defect},
                                              {"documented_behaviour", LedgerKind::documented_behaviour}}};
}  // namespace

std::string_view to_string(LedgerKind k) { return NameOf(k, kKinds); }
std::string_view describe(LedgerKind k) { return k == LedgerKind::known_defect ? "known defect" : "documented behaviour"; }
LedgerKind parse_ledger_kind(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "ledger entry kind", kKinds);
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative wildcard match with one backtrack point (the last '*').
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {
// The leading dotted numbers of a version string; empty when it does not start with a digit.
std::vector<uint64_t> VersionNumbers(std::string_view v) {
  std::vector<uint64_t> numbers;
  size_t i = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    uint64_t n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])) && n < (uint64_t{1} << 40)) {
      n = n * 10 + static_cast<uint64_t>(v[i++] - '0');
    }
    numbers.push_back(n);
    if (i + 1 < v.size() && v[i] == '.' && std::isdigit(static_cast<unsigned char>(v[i + 1]))) ++i;
    else break;
  }
  return numbers;
}
// Lexicographic with missing components as 0 (2.6 == 2.6.0).
int CompareVersions(std::vector<uint64_t> a, std::vector<uint64_t> b) {
  const size_t n = std::max(a.size(), b.size());
  a.resize(n, 0);
  b.resize(n, 0);
  return a < b ? -1 : (a == b ? 0 : 1);
}
}  // namespace

bool version_in_range(std::string_view version, std::string_view min, std::string_view max) {
  const std::vector<uint64_t> v = VersionNumbers(version);
  if (v.empty()) return false;
  return CompareVersions(v, VersionNumbers(min)) >= 0 && CompareVersions(v, VersionNumbers(max)) <= 0;
}

bool defect_applies(const KnownDefect& d, std::string_view library, std::string_view version, std::string_view isa,
                    std::string_view implementation) {
  if (library != d.library || !version_in_range(version, d.version_min, d.version_max)) return false;
  const auto matches = [](const std::vector<std::string>& globs, std::string_view text) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) { return glob_match(glob, text); });
  };
  return (d.isas.empty() || matches(d.isas, isa)) && matches(d.implementations, implementation);
}

namespace {
// The model's generic rule: the source type and op the library saw.
bool SourceTypeAndOp(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call) {
  const ScalarType source = call.source_type.value_or(conv.input_quant().type.scalar);
  const bool weights_vector = source == ScalarType::int8 && conv.output_channels() == 1 &&
                              int64_t{conv.batch()} * conv.output_height() * conv.output_width() > 1;
  return (!d.op || *d.op == conv.op()) && (!d.source || *d.source == source) &&
         (!d.weights_vector || *d.weights_vector == weights_vector);
}

void DropLastInputColumn(const KnownDefect&, ConvCase* conv, std::vector<int32_t>*, const DefectCallAttributes&) {
  std::vector<int32_t> reads(static_cast<size_t>(conv->output_width()) * conv->kernel_width());
  for (int32_t ox = 0; ox < conv->output_width(); ++ox) {
    for (int32_t kx = 0; kx < conv->kernel_width(); ++kx) {
      const int32_t ix = conv->source_column(ox, kx);
      reads[static_cast<size_t>(ox) * conv->kernel_width() + kx] = ix == conv->input_width() - 1 ? -1 : ix;
    }
  }
  conv->column_reads(std::move(reads));
}

// The draw as the library saw it, then the library's accumulation.
void AccumulateAs(Accumulation a, ConvCase* conv, std::vector<int32_t>* input, const DefectCallAttributes& call) {
  extend_for_output_padding(conv, input, output_padding_extension(*conv, call.extended_input));
  conv->accumulation(a);
}

DefectModelKind AccumulationModel(std::string name, Accumulation a) {
  return {std::move(name), [a](const KnownDefect&, ConvCase* conv, std::vector<int32_t>* input,
                               const DefectCallAttributes& call) { AccumulateAs(a, conv, input, call); }};
}

// Function-local, so that a backend registering from a static initializer finds them constructed.
std::vector<DefectRuleKind>& Rules() {
  static std::vector<DefectRuleKind> rules{{"source_as_passed", {"source", "op", "weights_vector"}, false, SourceTypeAndOp}};
  return rules;
}
std::vector<DefectModelKind>& Models() {
  static std::vector<DefectModelKind> models{
      {"drop_last_input_column", DropLastInputColumn},
      AccumulationModel("halved_weights", Accumulation::halved_weights),
      AccumulationModel("int16_pairs_per_tap", Accumulation::int16_pairs_per_tap),
      AccumulationModel("int16_pairs_flattened", Accumulation::int16_pairs_flattened),
      AccumulationModel("int16_pairs_shifted_weights", Accumulation::int16_pairs_shifted_weights),
      {std::string(kNotExecuted), nullptr},
      {std::string(kThreadRace), nullptr},
  };
  return models;
}

template <typename Kind>
void Register(std::vector<Kind>& registry, Kind kind, std::string_view what) {
  for (const Kind& k : registry) {
    if (k.name == kind.name) throw std::logic_error(std::string(what) + " '" + kind.name + "' is registered twice");
  }
  registry.push_back(std::move(kind));
}

template <typename Kind>
const Kind& Find(const std::vector<Kind>& registry, std::string_view name, std::string_view field,
                 std::string_view what) {
  std::string known;
  for (const Kind& k : registry) {
    if (k.name == name) return k;
    known += (known.empty() ? "" : ", ") + k.name;
  }
  throw InputError(std::string(field) + ": unknown " + std::string(what) + " '" + std::string(name) +
                   "' (expected " + known + ")");
}
}  // namespace

void RegisterDefectRule(DefectRuleKind rule) { Register(Rules(), std::move(rule), "draw rule"); }
void RegisterDefectModel(DefectModelKind model) { Register(Models(), std::move(model), "model"); }
const DefectRuleKind& defect_rule(std::string_view name, std::string_view field) {
  return Find(Rules(), name, field, "draw rule");
}
const DefectModelKind& defect_model(std::string_view name, std::string_view field) {
  return Find(Models(), name, field, "model");
}

bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call) {
  return defect_rule(d.rule, "rule").meets(d, conv, call);
}

DefectCallAttributes call_attributes(const Formulation& formulation, const ConvCase& conv) {
  const SourceAsPassed source = source_as_passed(formulation, conv.input_quant().type.scalar == ScalarType::uint8,
                                                 conv.input_quant().zero_point);
  DefectCallAttributes call;
  call.source_zero_point_attribute = source.zero_point_attribute;
  call.source_type = source.u8 ? ScalarType::uint8 : ScalarType::int8;
  call.extended_input = formulation.extended_input;
  return call;
}

bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const Formulation& formulation) {
  return draw_meets_rule(d, conv, call_attributes(formulation, conv));
}

bool explained_by_defect(int32_t y_ref, int32_t y_fused, int32_t y_model, int64_t tolerance) {
  const int64_t off_model = int64_t{y_fused} - y_model;
  return y_model != y_ref && y_fused != y_ref && off_model <= tolerance && -off_model <= tolerance;
}

bool not_executed(const KnownDefect& d) { return d.model == kNotExecuted; }
bool thread_race(const KnownDefect& d) { return d.model == kThreadRace; }

void apply_defect_model(const KnownDefect& d, ConvCase* conv, std::vector<int32_t>* input,
                        const DefectCallAttributes& call) {
  const DefectModelKind& model = defect_model(d.model, "model");
  if (model.apply) model.apply(d, conv, input, call);  // not_executed: nothing computed, never compared
}

}  // namespace fusediff

#include "fusediff/tables/known_defects_file.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "fusediff/tables/tables.h"
#include "json_fields.h"

namespace fusediff::tables {

using detail::Fields;
using nlohmann::json;

namespace {
std::string NonEmpty(const Fields& f, const json& item, std::string_view field) {
  std::string value = f.String(item, field);
  if (value.empty()) f.Fail(field, "expected a non-empty string");
  return value;
}

// A non-empty array of non-empty glob strings.
std::vector<std::string> Globs(const Fields& f, const json& item, std::string_view field, std::string_view of) {
  const json& list = f.Required(item, field);
  if (!list.is_array() || list.empty()) {
    f.Fail(field, "expected a non-empty array of " + std::string(of) + " globs, got " + detail::TypeName(list));
  }
  std::vector<std::string> globs;
  for (size_t k = 0; k < list.size(); ++k) {
    if (!list[k].is_string() || list[k].get<std::string>().empty()) {
      f.Fail(std::string(field) + "[" + std::to_string(k) + "]", "expected a non-empty glob string, got " +
                                                                     detail::TypeName(list[k]));
    }
    globs.push_back(list[k].get<std::string>());
  }
  return globs;
}

void ReadVersions(const Fields& f, const json& item, KnownDefect& d) {
  const Fields versions = f.Child("versions");
  const json& range = f.Required(item, "versions");
  versions.CheckObject(range, "a version range", {"min", "max"});
  d.version_min = NonEmpty(versions, range, "min");
  d.version_max = NonEmpty(versions, range, "max");
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"min", &d.version_min},
                                    std::pair<const char*, const std::string*>{"max", &d.version_max}}) {
    if (!version_in_range(*value, "0", "999999999")) versions.Fail(name, "'" + *value + "' (expected a dotted version, e.g. 2.6.3)");
  }
  if (!version_in_range(d.version_min, "0", d.version_max)) {
    versions.Fail("min", "'" + d.version_min + "' (expected a version <= max '" + d.version_max + "')");
  }
}

int32_t Registers(const Fields& draw, const json& rule) {
  const int64_t value = draw.Integer(draw.Required(rule, "registers"), "registers");
  if (value < 2 || value > 64) draw.Fail("registers", std::to_string(value) + " (expected a register budget in [2, 64])");
  return static_cast<int32_t>(value);
}
int32_t Block(const Fields& draw, const json& rule) {
  const int64_t value = draw.Integer(draw.Required(rule, "block"), "block");
  if (value != 4 && value != 8 && value != 16) draw.Fail("block", std::to_string(value) + " (expected an ic/oc block of 4, 8 or 16)");
  return static_cast<int32_t>(value);
}

// The draw predicate: a registered rule and exactly its parameters (model/known_defects.h DefectRuleKind: the
// numeric ones required, source, op and weights_vector each optional).
void ReadDraw(const Fields& f, const json& item, KnownDefect& d) {
  const Fields draw = f.Child("draw");
  const json& rule = f.Required(item, "draw");
  draw.CheckObject(rule, "a draw predicate", {"rule", "registers", "block", "source", "op", "weights_vector"});
  d.rule = draw.String(rule, "rule");
  const std::vector<std::string>& parameters = defect_rule(d.rule, draw.Where("rule")).parameters;
  const auto takes = [&](std::string_view p) {
    return std::find(parameters.begin(), parameters.end(), p) != parameters.end();
  };
  for (std::string_view p : {"registers", "block", "source", "op", "weights_vector"}) {
    if (rule.contains(p) && !takes(p)) draw.Fail(p, "unknown field for rule " + d.rule);
  }
  if (takes("registers")) d.registers = Registers(draw, rule);
  if (takes("block")) d.block = Block(draw, rule);
  if (rule.contains("source")) {
    const std::string source = draw.String(rule, "source");
    if (source != "u8" && source != "s8") draw.Fail("source", "'" + source + "' (expected u8 or s8)");
    d.source = source == "u8" ? ScalarType::uint8 : ScalarType::int8;
  }
  if (rule.contains("op")) d.op = parse_conv_op(draw.String(rule, "op"), draw.Where("op"));
  if (rule.contains("weights_vector")) d.weights_vector = draw.Bool(rule["weights_vector"], "weights_vector");
}

// One entry. A format-1 file has no kind (every entry a known defect) and no ISA condition.
KnownDefect ReadEntry(const Fields& f, const json& item, bool v1) {
  if (v1) {
    f.CheckObject(item, "a known defect",
                  {"id", "library", "versions", "implementations", "draw", "model", "explanation", "replay", "test"});
  } else {
    f.CheckObject(item, "a ledger entry", {"id", "kind", "library", "versions", "isas", "implementations", "draw",
                                           "model", "explanation", "replay", "test"});
  }
  KnownDefect d;
  d.id = NonEmpty(f, item, "id");
  if (!v1) d.kind = parse_ledger_kind(f.String(item, "kind"), f.Where("kind"));
  d.library = NonEmpty(f, item, "library");
  ReadVersions(f, item, d);
  if (item.contains("isas")) d.isas = Globs(f, item, "isas", "ISA");
  d.implementations = Globs(f, item, "implementations", "implementation");
  ReadDraw(f, item, d);
  d.model = f.String(item, "model");
  (void)defect_model(d.model, f.Where("model"));
  if (not_executed(d) != defect_rule(d.rule, "rule").withheld) {
    f.Fail("model", "not_executed goes with a draw rule whose draws the path withholds (" + d.rule +
                        (not_executed(d) ? " is not one)" : " is one)"));
  }
  d.explanation = NonEmpty(f, item, "explanation");
  d.replay = NonEmpty(f, item, "replay");
  try {
    (void)parse_replay(d.replay);
  } catch (const InputError& e) {
    f.Fail("replay", std::string("expected a replay string fusediff replay accepts (") + e.what() + ")");
  }
  d.test = NonEmpty(f, item, "test");
  return d;
}
}  // namespace

KnownDefectLedger ParseKnownDefects(std::string_view json_text, const std::string& file) {
  const json root = detail::ParseJson(json_text, file);
  const Fields top(file, "");
  size_t format = 0;
  const json& list = top.FormattedList(root, "a known-defect ledger", {kKnownDefectsFormat, kKnownDefectsFormatV1},
                                       "defects", &format);
  KnownDefectLedger ledger;
  ledger.source = file;
  for (size_t i = 0; i < list.size(); ++i) {
    const Fields f = top.Child("defects[" + std::to_string(i) + "]");
    KnownDefect d = ReadEntry(f, list[i], format == 1);
    for (const KnownDefect& earlier : ledger.entries) {
      if (earlier.id == d.id) f.Fail("id", "'" + d.id + "' (expected an id no other entry has)");
    }
    ledger.entries.push_back(std::move(d));
  }
  return ledger;
}

KnownDefectLedger ReadKnownDefects(const std::string& file) { return ParseKnownDefects(ReadFileBytes(file), file); }

}  // namespace fusediff::tables

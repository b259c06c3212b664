#include "fusediff/tables/known_defects_file.h"

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
}  // namespace

KnownDefectLedger ParseKnownDefects(std::string_view json_text, const std::string& file) {
  const json root = detail::ParseJson(json_text, file);
  const Fields top(file, "");
  const json& list = top.FormattedList(root, "a known-defect ledger", kKnownDefectsFormat, "defects");
  KnownDefectLedger ledger;
  ledger.source = file;
  for (size_t i = 0; i < list.size(); ++i) {
    const Fields f = top.Child("defects[" + std::to_string(i) + "]");
    const json& item = list[i];
    f.CheckObject(item, "a known defect",
                  {"id", "library", "versions", "implementations", "draw", "model", "explanation", "replay", "test"});
    KnownDefect d;
    d.id = NonEmpty(f, item, "id");
    for (const KnownDefect& earlier : ledger.entries) {
      if (earlier.id == d.id) f.Fail("id", "'" + d.id + "' (expected an id no other entry has)");
    }
    d.library = NonEmpty(f, item, "library");
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
    const json& patterns = f.Required(item, "implementations");
    if (!patterns.is_array() || patterns.empty()) {
      f.Fail("implementations", "expected a non-empty array of implementation globs, got " + detail::TypeName(patterns));
    }
    for (size_t k = 0; k < patterns.size(); ++k) {
      const std::string name = "implementations[" + std::to_string(k) + "]";
      if (!patterns[k].is_string() || patterns[k].get<std::string>().empty()) {
        f.Fail(name, "expected a non-empty glob string, got " + detail::TypeName(patterns[k]));
      }
      d.implementations.push_back(patterns[k].get<std::string>());
    }
    const Fields draw = f.Child("draw");
    const json& rule = f.Required(item, "draw");
    draw.CheckObject(rule, "a draw predicate", {"rule", "registers"});
    const std::string rule_name = draw.String(rule, "rule");
    if (!parse_defect_rule(rule_name, &d.rule)) {
      draw.Fail("rule", "'" + rule_name + "' (expected " + std::string(to_string(DefectRule::jit_deconv_single_block_output_padding)) + ")");
    }
    const int64_t registers = draw.Integer(draw.Required(rule, "registers"), "registers");
    if (registers < 2 || registers > 64) draw.Fail("registers", std::to_string(registers) + " (expected a register budget in [2, 64])");
    d.registers = static_cast<int32_t>(registers);
    const std::string model = f.String(item, "model");
    if (!parse_defect_model(model, &d.model)) {
      f.Fail("model", "'" + model + "' (expected " + std::string(to_string(DefectModel::drop_last_input_column)) + ")");
    }
    d.explanation = NonEmpty(f, item, "explanation");
    d.replay = NonEmpty(f, item, "replay");
    try {
      (void)parse_replay(d.replay);
    } catch (const InputError& e) {
      f.Fail("replay", std::string("expected a replay string fusediff replay accepts (") + e.what() + ")");
    }
    d.test = NonEmpty(f, item, "test");
    ledger.entries.push_back(std::move(d));
  }
  return ledger;
}

KnownDefectLedger ReadKnownDefects(const std::string& file) { return ParseKnownDefects(ReadFileBytes(file), file); }

}  // namespace fusediff::tables

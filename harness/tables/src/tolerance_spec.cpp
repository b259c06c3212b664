// The tolerance spec (JSON): per activation and table kind, the bounds a gate applies.
#include <nlohmann/json.hpp>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/quant.h"
#include "fusediff/tables/tables.h"
#include "json_fields.h"

namespace fusediff::tables {

using detail::Fields;
using nlohmann::json;

inline constexpr const char* kToleranceFormat = "fusediff-tolerance/1";

ToleranceSpec ParseToleranceSpec(std::string_view json_text, const std::string& file) {
  const json root = detail::ParseJson(json_text, file);
  const Fields top(file, "");
  const json& list = top.FormattedList(root, "a tolerance spec", kToleranceFormat, "tolerances");
  ToleranceSpec spec;
  for (size_t i = 0; i < list.size(); ++i) {
    const Fields f = top.Child("tolerances[" + std::to_string(i) + "]");
    const json& item = list[i];
    f.CheckObject(item, "a tolerance entry",
                  {"activation", "table", "segments", "max_abs_lsb", "min_exact_fraction", "max_abs_mean_lsb"});
    try {
      ToleranceEntry e;
      const std::string activation = f.String(item, "activation");
      if (activation != "*") e.activation = parse_activation_kind(activation, f.Name("activation"));
      e.table = parse_table_kind(f.String(item, "table"), f.Name("table"));
      if (auto it = item.find("segments"); it != item.end()) {
        if (e.table != TableKind::pwl) f.Fail("segments", "applies to table pwl only");
        const int64_t segments = f.Integer(*it, "segments");
        if (segments < 1) f.Fail("segments", std::to_string(segments) + " (expected a count >= 1)");
        e.segments = static_cast<size_t>(segments);
      }
      e.tolerance.max_abs_lsb = f.Integer(f.Required(item, "max_abs_lsb"), "max_abs_lsb");
      if (e.tolerance.max_abs_lsb < 0) f.Fail("max_abs_lsb", "expected an integer >= 0");
      if (auto it = item.find("min_exact_fraction"); it != item.end()) {
        const double v = f.Number(*it, "min_exact_fraction");
        if (v < 0.0 || v > 1.0) f.Fail("min_exact_fraction", format_double(v) + " (expected a fraction in [0, 1])");
        e.tolerance.min_exact_fraction = v;
      }
      if (auto it = item.find("max_abs_mean_lsb"); it != item.end()) {
        const double v = f.Number(*it, "max_abs_mean_lsb");
        if (v < 0.0) f.Fail("max_abs_mean_lsb", format_double(v) + " (expected a bound >= 0)");
        e.tolerance.max_abs_mean_lsb = v;
      }
      spec.entries.push_back(e);
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.rfind(file + ": ", 0) == 0) throw;
      throw InputError(file + ": " + what);
    }
  }
  return spec;
}

std::optional<Tolerance> FindTolerance(const ToleranceSpec& spec, ActivationKind activation, TableKind table,
                                       size_t segments) {
  const ToleranceEntry* best = nullptr;
  int best_score = -1;
  for (const ToleranceEntry& e : spec.entries) {
    if (e.table != table) continue;
    if (e.activation && *e.activation != activation) continue;
    if (e.segments && *e.segments != segments) continue;
    const int score = (e.activation ? 2 : 0) + (e.segments ? 1 : 0);
    if (score > best_score) {  // first of equally specific entries wins
      best = &e;
      best_score = score;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->tolerance;
}

}  // namespace fusediff::tables

// Results JSON as people read it (reports.h DumpJson).
#include <algorithm>
#include <string>

#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {
// A histogram or a list of codes: one line whatever its length, as a column of numbers is no easier to read.
bool OnlyScalars(const nlohmann::ordered_json& j) {
  return std::none_of(j.begin(), j.end(), [](const nlohmann::ordered_json& v) { return v.is_structured(); });
}

void Dump(const nlohmann::ordered_json& j, size_t indent, size_t width, std::string& out) {
  std::string compact = j.dump();
  if (!j.is_structured() || j.empty() || indent + compact.size() <= width || OnlyScalars(j)) {
    out += compact;
    return;
  }
  const std::string pad(indent + 1, ' ');
  out += j.is_object() ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    out += first ? "" : ",\n";
    first = false;
    out += pad;
    if (j.is_object()) out.append(nlohmann::ordered_json(it.key()).dump()).append(": ");
    Dump(*it, indent + 1, width, out);
  }
  out += '\n';
  out.append(indent, ' ');
  out += j.is_object() ? '}' : ']';
}
}  // namespace

std::string DumpJson(const nlohmann::ordered_json& j, size_t width) {
  std::string out;
  Dump(j, 0, width, out);
  return out + "\n";
}

}  // namespace fusediff::reports

#include <fmt/format.h>

#include <string>

#include "fusediff/model/mutants.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {
// RFC 4180: quote a field holding a comma, quote or newline; double embedded quotes.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}
}  // namespace

std::string ToCsv(const RunResult& run) {
  std::string out =
      "name,source,activation,requant,intermediate,intermediate_rounding,output,output_rounding,zero_point_order,"
      "fused,mutant,samples,exact_fraction,mean,std,min,max,p50,p90,p99,p999,max_abs,tolerance_max_abs_lsb,verdict,"
      "reason\n";
  for (const CaseResult& c : run.cases) {
    const Convention& conv = c.spec.convention;
    const ErrorStats& s = c.stats.overall;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                       CsvField(c.spec.name), to_string(c.spec.source), to_string(conv.activation.kind),
                       to_string(conv.requant), format_quant_params(conv.intermediate.q),
                       to_string(conv.intermediate.rounding), format_quant_params(conv.output.q),
                       to_string(conv.output.rounding), to_string(conv.output.zero_point_order), fused_path_name(c.spec),
                       to_string(c.spec.mutant), s.count(), s.exact_fraction(), s.mean(), s.stddev(), s.min(), s.max(),
                       s.p50(), s.p90(), s.p99(), s.p999(), s.max_abs(), c.tolerance.max_abs_lsb, to_string(c.verdict),
                       CsvField(c.reason));
  }
  return out;
}

}  // namespace fusediff::reports

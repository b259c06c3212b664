#pragma once
// A bisect's results as JSON (fusediff-bisect/2), JUnit XML, a text table and an HTML section.
#include <nlohmann/json.hpp>
#include <string>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/results.h"

namespace fusediff::bisect {

// /2: refused steps (refusal, dependency, reproduction), output units per element type ("int", f16/bf16/f64 ulps),
// the expected-output check, generated input ranges, the blacklist's reasons and whether it builds, max_bytes.
inline constexpr const char* kBisectFormat = "fusediff-bisect/2";

struct BisectReportOptions {
  double threshold = 0.5;
  double perf_weight = 0.0;
  uint64_t seed = 1;
  uint64_t max_bytes = 0;
};

nlohmann::ordered_json ToJson(const BisectResult& r, const Provenance& provenance, const BisectReportOptions& o);
std::string ToJUnit(const BisectResult& r);
// The table a user reads: transformer, fired, nodes changed, delta acc, delta perf, loss, verdict.
std::string ToText(const BisectResult& r);
// A self-contained HTML page: the table and a plot of delta acc against delta perf (inline SVG).
std::string ToHtml(const BisectResult& r);

}  // namespace fusediff::bisect

#pragma once
// A bisect's results as JSON (fusediff-bisect/3), JUnit XML, a text table and an HTML section.
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/results.h"

namespace fusediff::bisect {

// /2: refused steps (refusal, dependency, reproduction), output units per element type ("int", f16/bf16/f64 ulps),
// the expected-output check, generated input ranges, the blacklist's reasons and whether it builds, max_bytes.
// /3: float outputs judged by their rounding-error bound (per output criterion, bound, r; per step r and over), the
// waiver (beyond, waived, waived_by_tolerance), first_divergent_boundary, delta_perf against a baseline timed round
// by round with its bootstrap interval and noise_reason, timing_control_agrees, bounds (covered ops, legal rewrites).
inline constexpr const char* kBisectFormat = "fusediff-bisect/3";

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

// --shapes: one bisect per shape of the model's symbolic dimensions.
struct ShapeResults {
  std::vector<std::string> labels;  // "N=8"
  std::vector<BisectResult> results;
  // The one-on transformers that fired at some shape, and of them those whose decision (keep, blacklist) or whose
  // latency call (faster, slower, noise by its interval) differs between shapes.
  std::vector<std::string> transformers, decision_changes, perf_changes;
};
ShapeResults PerShape(const std::vector<std::map<std::string, int64_t>>& shapes, std::vector<BisectResult> results);
nlohmann::ordered_json ToJson(const ShapeResults& s, const Provenance& provenance, const BisectReportOptions& o);
// One testsuite per shape ("fusediff.bisect[N=8]").
std::string ToJUnit(const ShapeResults& s);
// Each shape's table, then one line per transformer: its decision, accuracy and latency per shape.
std::string ToText(const ShapeResults& s);
std::string ToHtml(const ShapeResults& s);

}  // namespace fusediff::bisect

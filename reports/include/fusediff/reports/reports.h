#pragma once
// Writers for run results. Every file is written to a temporary name beside the target and renamed, so a
// reader never sees a half-written file.
#include <string>

#include <nlohmann/json.hpp>

#include "fusediff/model/results.h"

namespace fusediff::reports {

inline constexpr const char* kResultsFormat = "fusediff-results/1";

// The results as JSON (format "fusediff-results/1"); deterministic for the same seed except `created` and
// `command_line` (no timings, keys in a fixed order).
nlohmann::ordered_json ToJson(const RunResult& run);
nlohmann::ordered_json StatsToJson(const ErrorStats& stats);

// One CSV row per case: name, verdict, samples, exact fraction, bias, std, percentiles, max |e|, convention.
std::string ToCsv(const RunResult& run);

// The terminal table: case, samples, exact %, bias, p99 |e|, max |e|, verdict (+ reason / worst replay lines).
std::string RenderTable(const RunResult& run, bool show_timing);

// Every stage of one replayed sample.
std::string RenderReplay(const ReplayTrace& trace);

// Writes `contents` to `path` atomically (temp file + fsync + rename). Throws std::runtime_error with the
// path and errno text on failure; the target is then untouched.
void WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace fusediff::reports

namespace fusediff::reports {

// `fusediff gate`'s report: the table and its SHA-256, the tolerance and where it came from, per case the
// error distribution (histogram) and statistics, the worst codes, the codes that break the bound, the verdict
// ACCEPT / REJECT. `listed_codes` caps how many offending codes are named.
std::string RenderGate(const RunResult& run, size_t listed_codes = 32);

}  // namespace fusediff::reports

// Shards of one run folded back into the whole run: histograms and counts add exactly; coverage, worst replay
// lines and verdicts are recomputed from the merged statistics.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {
// "NAME: library L, version V, isa I; ..." ("none" without backend provenance).
std::string DescribeBackends(const Provenance& provenance) {
  std::string out;
  for (const BackendProvenance& b : provenance.backends) {
    out += (out.empty() ? "" : "; ") + b.backend + ":";
    for (const auto& [key, value] : b.fields) out += " " + key + " " + value + ",";
    if (out.back() == ',') out.pop_back();
  }
  return out.empty() ? "none" : out;
}
}  // namespace

std::vector<uint32_t> MissingShards(const std::vector<RunResult>& parts) {
  if (parts.empty()) return {};
  std::vector<bool> seen(parts.front().shard_count, false);
  for (const RunResult& p : parts) {
    if (p.shard_index < seen.size()) seen[p.shard_index] = true;
  }
  std::vector<uint32_t> missing;
  for (uint32_t s = 0; s < seen.size(); ++s) {
    if (!seen[s]) missing.push_back(s);
  }
  return missing;
}

RunResult MergeRuns(const std::vector<RunResult>& parts, const std::vector<std::string>& names, bool allow_partial) {
  if (parts.empty()) throw InputError("merge: expected at least one results file");
  const RunResult& first = parts.front();
  const std::string first_set = SampleSetId(first);
  std::vector<const std::string*> holder(first.shard_count, nullptr);  // which file holds each shard
  for (size_t i = 0; i < parts.size(); ++i) {
    const RunResult& p = parts[i];
    auto refuse = [&](const std::string& what, const std::string& mine, const std::string& theirs) {
      throw InputError(fmt::format("{}: {}: expected {} (as in {}), got {}; only shards of one run merge", names[i],
                                   what, theirs, names[0], mine));
    };
    if (p.seed != first.seed) refuse("seed", std::to_string(p.seed), std::to_string(first.seed));
    if (p.provenance.tool_version != first.provenance.tool_version || p.provenance.git_commit != first.provenance.git_commit) {
      refuse("tool", p.provenance.tool_version + " " + p.provenance.git_commit,
             first.provenance.tool_version + " " + first.provenance.git_commit);
    }
    // A library's answers depend on the kernels it dispatches to (docs/onednn.md: VNNI or not).
    if (p.provenance.backends != first.provenance.backends) {
      refuse("platform.backends", DescribeBackends(p.provenance), DescribeBackends(first.provenance));
    }
    if (p.shard_count != first.shard_count) {
      refuse("shard.count", std::to_string(p.shard_count), std::to_string(first.shard_count));
    }
    const std::string set = SampleSetId(p);
    if (set != first_set) refuse("sample_set", set.substr(0, 16) + "...", first_set.substr(0, 16) + "...");
    // Never merged, even when partial: its samples would count twice.
    if (holder[p.shard_index]) {
      throw InputError(fmt::format("{}: shard.index: shard {}/{} appears twice (also in {})", names[i], p.shard_index,
                                   p.shard_count, *holder[p.shard_index]));
    }
    holder[p.shard_index] = &names[i];
  }
  const std::vector<uint32_t> missing = MissingShards(parts);
  if (!missing.empty() && !allow_partial) {
    std::vector<std::string> listed;
    for (uint32_t s : missing) listed.push_back(fmt::format("{}/{}", s, first.shard_count));
    throw InputError(fmt::format("merge: shard{} {} {} missing: expected every shard 0..{} once (--allow-partial merges "
                                 "what is there, marked \"complete\": false)",
                                 missing.size() == 1 ? "" : "s", fmt::join(listed, ", "),
                                 missing.size() == 1 ? "is" : "are", first.shard_count - 1));
  }

  RunResult merged = first;
  merged.shard_index = 0;
  merged.shard_count = 1;
  merged.shard_source = "merge";
  merged.complete = missing.empty();
  for (CaseResult& c : merged.cases) {
    c.shard_index = 0;
    c.shard_count = 1;
    finish_case_result(c, merged.seed);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    merged.complete = merged.complete && parts[i].complete;
    if (i == 0) continue;
    for (size_t k = 0; k < merged.cases.size(); ++k) {
      try {
        merge_case_result(merged.cases[k], parts[i].cases[k], merged.seed);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: cases[{}]: {}", names[i], k, e.what()));
      }
    }
  }
  return merged;
}

}  // namespace fusediff::reports

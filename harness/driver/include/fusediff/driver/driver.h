#pragma once
// Runs cases: generate -> reference (exact) and fused (under test) -> error statistics -> verdict.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/known_defects.h"
#include "fusediff/model/results.h"
#include "fusediff/model/tolerance.h"

namespace fusediff {
class FusedPath;  // model/fused_path.h
}  // namespace fusediff

namespace fusediff::driver {

// Makes the fused path of a case instead of its backend's factory (tests: a path with a known defect). Null with
// *why set where unsupported.
using FusedPathFactory = std::function<std::unique_ptr<FusedPath>(const CaseSpec& spec, std::string* why)>;

struct RunOptions {
  uint64_t seed = 1;
  size_t worst_count = 10;
  std::optional<Tolerance> tolerance;  // replaces every case's default tolerance (fusediff gate)
  std::optional<int64_t> max_abs_lsb;  // overrides every case's default tolerance bound (after `tolerance`)
  bool strict = false;  // documented-behaviour samples fail their case (Tolerance::documented_behaviour_fails)
  // Deterministic partition: shard `shard_index` of `shard_count` runs conv draws d with d % count == index and
  // sweep samples i with i % count == index. Merging all shards' statistics gives the unsharded ones exactly.
  uint32_t shard_index = 0;
  uint32_t shard_count = 1;
  // Checked between batches (a conv draw, or 4096 sweep codes): when set, the case stops early and is marked
  // incomplete (CaseResult::complete = false). Not owned.
  const std::atomic<bool>* stop = nullptr;
  // Called between batches with the samples compared so far in this case; never from two threads at once.
  std::function<void(uint64_t samples_done)> progress;
  // Worker threads of one case (>= 1). Batches (conv draws, blocks of sweep or threshold samples) are shared
  // out; each worker keeps its own mergeable statistics, so the result is identical for every thread count.
  unsigned threads = 1;
  // Library defects already explained (model/known_defects.h); null: none. A library case's samples that an entry
  // explains are counted in CaseResult::known_defects instead of its judged statistics. Not owned.
  const KnownDefectLedger* known_defects = nullptr;
  // Runs of every fused draw (--repeat K): before run r the path fills its destination and scratchpad with poison
  // pattern r, and any difference between the runs is a nondeterministic sample. Unset: 2 for a library path
  // (FusedPath::repeatable), always 1 for the built-in kernels.
  std::optional<uint32_t> repeat;
  // Unset: the case's own path (its backend's, model/backend.h).
  FusedPathFactory fused_path;
};

// Samples are classified into the regions of docs/regions.md by reference::RoundingRegions and
// ActivationPointRegions (reference/graph.h), along the whole path of a pattern.

// Caches the exact reference's y_ref table per convention across cases.
class ReferenceCache {
 public:
  ReferenceCache();
  ~ReferenceCache();
  struct Impl;

 private:
  friend CaseResult RunCase(const CaseSpec&, const RunOptions&, ReferenceCache&);
  friend ReplayTrace Replay(const ReplayKey&);
  friend struct ReferenceCacheAccess;  // canonical.cpp: the same y_ref tables for the canonical table
  std::unique_ptr<Impl> impl_;
};

CaseResult RunCase(const CaseSpec& spec, const RunOptions& options, ReferenceCache& cache);

// Re-runs one sample bit for bit and returns every stage. Throws InputError when the sample does not exist.
ReplayTrace Replay(const ReplayKey& key);

// Tool and platform facts for the results (version, git commit, compiler, libc, ISA, UTC time, and each registered
// backend's provenance).
Provenance CurrentProvenance(const std::string& command_line);
// The same without the backends' (build_provenance.cpp: links without them), for `bisect`.
Provenance BuildProvenance(const std::string& command_line);

}  // namespace fusediff::driver

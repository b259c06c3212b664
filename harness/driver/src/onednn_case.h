#pragma once
// Internal to the driver: cases whose fused path is oneDNN (FusedKind::onednn, onednn_unfused). Compiled against
// oneDNN only with FUSEDIFF_WITH_ONEDNN; without it every such case is `unsupported` and replay refuses.
#include "fusediff/driver/driver.h"
#include "table_cache.h"

namespace fusediff::driver::detail {

// `result` arrives with spec, shard, tolerance and worst-case capacity set; returns it finished.
CaseResult RunOneDnnCase(CaseResult result, const RunOptions& options, TableCache& tables);
ReplayTrace ReplayOneDnn(const ReplayKey& key);
// oneDNN's version and dispatch ISA; empty without oneDNN.
void AddOneDnnProvenance(Provenance& provenance);

}  // namespace fusediff::driver::detail

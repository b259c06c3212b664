#pragma once
// Internal to the CLI: the backends it offers, and their known-defect ledgers as the one the run uses.
#include "fusediff/model/known_defects.h"

namespace fusediff::cli {

// Registers the built-in backend and, when configured with it, oneDNN's (model/backend.h). Idempotent.
void RegisterBackends();
// Every registered backend's embedded ledger, entries in registration order; source: their names, ", "-joined.
KnownDefectLedger BackendLedgers();

}  // namespace fusediff::cli

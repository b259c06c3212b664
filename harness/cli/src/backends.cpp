// The one place that names the backends fusediff ships with: one registration line each.
#include "backends.h"

#include <string>

#include "fusediff/fused/fused_path.h"
#include "fusediff/fused/plugin_backend.h"
#include "fusediff/model/backend.h"
#include "fusediff/tables/known_defects_file.h"
#if FUSEDIFF_HAVE_ONEDNN
#include "fusediff/fused/onednn_kernel.h"
#endif
#if FUSEDIFF_HAVE_XNNPACK
#include "fusediff/fused/xnnpack_backend.h"
#endif

namespace fusediff::cli {

void RegisterBackends() {
  RegisterBackend(fused::BuiltInBackend());
#if FUSEDIFF_HAVE_ONEDNN
  RegisterBackend(fused::onednn::OneDnnBackend());
#endif
#if FUSEDIFF_HAVE_XNNPACK
  RegisterBackend(fused::xnnpack::XnnpackBackend());
#endif
  RegisterBackend(fused::plugin::PluginBackend());
}

KnownDefectLedger BackendLedgers() {
  KnownDefectLedger ledger;
  for (const Backend* backend : RegisteredBackends()) {
    if (backend->KnownDefectsJson().empty()) continue;
    KnownDefectLedger own = tables::ParseKnownDefects(backend->KnownDefectsJson(), std::string(backend->KnownDefectsName()));
    ledger.source += (ledger.source.empty() ? "" : ", ") + own.source;
    for (KnownDefect& entry : own.entries) ledger.entries.push_back(std::move(entry));
  }
  return ledger;
}

}  // namespace fusediff::cli

// Linked into every test executable: the backends the CLI registers (harness/cli/src/backends.cpp), registered
// before any test runs, for the tests that reach the model, the driver or a path without the CLI.
#include "fusediff/fused/fused_path.h"
#include "fusediff/fused/plugin_backend.h"
#include "fusediff/model/backend.h"
#if FUSEDIFF_HAVE_ONEDNN
#include "fusediff/fused/onednn_kernel.h"
#endif
#if FUSEDIFF_HAVE_XNNPACK
#include "fusediff/fused/xnnpack_backend.h"
#endif

namespace {
const bool kRegistered = [] {
  fusediff::RegisterBackend(fusediff::fused::BuiltInBackend());
#if FUSEDIFF_HAVE_ONEDNN
  fusediff::RegisterBackend(fusediff::fused::onednn::OneDnnBackend());
#endif
#if FUSEDIFF_HAVE_XNNPACK
  fusediff::RegisterBackend(fusediff::fused::xnnpack::XnnpackBackend());
#endif
  fusediff::RegisterBackend(fusediff::fused::plugin::PluginBackend());
  return true;
}();
}  // namespace

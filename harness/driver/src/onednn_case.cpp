// oneDNN beyond its fused path (fused/onednn, reached through comparison.h): provenance and the library's name.
#include "onednn_case.h"

#if FUSEDIFF_HAVE_ONEDNN
#include "fusediff/fused/onednn_kernel.h"
#endif

namespace fusediff::driver::detail {

void AddOneDnnProvenance(Provenance& provenance) {
#if FUSEDIFF_HAVE_ONEDNN
  provenance.onednn_version = fused::onednn::LibraryVersion();
  provenance.onednn_isa = fused::onednn::EffectiveIsa();
#else
  (void)provenance;
#endif
}

}  // namespace fusediff::driver::detail

namespace fusediff::driver {

bool OneDnnBuiltIn() { return FUSEDIFF_HAVE_ONEDNN != 0; }

std::string LibraryDescription() {
#if FUSEDIFF_HAVE_ONEDNN
  return "oneDNN " + fused::onednn::LibraryVersion() + ", ISA " + fused::onednn::EffectiveIsa();
#else
  return {};
#endif
}

}  // namespace fusediff::driver

#pragma once
// Internal to the driver: what the driver needs of oneDNN beyond its fused path (comparison.h creates that):
// provenance. Compiled against oneDNN only with FUSEDIFF_WITH_ONEDNN.
#include <string>

#include "fusediff/driver/driver.h"

namespace fusediff::driver::detail {

// oneDNN's version and dispatch ISA; empty without oneDNN.
void AddOneDnnProvenance(Provenance& provenance);

}  // namespace fusediff::driver::detail

namespace fusediff::driver {
// "oneDNN 2.6.3 (commit N/A), ISA avx512_core_bf16"; empty without oneDNN.
std::string LibraryDescription();
}  // namespace fusediff::driver

#pragma once
// XNNPACK (Debian's libxnnpack-dev, snapshot ae108ef) as one backend module (model/backend.h): its quantized
// operators as fused paths under test, with the arithmetic they declare (docs/xnnpack.md).
//   xnnpack:          the fused graph: each producer with its fused output clamp (relu, relu6), then the activation
//                     operator XNNPACK has for the others (a table built at creation);
//   xnnpack_unfused:  one operator per node: the producer with the type's range, then clamp_nc or the table.
#include "fusediff/model/backend.h"

namespace fusediff::fused::xnnpack {

const Backend& XnnpackBackend();

}  // namespace fusediff::fused::xnnpack

#include "fusediff/model/errors.h"
// Header-only types; this translation unit keeps the library non-empty and anchors the vtables.
namespace fusediff {}

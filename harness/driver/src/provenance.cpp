#include <string>

#include "fusediff/driver/driver.h"
#include "onednn_case.h"

namespace fusediff::driver {

Provenance CurrentProvenance(const std::string& command_line) {
  Provenance p = BuildProvenance(command_line);
  detail::AddOneDnnProvenance(p);
  return p;
}

}  // namespace fusediff::driver

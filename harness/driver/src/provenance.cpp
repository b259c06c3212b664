#include <string>

#include "fusediff/driver/driver.h"
#include "fusediff/model/backend.h"

namespace fusediff::driver {

Provenance CurrentProvenance(const std::string& command_line) {
  Provenance p = BuildProvenance(command_line);
  for (const Backend* backend : RegisteredBackends()) {
    KeyValues fields = backend->provenance();
    if (!fields.empty()) p.backends.push_back(BackendProvenance{std::string(backend->name()), std::move(fields)});
  }
  return p;
}

}  // namespace fusediff::driver

// The build's and the machine's provenance without any backend's: its own object, so that the launcher's bisect links
// it without the backends.
#include <gnu/libc-version.h>
#include <sys/utsname.h>

#include <ctime>
#include <string>

#include "fusediff/driver/driver.h"

namespace fusediff::driver {

Provenance BuildProvenance(const std::string& command_line) {
  Provenance p;
  p.tool_version = FUSEDIFF_VERSION;
  p.git_commit = FUSEDIFF_GIT_COMMIT;
#if defined(__clang__)
  p.compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  p.compiler = std::string("gcc ") + __VERSION__;
#else
  p.compiler = "unknown";
#endif
  p.libc = std::string("glibc ") + gnu_get_libc_version();
  struct utsname names {};
  p.isa = uname(&names) == 0 ? names.machine : "unknown";
  p.command_line = command_line;
  char created[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &utc);
  p.created = created;
  return p;
}

}  // namespace fusediff::driver

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "fusediff/model/diagnostics.h"
#include "fusediff/reports/reports.h"

namespace fusediff::reports {

void WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::filesystem::path target(path);
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
  const std::filesystem::path temp =
      target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()));
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw std::runtime_error(path + ": cannot " + what + " (" + reason + ")");
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(path + ": cannot create temporary file (" + std::strerror(errno) + ")");
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      fail("write");
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("sync");
  }
  if (::close(fd) != 0) fail("close");
  if (::rename(temp.c_str(), target.c_str()) != 0) fail("rename into place");
}

}  // namespace fusediff::reports

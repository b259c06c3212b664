#include "memory_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace fusediff::bisect {

MemoryFile::MemoryFile(const char* name) {
  fd_ = ::memfd_create(name, MFD_CLOEXEC);
  if (fd_ >= 0) path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_);
}

MemoryFile::~MemoryFile() {
  if (fd_ >= 0) ::close(fd_);
}

void MemoryFile::Write(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(path_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd_, static_cast<off_t>(bytes.size())) != 0) throw std::runtime_error(path_ + ": " + std::strerror(errno));
}

void MemoryFile::Read(std::vector<char>& buffer, std::string& bytes) const {
  size_t done = 0;
  for (;;) {
    if (buffer.size() == done) buffer.resize(std::max<size_t>(2 * buffer.size(), 64 * 1024));
    const ssize_t n = ::pread(fd_, buffer.data() + done, buffer.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
    if (n == 0 || done < buffer.size()) break;  // a regular file reads short only at its end
  }
  bytes.assign(buffer.data(), done);
}

}  // namespace fusediff::bisect

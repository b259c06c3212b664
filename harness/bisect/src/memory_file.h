#pragma once
// An anonymous in-memory file (memfd) that ONNX Runtime reads or writes through its /proc/<pid>/fd path, in process or
// from the Node runner: no file system, so no ext4 write-back of a truncated and rewritten file when it is closed
// (ext4's replace-by-truncate heuristic: 0.2 ms a session for the saved optimized models, 0.2 to 4 ms for the models
// the divergence search rewrites), and nothing left behind.
#include <string>
#include <vector>

namespace fusediff::bisect {

class MemoryFile {
 public:
  explicit MemoryFile(const char* name);  // valid() is false where memfd is not available
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  bool valid() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Replaces the content.
  void Write(const std::string& bytes);
  // The whole content into `bytes`, through one pread into `buffer` where it fits (a buffer kept at its size: the
  // content's size rarely changes).
  void Read(std::vector<char>& buffer, std::string& bytes) const;

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace fusediff::bisect

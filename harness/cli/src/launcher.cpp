// `fusediff`: the launcher, a static program that loads no library at all. `bisect` is fusediff-bisect's, a process
// that loads only what a bisect needs (protobuf, ONNX, fmt, libstdc++; ONNX Runtime itself is opened at run time):
// no oneDNN, OpenCL, libgomp, MPFR or OpenSSL to load and relocate, about 10 ms of every bisect's start
// (bench/bisect_overhead.sh). Every other command, --help and --version included, is fusediff-full's (the whole
// CLI). Either replaces this process: the same arguments, environment, streams, signals and exit code.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "fusediff/cli/cli.h"  // the exit codes (constants only)

int main(int argc, char** argv) {
  const char* program = argc > 1 && std::strcmp(argv[1], "bisect") == 0 ? "fusediff-bisect" : "fusediff-full";
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  char path[PATH_MAX + 32];
  if (n > 0) {
    self[n] = '\0';
    char* slash = std::strrchr(self, '/');
    if (slash != nullptr) *slash = '\0';
    std::snprintf(path, sizeof path, "%s/%s", self, program);
  } else {
    std::snprintf(path, sizeof path, "%s", program);
  }
  ::execv(path, argv);
  std::fprintf(stderr, "fusediff: cannot start %s (%s): build the %s target beside this program\n", path,
               std::strerror(errno), program);
  return fusediff::cli::kExitBadInput;
}

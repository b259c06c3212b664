// `fusediff`: the launcher. `bisect` runs here, in a process that loads only what a bisect needs (protobuf and ONNX;
// ONNX Runtime itself is opened at run time): no oneDNN, MPFR or OpenSSL to load and relocate, about 10 ms of every
// bisect's start (bench/bisect_overhead.sh). Every other command, --help and --version included, replaces this process
// with fusediff-full beside it (the whole CLI: the same arguments, streams and exit code).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bisect") == 0) {
    const std::vector<std::string> args(argv, argv + argc);
    const int rc = fusediff::cli::BisectMain(args, std::cout, std::cerr);
    // Every output is written and closed by now (files atomically, the streams flushed here). Ending without running
    // the libraries' static destructors skips tearing down ONNX Runtime's global state, which the exit frees anyway.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string full = ((ec ? std::filesystem::path(argv[0]) : self).parent_path() / "fusediff-full").string();
  ::execv(full.c_str(), argv);
  std::fprintf(stderr, "fusediff: cannot start %s (%s): build the fusediff-full target beside this program\n",
               full.c_str(), std::strerror(errno));
  return fusediff::cli::kExitBadInput;
}

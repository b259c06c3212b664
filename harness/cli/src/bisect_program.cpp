// fusediff-bisect: `fusediff bisect` as the launcher starts it (launcher.cpp), linked without oneDNN, MPFR and OpenSSL.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  const int rc = fusediff::cli::BisectMain(args, std::cout, std::cerr);
  // Every output is written and closed by now (files atomically, the streams flushed here). Ending without running
  // the libraries' static destructors skips tearing down ONNX Runtime's global state, which the exit frees anyway.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(rc);
}

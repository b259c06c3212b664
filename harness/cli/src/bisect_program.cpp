// fusediff-bisect: `fusediff bisect` as the launcher starts it (launcher.cpp), linked without oneDNN, MPFR and OpenSSL.
#include <iostream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  fusediff::cli::EndProcess(fusediff::cli::BisectMain(args, std::cout, std::cerr));
}

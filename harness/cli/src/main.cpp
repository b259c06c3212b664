#include <iostream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  fusediff::cli::EndProcess(fusediff::cli::Main(args, std::cout, std::cerr));
}

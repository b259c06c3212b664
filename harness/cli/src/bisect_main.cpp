#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/cli/cli.h"

namespace fusediff::cli {

int BisectMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"fusediff: differential testing of fused quantized conv + activation kernels", "fusediff"};
  app.require_subcommand(1);
  const std::vector<Command> commands = {AddBisectCommand(app)};
  return RunApp(app, commands, "", args, out, err);
}

}  // namespace fusediff::cli

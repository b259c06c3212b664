#include "fusediff/cli/cli.h"

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "backends.h"
#include "command.h"
#include "fusediff/driver/driver.h"
#include "fusediff/model/errors.h"

namespace fusediff::cli {

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  RegisterBackends();
  CLI::App app{"fusediff: differential testing of fused quantized conv + activation kernels", "fusediff"};
  app.require_subcommand(1);
  const Provenance build = driver::CurrentProvenance("");
  const std::string version = "fusediff " + build.tool_version + " (" + build.git_commit + ")";
  app.set_version_flag("--version", version);

  const std::vector<Command> commands = {AddRunCommand(app),     AddReplayCommand(app),  AddReportCommand(app),
                                         AddCompareCommand(app), AddMergeCommand(app),   AddMutantsCommand(app),
                                         AddTableCommand(app),   AddGateCommand(app),    AddPatternsCommand(app),
                                         AddBisectCommand(app),  AddExportOnnxCommand(app),
                                         AddPluginHostCommand(app), AddExportDrawsCommand(app)};

  return RunApp(app, commands, version, args, out, err);
}

}  // namespace fusediff::cli

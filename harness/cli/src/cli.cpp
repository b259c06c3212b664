#include "fusediff/cli/cli.h"

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/driver/driver.h"
#include "fusediff/model/errors.h"

namespace fusediff::cli {

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"fusediff: differential testing of fused quantized conv + activation kernels", "fusediff"};
  app.require_subcommand(1);
  const Provenance build = driver::CurrentProvenance("");
  const std::string version = "fusediff " + build.tool_version + " (" + build.git_commit + ")";
  app.set_version_flag("--version", version);

  const std::vector<Command> commands = {AddRunCommand(app),     AddReplayCommand(app),  AddReportCommand(app),
                                         AddCompareCommand(app), AddMergeCommand(app),   AddMutantsCommand(app),
                                         AddTableCommand(app),   AddGateCommand(app),    AddPatternsCommand(app),
                                         AddBisectCommand(app),  AddExportOnnxCommand(app)};

  std::vector<std::string> storage(args);
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitPass;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitPass;
  } catch (const CLI::CallForVersion&) {
    out << version << "\n";
    return kExitPass;
  } catch (const CLI::ParseError& e) {
    err << "fusediff: " << e.what() << "\n";
    return kExitBadInput;
  }

  const CommandContext context{args, out, err};
  try {
    for (const Command& command : commands) {
      if (command.app->parsed()) return command.action(context);
    }
  } catch (const InputError& e) {
    err << "fusediff: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const UndecidableError& e) {
    err << "fusediff: undecidable: " << e.what() << "\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    err << "fusediff: error: " << e.what() << "\n";
    return kExitInternal;
  }
  return kExitBadInput;
}

}  // namespace fusediff::cli

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/model/errors.h"

namespace fusediff::cli {

int RunApp(CLI::App& app, const std::vector<Command>& commands, const std::string& version,
           const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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

void EndProcess(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace fusediff::cli

#pragma once
// Internal to the CLI: each subcommand registers its options on the app and returns the action that runs it.
// New subcommands live in their own cli_<name>.cpp and are listed once in cli.cpp.
#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace fusediff::cli {

struct CommandContext {
  const std::vector<std::string>& args;  // the whole command line, args[0] the program
  std::ostream& out;
  std::ostream& err;
};

struct Command {
  CLI::App* app = nullptr;
  // Runs after a successful parse when `app` was the chosen subcommand; returns the exit code. Throws
  // InputError for bad input (exit 2).
  std::function<int(const CommandContext&)> action;
};

Command AddRunCommand(CLI::App& app);
Command AddReplayCommand(CLI::App& app);
Command AddMutantsCommand(CLI::App& app);
Command AddReportCommand(CLI::App& app);
Command AddCompareCommand(CLI::App& app);
Command AddMergeCommand(CLI::App& app);
Command AddTableCommand(CLI::App& app);  // `table generate`
Command AddGateCommand(CLI::App& app);
Command AddPatternsCommand(CLI::App& app);  // `patterns --list`
Command AddBisectCommand(CLI::App& app);      // `bisect MODEL.onnx` (cli_bisect.cpp)
Command AddExportOnnxCommand(CLI::App& app);  // `export-onnx` (cli_bisect.cpp)
Command AddPluginHostCommand(CLI::App& app);   // `plugin-host PATH.so` (cli_plugin_host.cpp)
Command AddExportDrawsCommand(CLI::App& app);  // `export-draws DIR` (cli_plugin_host.cpp)

// Parses `args` with `app` (its subcommands those of `commands`) and runs the chosen one: help and version on `out`,
// a parse error or InputError as one line on `err` and exit 2, an internal error exit 3. `version`: the --version
// text, empty for none.
int RunApp(CLI::App& app, const std::vector<Command>& commands, const std::string& version,
           const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The command line as one shell-quoted string (for provenance).
std::string JoinCommandLine(const std::vector<std::string>& args);
// An output path must be creatable before hours of work are spent: its folder must exist and it must not be
// a folder. Throws InputError naming `option`.
void CheckOutputPath(const std::string& path, const char* option);
// --threads: empty -> every hardware thread; otherwise an integer in [1, 1024]. Throws InputError naming `option`.
unsigned ResolveThreads(const std::string& text, const char* option);

}  // namespace fusediff::cli

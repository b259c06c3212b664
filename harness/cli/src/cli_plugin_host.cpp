// `fusediff plugin-host PATH.so[,key=value...]`: a plugin's shared library served over the subprocess protocol on
// stdin/stdout (what --isolate starts), or, with --offline DIR, the exported draws of DIR answered through it.
// `fusediff export-draws DIR [run options]`: a run's batches written as files for an offline answerer
// (docs/plugins.md, "Offline mode").
#include <fcntl.h>
#include <unistd.h>

#include <iostream>
#include <sstream>

#include "command.h"
#include "fusediff/fused/plugin_child.h"
#include "fusediff/fused/plugin_subprocess.h"
#include "fusediff/model/errors.h"

namespace fusediff::cli {

namespace plugin = fusediff::fused::plugin;

Command AddPluginHostCommand(CLI::App& app) {
  CLI::App* host = app.add_subcommand(
      "plugin-host", "Serve a plugin's shared library over the subprocess protocol on stdin/stdout (--isolate), or "
                     "answer exported draws (--offline DIR)");
  auto target = std::make_shared<std::string>();
  auto offline = std::make_shared<std::string>();
  host->add_option("plugin", *target, "PATH.so[,key=value...]: the plugin and its options")->required();
  host->add_option("--offline", *offline, "Answer the draws `fusediff export-draws` wrote into DIR, then exit");
  return {host, [target, offline](const CommandContext& ctx) {
            const plugin::PluginAddress address = plugin::ParseAddress("plugin", *target, "plugin-host");
            if (!offline->empty()) {
              const std::unique_ptr<plugin::Transport> transport = plugin::OpenInProcess(address);
              const size_t batches = plugin::AnswerOffline(*offline, *transport, ctx.out);
              ctx.out << batches << " batches answered in " << *offline << "\n";
              return 0;
            }
            // Frames only on the protocol's stream: whatever the plugin prints goes to stderr.
            const int protocol_out = dup(STDOUT_FILENO);
            if (protocol_out < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) throw InputError("plugin-host: dup failed");
            fcntl(protocol_out, F_SETFD, FD_CLOEXEC);
            const int status = plugin::ServeProtocol([&] { return plugin::OpenInProcess(address); }, STDIN_FILENO,
                                                     protocol_out);
            close(protocol_out);
            return status;
          }};
}

Command AddExportDrawsCommand(CLI::App& app) {
  CLI::App* exporter = app.add_subcommand(
      "export-draws", "Write a run's batches of draws into DIR as protocol frames, for a simulator or board to answer "
                      "offline; read the answers back with `run --fused offline:DIR` and the same options");
  auto dir = std::make_shared<std::string>();
  exporter->add_option("dir", *dir, "The folder to write (created)")->required();
  auto like = std::make_shared<std::string>();
  exporter->add_option("--like", *like,
                       "plugin:PATH.so[,...] or exec:COMMAND: take its claims and declaration (DIR/hello.json), so that "
                       "the draws are the ones it would be given");
  exporter->allow_extras();
  exporter->footer("Every other option is run's (--activation, --pattern, --samples, --seed, --shard, ...): the same "
                   "options must be given to the run that reads the answers back.");
  return {exporter, [dir, like, exporter](const CommandContext& ctx) {
            if (!like->empty()) {
              std::unique_ptr<plugin::Transport> t;
              if (like->rfind("plugin:", 0) == 0) {
                t = plugin::OpenInProcess(plugin::ParseAddress("plugin", like->substr(7), "--like"));
              } else if (like->rfind("exec:", 0) == 0) {
                t = plugin::OpenSubprocess(plugin::split_command(like->substr(5), "--like exec:"), *like);
              } else {
                throw InputError("--like: '" + *like + "' (expected plugin:PATH.so[,...] or exec:COMMAND)");
              }
              plugin::WriteOfflineHello(*dir, t->Hello());
              t->Close();
            }
            std::vector<std::string> args = {ctx.args.empty() ? std::string("fusediff") : ctx.args[0], "run"};
            for (const std::string& extra : exporter->remaining()) {
              if (extra == "--fused" || extra.rfind("--fused=", 0) == 0) {
                throw InputError("export-draws: --fused is offline:DIR, from the folder given");
              }
              args.push_back(extra);
            }
            args.push_back("--fused");
            args.push_back("offline:" + *dir);
            plugin::subprocess_settings().export_draws = true;
            CLI::App run_app{"fusediff"};
            const std::vector<Command> commands = {AddRunCommand(run_app)};
            std::ostringstream table;  // every case reads "unsupported: exported": the table says nothing
            const int status = RunApp(run_app, commands, "", args, table, ctx.err);
            plugin::subprocess_settings().export_draws = false;
            if (status != 0) return status;
            ctx.out << "draws exported to " << *dir
                    << "; answer them (e.g. fusediff plugin-host PATH.so --offline " << *dir
                    << "), then read them back with fusediff run --fused offline:" << *dir
                    << " and the same options\n";
            return 0;
          }};
}

}  // namespace fusediff::cli

#pragma once
// The transports beyond the process (docs/plugins.md): a child speaking the subprocess protocol (exec:, and a .so
// served by `fusediff plugin-host` under --isolate), and the answers of an offline run read back from files
// (offline:). Each is a Transport (plugin_transport.h), so the plugin backend treats them as the in-process one.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fusediff/fused/plugin_transport.h"
#include "fusediff/fused/plugin_wire.h"

namespace fusediff::fused::plugin {

// How long one batch may take (request and reply) before its child is killed and its draws are `timeout`; and how
// a plugin is isolated. Set once by the command line (run --plugin-timeout); FUSEDIFF_PLUGIN_TIMEOUT (seconds)
// gives the default where it is not.
struct SubprocessSettings {
  std::chrono::milliseconds batch_timeout{60000};
  // The command that serves a .so over the protocol (--isolate): this program's `plugin-host` by default
  // (/proc/self/exe), FUSEDIFF_PLUGIN_HOST where a test binary is not fusediff.
  std::vector<std::string> plugin_host;
  // `fusediff export-draws`: offline:DIR paths write their batches instead of reading answers.
  bool export_draws = false;
};
SubprocessSettings& subprocess_settings();
// plugin_host, or {/proc/self/exe, "plugin-host"} (FUSEDIFF_PLUGIN_HOST: its words instead of /proc/self/exe).
std::vector<std::string> plugin_host_command();

// A child started with `argv`; restarted (hello and prepare again) after it dies or hangs. A batch it loses is run
// again draw by draw, so that only the draws that crash or hang it are lost, each with its own verdict.
std::unique_ptr<Transport> OpenSubprocess(std::vector<std::string> argv, std::string what);

// The transports by path word (plugin_backend.cpp's table): `exec:COMMAND` (split_command; options after a comma
// stay part of the command), `isolate:PATH.so[,key=value...]` (plugin_host_command() serving the library) and
// `offline:DIR` (reading answers back, or writing batches under export_draws).
std::unique_ptr<Transport> OpenExec(const PluginAddress& a);
std::unique_ptr<Transport> OpenIsolated(const PluginAddress& a);
std::unique_ptr<Transport> OpenOfflineWord(const PluginAddress& a);

// The hello request and reply (PluginHello with its declaration) as frames.
Frame HelloRequest();
Frame HelloReply(const PluginHello& hello);
PluginHello HelloFromReply(const Frame& reply);
Frame PrepareRequest(const PluginCase& c);

// ---- Offline (docs/plugins.md, "Offline mode").
// DIR/CASE_DIGEST/ holds prepare.fdf and run-NNNNNN.fdf (written by `fusediff export-draws`), and the answers
// prepared.fdf and result-NNNNNN.fdf (written by whatever ran the draws: `fusediff plugin-host --offline`, a
// simulator): the replies the protocol would have carried. The case
// digest names the case as the plugin sees it (its PluginCase JSON); answers are matched to draws by DrawDigest.
std::string CaseDigest(const PluginCase& c);
// DIR/hello.json: what the offline path claims and declares (a hello reply's fields), so that the draws exported
// are the ones the answering plugin would be given.
void WriteOfflineHello(const std::string& dir, const PluginHello& hello);
// Reading back: every answered draw of the case; InputError (exit 2) for a draw without an answer.
// Exporting (export = true): each batch is written as a run file and its draws are "rejected" as exported.
std::unique_ptr<Transport> OpenOffline(std::string dir, bool export_draws);
// Answers every run file in `dir` without a result through `transport` (plugin-host --offline). Returns the
// batches answered; progress lines on `log`.
size_t AnswerOffline(const std::string& dir, Transport& transport, std::ostream& log);

// Serves the protocol on in_fd/out_fd through a transport from `open` until bye or the end of the input
// (plugin-host); each prepare after the first (the next case, on a child fusediff kept) gets a fresh transport.
// Returns the exit status.
int ServeProtocol(const std::function<std::unique_ptr<Transport>()>& open, int in_fd, int out_fd);

}  // namespace fusediff::fused::plugin

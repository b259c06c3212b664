#include "isa_matrix.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

extern char** environ;

namespace fusediff::cli {

namespace {

std::string Upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}
std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// A private temporary folder, removed with everything in it when the scope ends.
class TempFolder {
 public:
  TempFolder() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/fusediff-isa-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("--isa: cannot create a temporary folder " + pattern + ": " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs this executable with `args` (no program name) and the control's variable set to `cap` (its aliases removed,
// so the cap is the only one), stdout and stderr to `log`. Returns the exit code.
int RunChild(const DispatchControl& control, const std::string& cap, const std::vector<std::string>& args,
             const std::string& log) {
  std::vector<std::string> env_storage;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    bool owned = entry.rfind(control.env_var + "=", 0) == 0;
    for (const std::string& alias : control.aliases) owned = owned || entry.rfind(alias + "=", 0) == 0;
    if (!owned) env_storage.push_back(entry);
  }
  env_storage.push_back(control.env_var + "=" + cap);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string program = "/proc/self/exe";
  std::vector<std::string> argv_storage = {"fusediff"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("--isa: cannot start " + program + ": " + std::strerror(spawned));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("--isa: waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last `lines` lines of a child's log, indented, for an error message.
std::string Tail(const std::string& text, size_t lines) {
  size_t start = text.size();
  for (size_t n = 0; start > 0 && n <= lines; --start) {
    if (text[start - 1] == '\n') ++n;
  }
  std::string out;
  std::istringstream in(text.substr(start));
  for (std::string line; std::getline(in, line);) out += "  " + line + "\n";
  return out;
}

// The command line without the options the parent owns: --isa (it would recurse), --json/--csv/--junit (each child
// writes its own results file).
std::vector<std::string> ChildArgs(const std::vector<std::string>& args) {
  static const char* kOwned[] = {"--isa", "--json", "--csv", "--junit"};
  std::vector<std::string> out;
  for (size_t i = 1; i < args.size(); ++i) {
    bool owned = false;
    for (const char* option : kOwned) {
      if (args[i] == option) {
        owned = true;
        ++i;  // and its value
        break;
      }
      if (args[i].rfind(std::string(option) + "=", 0) == 0) {
        owned = true;
        break;
      }
    }
    if (!owned) out.push_back(args[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> ParseIsaList(const std::string& text, const DispatchControl& control) {
  if (Lower(text) == "all") return control.caps;
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    const std::string cap = Upper(item);
    if (std::find(control.caps.begin(), control.caps.end(), cap) == control.caps.end()) {
      std::string known;
      for (const std::string& c : control.caps) known += (known.empty() ? "" : ", ") + c;
      throw InputError("--isa: '" + item + "': expected all or a comma-separated list of " + known);
    }
    if (std::find(out.begin(), out.end(), cap) != out.end()) throw InputError("--isa: " + cap + " is listed twice");
    out.push_back(cap);
  }
  if (out.empty()) throw InputError("--isa: expected all or a comma-separated list of ISA caps");
  return out;
}

int RunIsaMatrix(const Backend& backend, const std::string& word, const std::vector<std::string>& caps,
                 const std::vector<std::string>& args, const std::string& json, std::ostream& out, std::ostream& err) {
  const DispatchControl control = backend.dispatch();
  const TempFolder folder;
  const std::vector<std::string> child_args = ChildArgs(args);
  std::vector<reports::IsaRun> runs;
  bool any_failure = false;
  for (const std::string& cap : caps) {
    reports::IsaRun run;
    run.cap = cap;
    // The probe: one sample of one of the backend's cases says what it dispatches to under the cap.
    const std::string probe_json = folder.path() + "/probe-" + cap + ".json", probe_log = folder.path() + "/probe-" + cap + ".log";
    const int probe_exit = RunChild(control, cap, {"run", "--fused", word, "--activation", "relu", "--samples", "1",
                                                   "--threads", "1", "--json", probe_json}, probe_log);
    if (probe_exit != 0 && probe_exit != 1) {
      throw std::runtime_error(fmt::format("--isa {}: the probe run exited {}:\n{}", cap, probe_exit, Tail(ReadText(probe_log), 10)));
    }
    run.effective_isa =
        provenance_value(reports::ReadResultsFile(probe_json).provenance, backend.name(), control.provenance_key);
    run.available = run.effective_isa == Lower(cap);
    if (run.available) {
      err << fmt::format("fusediff: --isa {}: running the {} cases under {}={}\n", cap, backend.name(), control.env_var, cap);
      const std::string results = folder.path() + "/" + cap + ".json", log = folder.path() + "/" + cap + ".log";
      std::vector<std::string> a = child_args;
      a.push_back("--json");
      a.push_back(results);
      run.exit_code = RunChild(control, cap, a, log);
      if (run.exit_code == kExitBadInput) throw InputError(fmt::format("--isa {}: {}", cap, Tail(ReadText(log), 5)));
      if (run.exit_code != kExitPass && run.exit_code != kExitFail) {
        throw std::runtime_error(fmt::format("--isa {}: the run exited {}:\n{}", cap, run.exit_code, Tail(ReadText(log), 10)));
      }
      run.run = reports::ReadResultsFile(results);
      any_failure = any_failure || run.exit_code == kExitFail;
    } else {
      err << fmt::format("fusediff: --isa {}: not available on this CPU ({} dispatches to {})\n", cap, backend.name(),
                         run.effective_isa);
    }
    runs.push_back(std::move(run));
  }
  out << reports::RenderIsaMatrix(runs, backend.name(), control.env_var);
  if (!json.empty()) {
    const Provenance provenance = driver::CurrentProvenance(JoinCommandLine(args));
    reports::WriteFileAtomically(json, reports::DumpJson(reports::IsaMatrixToJson(runs, provenance)));
  }
  return any_failure ? kExitFail : kExitPass;
}

}  // namespace fusediff::cli

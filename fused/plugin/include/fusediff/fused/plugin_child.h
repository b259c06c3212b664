#pragma once
// A child process that speaks the subprocess protocol (plugin_frame.h) on its stdin and stdout: started, given
// one request frame at a time with a deadline, and ended. A child that dies or misses the deadline becomes a
// ChildLost naming what happened (the signal, the exit status, the timeout, the last lines of its stderr); it is
// killed and reaped then, and never left behind: the destructor kills (SIGKILL, its whole process group) and reaps
// one still running.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/fused/plugin_frame.h"

namespace fusediff::fused::plugin {

// A command line as words, split as a POSIX shell splits plain words, without expansions: blanks separate words;
// '...' keeps everything up to the next ' literally; "..." keeps everything up to the next unescaped ", where \"
// and \\ stand for " and \; outside quotes a backslash keeps the next character. No globs, variables, pipes or
// redirections (wrap the command in `sh -c '...'` for those). Throws InputError naming `what` for an unterminated
// quote, a trailing backslash or no word at all.
std::vector<std::string> split_command(std::string_view text, std::string_view what);

// The child is gone or hung: `timeout` says which; `what` the signal or exit status and its stderr's tail.
class ChildLost : public std::runtime_error {
 public:
  ChildLost(bool timeout, const std::string& what) : std::runtime_error(what), timeout_(timeout) {}
  bool timeout() const { return timeout_; }

 private:
  bool timeout_;
};

// "SIGSEGV", "SIGABRT", ... for a signal number ("signal N" for one without a name).
std::string signal_name(int signal);

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH when it has no '/') in its own process group, stdin and stdout on one
  // socket to this process, stderr on a pipe whose last `stderr_limit` bytes are kept. Throws InputError when it
  // cannot be started (no such program, not executable).
  explicit ChildProcess(std::vector<std::string> argv, size_t stderr_limit = 4096);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Sends `request` and reads one frame back, both within `timeout`. Throws ChildLost when the child dies, closes
  // its stdout or misses the deadline (after killing and reaping it; the object is then finished), FrameError (the
  // child is killed and reaped too) for a reply that is not a frame.
  Frame Call(const Frame& request, std::chrono::milliseconds timeout);
  // Sends `request` without waiting for a reply, then waits up to `grace` for the child to exit before killing it.
  // Never throws; the object is finished afterwards.
  void Close(const Frame& request, std::chrono::milliseconds grace);

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::vector<std::string>& argv() const { return argv_; }
  // The last bytes the child wrote on its stderr (at most stderr_limit).
  const std::string& stderr_tail() const { return stderr_; }

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  void WriteAll(std::span<const std::byte> bytes, Deadline deadline);
  size_t ReadSome(std::byte* out, size_t n, Deadline deadline);
  // Waits for the socket to be ready for `events` (draining stderr meanwhile); false at the deadline.
  bool WaitFor(short events, Deadline deadline);
  void DrainStderr();
  // Kills the child's group when `kill` (else waits up to `grace` first) and reaps it; returns what ended it.
  std::string Reap(bool kill, std::chrono::milliseconds grace);
  [[noreturn]] void Lost(bool timeout, const std::string& detail, bool kill_now = false);

  std::vector<std::string> argv_;
  size_t stderr_limit_;
  pid_t pid_ = -1;
  int socket_ = -1;
  int stderr_fd_ = -1;
  std::string stderr_;
};

}  // namespace fusediff::fused::plugin

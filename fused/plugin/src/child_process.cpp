#include "fusediff/fused/plugin_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "fusediff/model/errors.h"

extern char** environ;

namespace fusediff::fused::plugin {

std::vector<std::string> split_command(std::string_view text, std::string_view what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == text.size()) throw InputError(std::string(what) + ": a trailing backslash escapes nothing");
      word += text[i];
    } else if (c == '\'' || c == '"') {
      const size_t open = i;
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (c == '"' && text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) ++i;
        word += text[i];
      }
      if (i == text.size()) {
        throw InputError(std::string(what) + ": the quote " + std::string(1, c) + " at character " +
                         std::to_string(open + 1) + " is never closed");
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) throw InputError(std::string(what) + ": no command");
  return words;
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

namespace {
std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }
}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, size_t stderr_limit)
    : argv_(std::move(argv)), stderr_limit_(stderr_limit) {
  if (argv_.empty()) throw InputError("plugin command: no program");
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) throw std::runtime_error(Errno("socketpair"));
  // Room for a whole batch each way (as far as net.core.wmem_max allows): one hand-over per request and reply
  // instead of one per socket buffer, which a loaded machine's scheduler makes expensive.
  const int buffer = 4 << 20;
  for (int fd : sockets) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(sockets[0]);
    close(sockets[1]);
    throw std::runtime_error(Errno("pipe2"));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], 0);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own process group, so that a hung child's children (a shell's) die with it; default signal handling.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (std::string& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int failed = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(sockets[1]);
  close(err[1]);
  if (failed != 0) {
    close(sockets[0]);
    close(err[0]);
    throw InputError("plugin command: cannot start '" + argv_[0] + "': " + std::strerror(failed));
  }
  pid_ = pid;
  socket_ = sockets[0];
  stderr_fd_ = err[0];
  fcntl(socket_, F_SETFL, fcntl(socket_, F_GETFL) | O_NONBLOCK);
  fcntl(stderr_fd_, F_SETFL, fcntl(stderr_fd_, F_GETFL) | O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) Reap(true, std::chrono::milliseconds(0));
}

void ChildProcess::DrainStderr() {
  if (stderr_fd_ < 0) return;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(stderr_fd_, buffer, sizeof buffer);
    if (n > 0) {
      stderr_.append(buffer, static_cast<size_t>(n));
      if (stderr_.size() > stderr_limit_) stderr_.erase(0, stderr_.size() - stderr_limit_);
      continue;
    }
    if (n == 0 || errno != EINTR) {
      if (n == 0) {  // the child closed its stderr
        close(stderr_fd_);
        stderr_fd_ = -1;
      }
      return;
    }
  }
}

bool ChildProcess::WaitFor(short events, Deadline deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[2] = {{socket_, events, 0}, {stderr_fd_, POLLIN, 0}};
    const int ready = poll(fds, stderr_fd_ >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 60000)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(Errno("poll"));
    if (ready <= 0) continue;
    if (fds[1].revents != 0) DrainStderr();
    if (fds[0].revents != 0) return true;  // ready, or an error / hang-up the following call reports
  }
}

void ChildProcess::WriteAll(std::span<const std::byte> bytes, Deadline deadline) {
  while (!bytes.empty()) {
    const ssize_t n = send(socket_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      bytes = bytes.subspan(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) Lost(false, "");  // EPIPE, ECONNRESET: it is gone
    if (!WaitFor(POLLOUT, deadline)) Lost(true, "");
  }
}

size_t ChildProcess::ReadSome(std::byte* out, size_t n, Deadline deadline) {
  for (;;) {
    const ssize_t got = recv(socket_, out, n, 0);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return 0;  // ECONNRESET: as an end of stream
    if (!WaitFor(POLLIN, deadline)) Lost(true, "");
  }
}

Frame ChildProcess::Call(const Frame& request, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) throw std::logic_error("ChildProcess::Call after the child ended");
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  WriteAll(request.Encode(), deadline);
  Frame reply;
  try {
    if (!Frame::Read([&](std::byte* out, size_t n) { return ReadSome(out, n, deadline); }, &reply)) Lost(false, "");
  } catch (const FrameError& e) {
    Lost(false, std::string(": ") + e.what(), /*kill_now=*/true);  // alive, but speaking something else
  }
  return reply;
}

void ChildProcess::Close(const Frame& request, std::chrono::milliseconds grace) {
  if (pid_ <= 0) return;
  try {
    WriteAll(request.Encode(), std::chrono::steady_clock::now() + grace);
  } catch (const ChildLost&) {
    return;  // already reaped
  }
  Reap(false, grace);
}

std::string ChildProcess::Reap(bool kill_now, std::chrono::milliseconds grace) {
  int status = 0;
  pid_t done = 0;
  if (!kill_now) {
    // It may be on its way out (it closed the socket as it died): give it `grace` to exit by itself.
    const Deadline until = std::chrono::steady_clock::now() + grace;
    while ((done = waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::string what;
  if (done != pid_) {
    kill(-pid_, SIGKILL);  // its process group: a shell's children too
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    what = kill_now ? "killed (SIGKILL)" : "closed its stdout and was killed (SIGKILL)";
  } else if (WIFSIGNALED(status)) {
    what = "killed by " + signal_name(WTERMSIG(status)) + " (signal " + std::to_string(WTERMSIG(status)) + ")";
  } else {
    what = "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  kill(-pid_, SIGKILL);  // whatever of its group is left (nothing, usually)
  DrainStderr();
  pid_ = -1;
  close(socket_);
  socket_ = -1;
  if (stderr_fd_ >= 0) close(stderr_fd_);
  stderr_fd_ = -1;
  return what;
}

void ChildProcess::Lost(bool timeout, const std::string& detail, bool kill_now) {
  // A child that closed its end is usually on its way out: a moment to collect its signal or status.
  const std::string what = Reap(timeout || kill_now, std::chrono::milliseconds(2000));
  std::string why = timeout    ? "no answer in time; the child was killed (SIGKILL)"
                    : kill_now ? "the child sent what is not a frame" + detail + "; it was killed (SIGKILL)"
                               : "the child " + what + detail;
  std::string tail = stderr_;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  if (!tail.empty()) {
    // Its last lines, on one line.
    const size_t keep = tail.size() > 600 ? tail.size() - 600 : 0;
    tail = tail.substr(keep);
    for (char& c : tail) c = c == '\n' ? '|' : c;
    why += "; its stderr ends: " + std::string(keep > 0 ? "..." : "") + tail;
  }
  throw ChildLost(timeout, why);
}

}  // namespace fusediff::fused::plugin

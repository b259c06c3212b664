// The child supervisor: a frame goes to the child and one comes back; a child that dies, hangs, exits or writes
// something else is a ChildLost (or FrameError) naming what happened, killed and reaped, never left behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>

#include "fusediff/fused/plugin_child.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {
namespace {

using std::chrono::milliseconds;

std::string LostReason(std::vector<std::string> argv, milliseconds timeout, bool* timed_out, pid_t* pid = nullptr) {
  ChildProcess child(std::move(argv));
  if (pid) *pid = child.pid();
  try {
    child.Call(Frame("hello"), timeout);
  } catch (const ChildLost& e) {
    *timed_out = e.timeout();
    EXPECT_FALSE(child.running());
    return e.what();
  }
  return "(answered)";
}

bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

TEST(SplitCommand, WordsQuotesAndEscapes) {
  EXPECT_EQ(split_command("python3  plugin.py --x 1", "exec"),
            (std::vector<std::string>{"python3", "plugin.py", "--x", "1"}));
  EXPECT_EQ(split_command(R"(a 'b c' "d \"e\" \\ f" g\ h '' x'y'"z")", "exec"),
            (std::vector<std::string>{"a", "b c", R"(d "e" \ f)", "g h", "", "xyz"}));
}

TEST(SplitCommand, ClearErrors) {
  try {
    split_command("python3 'plugin.py", "--fused exec:");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--fused exec:: the quote ' at character 9 is never closed");
  }
  EXPECT_THROW(split_command("   ", "exec"), InputError);
  EXPECT_THROW(split_command("a\\", "exec"), InputError);
}

TEST(ChildProcess, CatEchoesAFrameBack) {
  ChildProcess child({"cat"});
  Frame request("run");
  // cat echoes as it reads: a request past the socket's buffers would block both sides (a real child reads the
  // whole request before it answers).
  request.add<int32_t>("input", std::vector<int32_t>(10000, 42));
  const Frame reply = child.Call(request, milliseconds(10000));
  EXPECT_EQ(reply.Encode(), request.Encode());
  const pid_t pid = child.pid();
  child.Close(Frame("bye"), milliseconds(0));  // cat does not exit on a frame: killed after the grace
  EXPECT_FALSE(child.running());
  EXPECT_TRUE(Gone(pid));
}

TEST(ChildProcess, ASegfaultNamesTheSignalAndTheStderr) {
  bool timeout = true;
  pid_t pid = 0;
  const std::string why =
      LostReason({"sh", "-c", "echo 'about to fail' >&2; kill -SEGV $$"}, milliseconds(10000), &timeout, &pid);
  EXPECT_FALSE(timeout);
  EXPECT_NE(why.find("killed by SIGSEGV (signal 11)"), std::string::npos) << why;
  EXPECT_NE(why.find("its stderr ends: about to fail"), std::string::npos) << why;
  EXPECT_TRUE(Gone(pid));
}

TEST(ChildProcess, AnAbortAndAnExit) {
  bool timeout = true;
  EXPECT_NE(LostReason({"sh", "-c", "kill -ABRT $$"}, milliseconds(10000), &timeout).find("SIGABRT"), std::string::npos);
  const std::string why = LostReason({"sh", "-c", "exit 3"}, milliseconds(10000), &timeout);
  EXPECT_NE(why.find("exited with status 3"), std::string::npos) << why;
}

TEST(ChildProcess, AHungChildIsKilledAtTheDeadline) {
  bool timeout = false;
  pid_t pid = 0;
  const auto start = std::chrono::steady_clock::now();
  // sh waits for its own child: the whole process group is killed.
  const std::string why = LostReason({"sh", "-c", "sleep 100; true"}, milliseconds(300), &timeout, &pid);
  EXPECT_TRUE(timeout);
  EXPECT_NE(why.find("no answer in time"), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(Gone(pid));
}

TEST(ChildProcess, OtherOutputThanFramesIsLostWithTheFrameError) {
  bool timeout = true;
  const std::string why = LostReason({"sh", "-c", "echo 'Traceback: oops'; sleep 100"}, milliseconds(10000), &timeout);
  EXPECT_FALSE(timeout);
  EXPECT_NE(why.find("bad magic 'Trac'"), std::string::npos) << why;
}

TEST(ChildProcess, AMissingProgramIsAnInputError) {
  try {
    ChildProcess child({"/no/such/plugin-program"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start '/no/such/plugin-program': No such file"), std::string::npos)
        << e.what();
  }
}

TEST(ChildProcess, TheDestructorLeavesNoChildBehind) {
  pid_t pid = 0;
  {
    ChildProcess child({"sleep", "100"});
    pid = child.pid();
    EXPECT_FALSE(Gone(pid));
  }
  EXPECT_TRUE(Gone(pid));
}

}  // namespace
}  // namespace fusediff::fused::plugin

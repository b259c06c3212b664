// The launcher (build/fusediff): `bisect` runs as fusediff-bisect, a process without oneDNN, MPFR and OpenSSL; every
// other command is fusediff-full's, exit code and output included.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"

namespace fusediff::cli {
namespace {

struct Launched {
  int code = -1;
  std::string out, err;
};

// The real launcher in a child process; `env` added to its environment.
Launched Launch(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fusediff-launcher-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  const pid_t child = ::fork();
  if (child == 0) {
    if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) ::_exit(126);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv = {const_cast<char*>(FUSEDIFF_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(FUSEDIFF_BINARY, argv.data());
    ::_exit(127);
  }
  Launched r;
  int status = 0;
  if (child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  std::stringstream o, e;
  o << std::ifstream(out).rdbuf();
  e << std::ifstream(err).rdbuf();
  r.out = o.str();
  r.err = e.str();
  std::filesystem::remove_all(dir);
  return r;
}

TEST(Launcher, BisectLoadsNeitherOneDnnNorMpfrNorOpenSsl) {
  const Launched r = Launch({"bisect", "--help"}, {"LD_DEBUG=libs"});
  ASSERT_EQ(r.code, kExitPass) << r.err;
  EXPECT_NE(r.out.find("Usage: fusediff bisect"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("libprotobuf"), std::string::npos) << r.err;  // the loader's trace is there
  for (const char* lib : {"libdnnl", "libmpfr", "libcrypto", "libgomp"}) {
    EXPECT_EQ(r.err.find(lib), std::string::npos) << lib << " loaded for bisect";
  }
}

TEST(Launcher, EveryOtherCommandIsTheFullCli) {
  std::ostringstream out, err;
  ASSERT_EQ(Main({"fusediff", "--version"}, out, err), kExitPass);
  const Launched version = Launch({"--version"});
  EXPECT_EQ(version.code, kExitPass);
  EXPECT_EQ(version.out, out.str());
  const Launched patterns = Launch({"patterns", "--list"});
  EXPECT_EQ(patterns.code, kExitPass) << patterns.err;
  EXPECT_NE(patterns.out.find("conv2d"), std::string::npos) << patterns.out;
  const Launched bad = Launch({"run", "--samples", "many"});
  EXPECT_EQ(bad.code, kExitBadInput);
  EXPECT_NE(bad.err.find("--samples"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace fusediff::cli

#pragma once
// The fusediff command line, callable in-process (tests) and from main.
#include <iosfwd>
#include <string>
#include <vector>

namespace fusediff::cli {

// Exit codes.
inline constexpr int kExitPass = 0;        // every case passes (unsupported cases are listed, not failing)
inline constexpr int kExitFail = 1;        // some case fails its tolerance
inline constexpr int kExitBadInput = 2;    // usage or input error: one line naming the value and why
inline constexpr int kExitInternal = 3;    // an internal error (a bug) or an undecidable exact decision
inline constexpr int kExitInterrupted = 130;  // `run` stopped by SIGINT: partial results written, "complete": false

// args[0] is the program name. Writes reports to `out`, diagnostics to `err`.
int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `bisect` alone, as fusediff-bisect runs it (bisect_main.cpp: linked without oneDNN, MPFR and OpenSSL); the same
// options, output and exit codes as Main's `bisect`.
int BisectMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Ends a fusediff process with `code` once a command returned: every output is written and closed by then (files
// atomically), and the standard streams are flushed here. It skips the libraries' static destructors (tearing down
// ONNX Runtime's and oneDNN's global state, which the exit frees anyway: milliseconds of every bisect), as clang's
// -disable-free does for its compiler process.
[[noreturn]] void EndProcess(int code);

}  // namespace fusediff::cli

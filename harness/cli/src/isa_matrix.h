#pragma once
// Internal to the CLI: `fusediff run --isa LIST|all`, the oneDNN cases once per ISA cap, each in its own process.
#include <iosfwd>
#include <string>
#include <vector>

namespace fusediff::cli {

// The caps oneDNN 2.6 takes in ONEDNN_MAX_CPU_ISA, lowest first.
const std::vector<std::string>& IsaCaps();
// "all" -> every cap; else a comma-separated list of caps (any case), each once. Throws InputError naming --isa.
std::vector<std::string> ParseIsaList(const std::string& text);

// Runs `fusediff ARGS` (args[0] the program; --isa, --json, --csv and --junit removed) once per cap with
// ONEDNN_MAX_CPU_ISA set, after a one-sample probe that tells whether the CPU runs the cap; prints the side-by-side
// table; writes the matrix JSON to `json` (if not empty). Returns 1 when any available cap's run failed, else 0.
int RunIsaMatrix(const std::vector<std::string>& caps, const std::vector<std::string>& args, const std::string& json,
                 std::ostream& out, std::ostream& err);

}  // namespace fusediff::cli

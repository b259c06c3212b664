#pragma once
// Internal to the CLI: `fusediff run --isa LIST|all`, a backend's cases once per dispatch cap (its DispatchControl,
// model/backend.h: oneDNN's ONEDNN_MAX_CPU_ISA), each in its own process.
#include <iosfwd>
#include <string>
#include <vector>

#include "fusediff/model/backend.h"

namespace fusediff::cli {

// "all" -> every cap of `control`; else a comma-separated list of its caps (any case), each once. Throws InputError
// naming --isa.
std::vector<std::string> ParseIsaList(const std::string& text, const DispatchControl& control);

// Runs `fusediff ARGS` (args[0] the program; --isa, --json, --csv and --junit removed) once per cap with the
// backend's dispatch variable set, after a one-sample probe of path `word` that tells whether the CPU runs the cap;
// prints the side-by-side table; writes the matrix JSON to `json` (if not empty). Returns 1 when any available cap's
// run failed, else 0.
int RunIsaMatrix(const Backend& backend, const std::string& word, const std::vector<std::string>& caps,
                 const std::vector<std::string>& args, const std::string& json, std::ostream& out, std::ostream& err);

}  // namespace fusediff::cli

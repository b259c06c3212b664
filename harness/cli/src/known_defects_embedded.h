#pragma once
// The known-defect ledger compiled into the binary (fused/onednn/known_defects.json at build time), so the default
// run finds it without arguments; `fusediff run --known-defects FILE` reads another, `--no-known-defects` none.
#include <string_view>

namespace fusediff::cli {

inline constexpr const char* kEmbeddedKnownDefectsName = "fused/onednn/known_defects.json (embedded)";
std::string_view EmbeddedKnownDefects();

}  // namespace fusediff::cli

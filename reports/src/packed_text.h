#pragma once
// Long per-code and per-draw texts in results JSON (fusediff-results/6): zlib-compressed (deflate, level 9), then
// base64 (OpenSSL), so a default run's file stays small. Deterministic for a given zlib build.
#include <cstddef>
#include <string>
#include <string_view>

namespace fusediff::reports {

std::string PackText(std::string_view text);
// The inverse; std::nullopt-free: throws InputError "FIELD: expected ..." on anything that is not a packed text
// of at most `max_bytes` bytes.
std::string UnpackText(std::string_view packed, size_t max_bytes, const std::string& field);

}  // namespace fusediff::reports

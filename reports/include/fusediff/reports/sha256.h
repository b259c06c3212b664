#pragma once
// SHA-256 of a byte string (OpenSSL libcrypto), for provenance: which exact file a verdict is about.
#include <string>
#include <string_view>

namespace fusediff::reports {

// 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);

}  // namespace fusediff::reports

#pragma once
// The name of a stage kind: the token a pattern name spells it with ("act", "add", "maxpool", ...). A kind is one
// module (model/stage_module.h): its token is all a Stage carries, the registry holds the rest. The built-in kinds
// are constants here so that code which asks about one of them reads as before (StageKind::add); a module
// registered elsewhere (a test's stage) makes its own StageKind{"token"}. std only.
#include <string_view>

namespace fusediff {

class StageKind {
 public:
  constexpr StageKind() = default;
  // `token` must outlive every Stage of the kind (a literal, or a module's static).
  constexpr explicit StageKind(std::string_view token) : token_(token) {}
  constexpr std::string_view token() const { return token_; }
  friend constexpr bool operator==(StageKind a, StageKind b) { return a.token_ == b.token_; }

  static const StageKind activation, add, max_pool, avg_pool, fully_connected, batchnorm, mul, layernorm;

 private:
  std::string_view token_ = "act";
};

inline constexpr StageKind StageKind::activation{"act"};
inline constexpr StageKind StageKind::add{"add"};
inline constexpr StageKind StageKind::max_pool{"maxpool"};
inline constexpr StageKind StageKind::avg_pool{"avgpool"};
inline constexpr StageKind StageKind::fully_connected{"fc"};
inline constexpr StageKind StageKind::batchnorm{"batchnorm"};
inline constexpr StageKind StageKind::mul{"mul"};
inline constexpr StageKind StageKind::layernorm{"layernorm"};

}  // namespace fusediff

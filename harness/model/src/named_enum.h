#pragma once
// Internal to the model: an enum's text names as a table, and the two lookups every to_string / parse_* uses.
#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "fusediff/model/errors.h"

namespace fusediff::detail {

template <typename Enum, size_t N>
using Names = std::array<std::pair<std::string_view, Enum>, N>;

// The value named `text`; InputError "FIELD: unknown WHAT 'TEXT' (expected a, b, c)" otherwise.
template <typename Enum, size_t N>
Enum ParseNamed(std::string_view text, std::string_view field, std::string_view what, const Names<Enum, N>& names) {
  std::string expected;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    expected += (expected.empty() ? "" : ", ") + std::string(name);
  }
  throw InputError(std::string(field) + ": unknown " + std::string(what) + " '" + std::string(text) + "' (expected " +
                   expected + ")");
}

// The name of `value`; "?" for a value the table lacks.
template <typename Enum, size_t N>
std::string_view NameOf(Enum value, const Names<Enum, N>& names) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace fusediff::detail

#pragma once
// Internal to the model: an enum's text names as a table, and the two lookups every to_string / parse_* uses.
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// The fields of `text` between the separators `sep` ("a:b:" -> "a", "b", ""), views into text.
inline std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  for (;;) {
    const size_t end = text.find(sep, begin);
    parts.push_back(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  return parts;
}

}  // namespace fusediff::detail

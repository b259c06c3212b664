#pragma once
// Strict JSON field access for the descriptor and tolerance readers: every failure is an InputError naming the
// file and the field path.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fusediff/json/strict_parse.h"
#include "fusediff/model/errors.h"

namespace fusediff::tables::detail {

using nlohmann::json;

inline std::string TypeName(const json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return "an integer";
  if (j.is_number_float()) return "a number";
  return std::string(j.is_null() ? "null" : j.type_name() == std::string("string") ? "a string" : j.type_name());
}

class Fields {
 public:
  Fields(const std::string& file, std::string path) : file_(file), path_(std::move(path)) {}

  [[noreturn]] void Fail(std::string_view field, const std::string& what) const {
    throw InputError(file_ + ": " + Name(field) + ": " + what);
  }
  // "FILE: PATH.FIELD": where a value sits, for errors raised elsewhere (e.g. a model enum's parser).
  std::string Where(std::string_view field) const { return file_ + ": " + Name(field); }
  std::string Name(std::string_view field) const {
    return path_.empty() ? std::string(field) : path_ + "." + std::string(field);
  }
  Fields Child(std::string_view field) const { return Fields(file_, Name(field)); }

  // `j` must be an object whose keys are all in `allowed`.
  void CheckObject(const json& j, std::string_view what, std::initializer_list<std::string_view> allowed) const {
    if (!j.is_object()) {
      throw InputError(file_ + ": " + (path_.empty() ? std::string("top level") : path_) + ": expected " +
                       std::string(what) + " (a JSON object), got " + TypeName(j));
    }
    for (const auto& item : j.items()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || item.key() == a;
      if (!known) {
        std::string list;
        for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        Fail(item.key(), "unknown field (expected one of: " + list + ")");
      }
    }
  }
  const json& Required(const json& object, std::string_view field) const {
    auto it = object.find(std::string(field));
    if (it == object.end()) Fail(field, "missing (required)");
    return *it;
  }
  std::string String(const json& object, std::string_view field) const {
    const json& j = Required(object, field);
    if (!j.is_string()) Fail(field, "expected a string, got " + TypeName(j));
    return j.get<std::string>();
  }
  // A versioned file of entries: an object {"format": FORMAT, LIST: [...]} and nothing else; returns the array.
  const json& FormattedList(const json& root, std::string_view what, std::string_view format,
                            std::string_view list_field) const {
    return FormattedList(root, what, {format}, list_field, nullptr);
  }
  // The same for a file that may be in any of `formats` (newest first); *which: the index of the one it is in.
  const json& FormattedList(const json& root, std::string_view what, std::initializer_list<std::string_view> formats,
                            std::string_view list_field, size_t* which) const {
    CheckObject(root, what, {"format", list_field});
    const std::string found = String(root, "format");
    size_t index = 0;
    std::string expected;
    for (std::string_view format : formats) {
      if (found == format) break;
      expected += (expected.empty() ? "" : " or ") + std::string(format);
      ++index;
    }
    if (index == formats.size()) Fail("format", "'" + found + "' (expected " + expected + ")");
    if (which) *which = index;
    const json& list = Required(root, list_field);
    if (!list.is_array()) Fail(list_field, "expected an array of entries, got " + TypeName(list));
    return list;
  }
  bool Bool(const json& j, std::string_view field) const {
    if (!j.is_boolean()) Fail(field, "expected true or false, got " + TypeName(j));
    return j.get<bool>();
  }
  double Number(const json& j, std::string_view field) const {
    if (!j.is_number()) Fail(field, "expected a number, got " + TypeName(j));
    const double value = j.get<double>();
    if (!std::isfinite(value)) Fail(field, "expected a finite number");
    return value;
  }
  int64_t Integer(const json& j, std::string_view field) const {
    if (j.is_number_unsigned()) {
      const uint64_t v = j.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) Fail(field, "integer out of range");
      return static_cast<int64_t>(v);
    }
    if (!j.is_number_integer()) Fail(field, "expected an integer, got " + TypeName(j));
    return j.get<int64_t>();
  }

 private:
  const std::string& file_;
  std::string path_;
};

// nlohmann's parse errors carry line and column; other json exceptions (e.g. number overflow) their text. A
// duplicate key is an InputError with its line and path (strict_json::Parse).
inline json ParseJson(std::string_view text, const std::string& file) {
  try {
    return strict_json::Parse(text, file);
  } catch (const json::exception& e) {
    throw InputError(file + ": not valid JSON: " + e.what());
  }
}

}  // namespace fusediff::tables::detail

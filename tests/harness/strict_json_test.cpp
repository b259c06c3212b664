// strict_json::Parse: nlohmann's parse, except that a key repeated within one object is an InputError naming the
// file, the line and the key's path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "fusediff/json/strict_parse.h"
#include "fusediff/model/errors.h"

namespace fusediff {
namespace {

std::string DuplicateError(const std::string& text) {
  try {
    strict_json::Parse(text, "f.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(StrictJson, ReadsEveryShippedJsonFileAsNlohmannDoes) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FUSEDIFF_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    EXPECT_EQ(strict_json::Parse(text.str(), entry.path().string()), nlohmann::json::parse(text.str())) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 10);
}

TEST(StrictJson, TheSameKeyInDifferentObjectsIsNoDuplicate) {
  const std::string text = R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}, [{"x": 3}]], "x": 0})";
  EXPECT_EQ(strict_json::Parse(text, "f.json"), nlohmann::json::parse(text));
}

TEST(StrictJson, DuplicateKeyNamesFileLinePathAndFirstLine) {
  EXPECT_EQ(DuplicateError("{\n  \"a\": 1,\n  \"b\": 2,\n  \"a\": 2\n}\n"),
            "f.json line 4: a: duplicate key (first on line 2; each key may appear once per object)");
}

TEST(StrictJson, DuplicatePathRunsThroughObjectsAndArrays) {
  // The duplicate sits in the object at index 2 of t, inside its first element, under y.
  EXPECT_EQ(DuplicateError(R"({"t": [1, {"z": 0}, [{"x": 1, "y": {"z": 1,)"
                           "\n\"z\": 2}}]]}"),
            "f.json line 2: t[2][0].y.z: duplicate key (first on line 1; each key may appear once per object)");
  EXPECT_EQ(DuplicateError(R"([{"k": 1}, {"k": 1, "k": 2}])"),
            "f.json line 1: [1].k: duplicate key (first on line 1; each key may appear once per object)");
}

TEST(StrictJson, KeysAreComparedAfterEscapesAreDecoded) {
  // "\u0061" is "a": nlohmann would keep the second silently.
  EXPECT_NE(DuplicateError(R"({"a": 1, "\u0061": 2})").find("a: duplicate key"), std::string::npos);
}

TEST(StrictJson, SyntaxErrorsStayNlohmannParseErrors) {
  EXPECT_THROW(strict_json::Parse("{\"a\": ", "f.json"), nlohmann::json::parse_error);
  EXPECT_THROW(strict_json::Parse("", "f.json"), nlohmann::json::parse_error);
  EXPECT_EQ(strict_json::Parse("[]", "f.json"), nlohmann::json::array());
}

}  // namespace
}  // namespace fusediff

// Results format /7: each backend's provenance as ordered key/value pairs (platform.backends), read back in order;
// a /6 file's platform.<backend> object read into the same shape; merge refuses shards whose backends differ.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff {
namespace {

RunResult RunWith(std::vector<BackendProvenance> backends) {
  RunResult run;
  run.provenance.backends = std::move(backends);
  return run;
}

TEST(BackendProvenance, RoundTripsInItsOrder) {
  // Keys deliberately out of alphabetical order: the pairs keep the backend's own.
  const BackendProvenance lib{"lib", {{"version", "1.2"}, {"isa", "avx2"}, {"library", "Lib"}}};
  const nlohmann::ordered_json j = reports::ToJson(RunWith({lib}));
  EXPECT_EQ(j["format"], reports::kResultsFormat);
  for (const auto& [key, value] : j["platform"].items()) EXPECT_TRUE(key == "backends" || !value.is_object()) << key;
  ASSERT_EQ(j["platform"]["backends"].size(), 1u);
  EXPECT_EQ(j["platform"]["backends"][0]["name"], "lib");
  EXPECT_EQ(j["platform"]["backends"][0]["provenance"][0][0], "version");
  const RunResult back = reports::FromJson(nlohmann::json::parse(j.dump()), "new.json");
  ASSERT_EQ(back.provenance.backends.size(), 1u);
  EXPECT_EQ(back.provenance.backends[0], lib);
  EXPECT_EQ(provenance_value(back.provenance, "lib", "isa"), "avx2");
  EXPECT_EQ(provenance_value(back.provenance, "lib", "nothing"), "");
  EXPECT_EQ(reports::ToJson(back).dump(), j.dump());
  // No backend with provenance (the built-in kernels alone): no key at all.
  EXPECT_FALSE(reports::ToJson(RunWith({}))["platform"].contains("backends"));
}

TEST(BackendProvenance, OlderFilesReadTheirLibraryIntoTheNewShape) {
  nlohmann::json j = nlohmann::json::parse(reports::ToJson(RunWith({})).dump());
  j["format"] = "fusediff-results/6";
  j["platform"]["lib"] = {{"version", "2.6.3 (commit N/A)"}, {"isa", "avx512_core_vnni"}};
  const RunResult old = reports::FromJson(j, "old.json");
  ASSERT_EQ(old.provenance.backends.size(), 1u);
  EXPECT_EQ(old.provenance.backends[0].backend, "lib");
  EXPECT_EQ(old.provenance.backends[0].fields,
            (KeyValues{{"isa", "avx512_core_vnni"}, {"version", "2.6.3 (commit N/A)"}}));
  j["platform"]["lib"]["isa"] = 7;
  EXPECT_THROW(reports::FromJson(j, "bad.json"), InputError);  // a /6 value that is not a string
  j["platform"]["backends"] = {{{"name", "lib"}, {"provenance", {{"version"}}}}};  // a pair without its value
  j["format"] = reports::kResultsFormat;
  j["platform"].erase("lib");
  EXPECT_THROW(reports::FromJson(j, "bad.json"), InputError);
}

TEST(BackendProvenance, MergeRefusesShardsOfDifferentBackends) {
  RunResult a = RunWith({{"lib", {{"isa", "avx2"}}}}), b = RunWith({{"lib", {{"isa", "avx512_core"}}}});
  a.shard_count = b.shard_count = 2;
  b.shard_index = 1;
  try {
    reports::MergeRuns({a, b}, {"a.json", "b.json"}, false);
    FAIL() << "merged shards of different backends";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("platform.backends: expected lib: isa avx2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fusediff

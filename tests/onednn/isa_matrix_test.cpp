// `fusediff run --isa`: its argument checks (in-process; they come before any child process) and the side-by-side
// table and JSON. The children themselves run in the ctest cli.isa_matrix (the real binary).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/reports/reports.h"
#include "shard_env.h"

namespace fusediff {
namespace {

int RunCli(std::vector<std::string> args, std::string* err_text) {
  test_support::ClearShardVariables();
  args.insert(args.begin(), "fusediff");
  std::ostringstream out, err;
  const int code = cli::Main(args, out, err);
  *err_text = err.str();
  return code;
}

TEST(IsaMatrix, NeedsTheOneDnnCases) {
  std::string err;
  EXPECT_EQ(RunCli({"run", "--isa", "all"}, &err), cli::kExitBadInput);
  EXPECT_NE(err.find("--isa: the ISA matrix runs a backend whose dispatch can be capped: add --fused onednn"), std::string::npos) << err;
  EXPECT_EQ(RunCli({"run", "--fused", "lut", "--isa", "all"}, &err), cli::kExitBadInput);
}

TEST(IsaMatrix, RefusesUnknownAndRepeatedCaps) {
  std::string err;
  EXPECT_EQ(RunCli({"run", "--fused", "onednn", "--isa", "AVX2,AVX9"}, &err), cli::kExitBadInput);
  EXPECT_NE(err.find("--isa: 'AVX9': expected all or a comma-separated list of SSE41, AVX, AVX2"), std::string::npos) << err;
  EXPECT_EQ(RunCli({"run", "--fused", "onednn", "--isa", "avx2,AVX2"}, &err), cli::kExitBadInput);
  EXPECT_NE(err.find("AVX2 is listed twice"), std::string::npos) << err;
  EXPECT_EQ(RunCli({"run", "--fused", "onednn", "--isa", "AVX2", "--csv", "x.csv"}, &err), cli::kExitBadInput);
  EXPECT_NE(err.find("--json only"), std::string::npos) << err;
}

CaseResult Case(const std::string& name, uint64_t exact, uint64_t off_by, int64_t error, Verdict verdict) {
  CaseResult c;
  c.spec.name = name;
  c.verdict = verdict;
  for (uint64_t i = 0; i < exact; ++i) c.stats.add(WorstCase{i, 0, 0, 0, 0, 0, 0});
  for (uint64_t i = 0; i < off_by; ++i) c.stats.add(WorstCase{exact + i, error, 0, 0, 0, static_cast<int32_t>(error), 0});
  return c;
}

TEST(IsaMatrix, ShowsEachCapSideBySideAndTheUnavailableOnes) {
  reports::IsaRun avx2{"AVX2", "avx2", true, 1, {}};
  avx2.run.cases.push_back(Case("relu.int8.onednn.conv", 3, 1, 7, Verdict::fail));
  avx2.run.cases.back().implementation = "conv: jit_uni_int8:avx2";
  reports::IsaRun vnni{"AVX512_CORE_VNNI", "avx512_core_vnni", true, 0, {}};
  vnni.run.cases.push_back(Case("relu.int8.onednn.conv", 4, 0, 0, Verdict::pass));
  vnni.run.cases.push_back(Case("relu.int8.onednn.cross.conv", 2, 2, 1, Verdict::cross_convention));
  const reports::IsaRun amx{"AVX512_CORE_AMX", "avx512_core_bf16", false, 0, {}};
  const std::string table = reports::RenderIsaMatrix({avx2, vnni, amx}, "onednn", "ONEDNN_MAX_CPU_ISA");
  EXPECT_NE(table.find("case                         AVX2               AVX512_CORE_VNNI"), std::string::npos) << table;
  EXPECT_NE(table.find("75.000 / 7 / fail  100.000 / 0 / pass"), std::string::npos) << table;
  EXPECT_NE(table.find("relu.int8.onednn.cross.conv  (absent)           50.000 / 1 / -"), std::string::npos) << table;
  EXPECT_NE(table.find("AVX2 (avx2): 0 pass, 0 documented_behaviour, 0 known_defect, 1 fail (0 unsupported, 0 without a "
                       "verdict):\n  conv: jit_uni_int8:avx2\n"),
            std::string::npos) << table;
  EXPECT_NE(table.find("AVX512_CORE_VNNI (avx512_core_vnni): 1 pass, 0 documented_behaviour, 0 known_defect, 0 fail (0 "
                       "unsupported, 1 without a verdict)"),
            std::string::npos) << table;
  EXPECT_NE(table.find("AVX512_CORE_AMX: not available on this CPU (onednn dispatches to avx512_core_bf16 under it)"),
            std::string::npos) << table;

  const nlohmann::ordered_json j = reports::IsaMatrixToJson({avx2, amx}, Provenance{});
  EXPECT_EQ(j["format"], reports::kIsaMatrixFormat);
  ASSERT_EQ(j["isas"].size(), 2u);
  EXPECT_EQ(j["isas"][0]["cap"], "AVX2");
  EXPECT_EQ(j["isas"][0]["exit_code"], 1);
  EXPECT_EQ(j["isas"][0]["results"]["cases"].size(), 1u);
  EXPECT_FALSE(j["isas"][1]["available"].get<bool>());
  EXPECT_FALSE(j["isas"][1].contains("results"));
}

}  // namespace
}  // namespace fusediff

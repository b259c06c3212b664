#pragma once
// Every variable `fusediff run` takes its shard from (harness/cli/src/sharding.h). A surrounding test runner or
// scheduler (Bazel, GoogleTest, a Kubernetes Indexed Job, a Slurm array) must not shard the project's own runs,
// so tests clear them before running the CLI (the shell and CMake test drivers clear the same list).
#include <cstdlib>

namespace fusediff::test_support {

inline constexpr const char* kShardVariables[] = {
    "GTEST_TOTAL_SHARDS",   "GTEST_SHARD_INDEX",     "TEST_TOTAL_SHARDS",      "TEST_SHARD_INDEX",
    "TEST_SHARD_STATUS_FILE", "JOB_COMPLETION_INDEX", "FUSEDIFF_SHARD_COUNT",   "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP"};

inline void ClearShardVariables() {
  for (const char* v : kShardVariables) ::unsetenv(v);
}

}  // namespace fusediff::test_support

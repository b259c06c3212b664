#pragma once
// Which deterministic partition of the suite this process runs, from the first source present, in this order:
//   1. --shard I/N;
//   2. Bazel (TEST_SHARD_INDEX / TEST_TOTAL_SHARDS), then GoogleTest (GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS);
//   3. a Kubernetes Indexed Job: JOB_COMPLETION_INDEX, with the count from --shard-count N or FUSEDIFF_SHARD_COUNT
//      (Kubernetes does not export the number of completions);
//   4. a Slurm job array: (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP of
//      SLURM_ARRAY_TASK_COUNT.
// Every other source that is present must give the same shard: two sources that disagree are bad input, not a
// silent choice, since a scheduler and a flag that differ mean two processes may run the same shard.
#include <cstdint>
#include <string>

namespace fusediff::cli {

struct Shard {
  uint32_t index = 0;
  uint32_t count = 1;
  std::string source = "none";  // one of kShardSources (fusediff/model/results.h)
  std::string origin;           // the values it came from, e.g. "JOB_COMPLETION_INDEX=2, FUSEDIFF_SHARD_COUNT=4"
};

// `flag` is the --shard value and `count_flag` the --shard-count value ("" when absent). Throws InputError naming
// the flag or variable when a value is not a number, a count is 0, an index is outside its count, a source is
// half set, or two sources disagree. Touches TEST_SHARD_STATUS_FILE when set (Bazel's "this test honours
// sharding" handshake).
Shard ResolveShard(const std::string& flag, const std::string& count_flag);

}  // namespace fusediff::cli

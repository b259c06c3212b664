#pragma once
// Which deterministic partition of the suite this process runs: --shard I/N, else the sharding variables of
// Bazel (TEST_TOTAL_SHARDS / TEST_SHARD_INDEX) or GoogleTest (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX).
#include <cstdint>
#include <string>

namespace fusediff::cli {

struct Shard {
  uint32_t index = 0;
  uint32_t count = 1;
};

// `flag` is the --shard value ("" when absent); it wins over the environment. Throws InputError naming the flag
// or variable when a value is malformed or I >= N. Touches TEST_SHARD_STATUS_FILE when set (Bazel's "this test
// honours sharding" handshake).
Shard ResolveShard(const std::string& flag);

}  // namespace fusediff::cli

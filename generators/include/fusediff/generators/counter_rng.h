#pragma once
// Counter-based randomness: every value is a pure function of (seed, case stream, draw, purpose, index), so
// sample i of case c never depends on how many samples, threads or shards came before it.
#include <cstdint>

namespace fusediff::generators {

// What a stream is used for; distinct purposes never share values.
enum class StreamPurpose : uint32_t { geometry = 1, parameters = 2, input = 3, targets = 4, convention = 5, pattern = 6,
                                     formulation = 7, bootstrap = 8 };

// Philox4x32-10 (Random123) in counter mode: key = seed, counter = (purpose:8 | index:24, draw, case lo, case hi).
// Each block yields four 32-bit words; `next_*` walk the index. At most 2^24 blocks per stream.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t case_stream, uint32_t draw, StreamPurpose purpose);

  uint32_t next_u32();
  uint64_t next_u64();
  // Uniform integer in [lo, hi] (inclusive), unbiased (rejection on 64-bit words).
  int64_t uniform_int(int64_t lo, int64_t hi);
  // Uniform double in [0, 1) with 53 random bits.
  double uniform01();
  // Bernoulli with probability num/den, exact.
  bool chance(uint32_t num, uint32_t den) { return uniform_int(0, den - 1) < num; }

 private:
  void refill();
  uint64_t seed_;
  uint64_t case_stream_;
  uint32_t draw_;
  uint32_t purpose_;
  uint32_t block_ = 0;
  uint32_t words_[4] = {0, 0, 0, 0};
  int used_ = 4;
};

}  // namespace fusediff::generators

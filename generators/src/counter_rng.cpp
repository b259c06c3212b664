#include "fusediff/generators/counter_rng.h"

#include <Random123/philox.h>

#include <stdexcept>

namespace fusediff::generators {

CounterRng::CounterRng(uint64_t seed, uint64_t case_stream, uint32_t draw, StreamPurpose purpose)
    : seed_(seed), case_stream_(case_stream), draw_(draw), purpose_(static_cast<uint32_t>(purpose)) {}

void CounterRng::refill() {
  if (block_ >= (1u << 24)) throw std::length_error("CounterRng: stream exhausted (2^24 blocks)");
  r123::Philox4x32 philox;
  r123::Philox4x32::ctr_type counter = {{(purpose_ << 24) | block_, draw_, static_cast<uint32_t>(case_stream_),
                                          static_cast<uint32_t>(case_stream_ >> 32)}};
  r123::Philox4x32::key_type key = {{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)}};
  r123::Philox4x32::ctr_type out = philox(counter, key);
  for (int i = 0; i < 4; ++i) words_[i] = out.v[i];
  ++block_;
  used_ = 0;
}

uint32_t CounterRng::next_u32() {
  if (used_ == 4) refill();
  return words_[used_++];
}

uint64_t CounterRng::next_u64() {
  const uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

int64_t CounterRng::uniform_int(int64_t lo, int64_t hi) {
  if (hi < lo) throw std::invalid_argument("CounterRng::uniform_int: empty range");
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;  // 0 means the full 2^64 range
  if (span == 0) return static_cast<int64_t>(next_u64());
  // Rejection: accept draws below the largest multiple of span, so every value is equally likely.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % span + 1) % span;
  uint64_t r;
  do {
    r = next_u64();
  } while (r > limit);
  return lo + static_cast<int64_t>(r % span);
}

double CounterRng::uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

}  // namespace fusediff::generators

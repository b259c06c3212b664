#pragma once
// Per intermediate code: whether any sample reached it, and the smallest and largest error seen there. Feeds
// the error-against-code plot and makes coverage mergeable across shards (a union of code sets, not a sum of
// counts). Bounded memory: one bit per code (at most 65,536) plus an entry per code whose error was non-zero.
#include <cstdint>
#include <map>
#include <vector>

namespace fusediff {

class CodeErrors {
 public:
  struct Range {
    int64_t min = 0;
    int64_t max = 0;
    friend bool operator==(const Range&, const Range&) = default;
  };

  CodeErrors() = default;
  CodeErrors(int32_t qmin, uint32_t code_count) : qmin_(qmin), covered_((code_count + 63) / 64, 0), code_count_(code_count) {}

  void add(int32_t code, int64_t error);
  void merge(const CodeErrors& other);  // the two must describe the same code range
  // Restores a stored range (reading results back); the code must be covered already.
  void set_range(int32_t code, Range range) { nonzero_[code] = range; }
  void mark_covered(int32_t code) { const uint32_t i = static_cast<uint32_t>(code - qmin_); covered_[i / 64] |= uint64_t{1} << (i % 64); }

  int32_t qmin() const { return qmin_; }
  uint32_t code_count() const { return code_count_; }
  bool covered(int32_t code) const {
    const uint32_t i = static_cast<uint32_t>(code - qmin_);
    return i < code_count_ && (covered_[i / 64] >> (i % 64)) & 1;
  }
  uint64_t covered_count() const;
  // Covered codes whose error range is not [0, 0]; a covered code missing here had only exact samples.
  const std::map<int32_t, Range>& nonzero() const { return nonzero_; }
  const std::vector<uint64_t>& covered_words() const { return covered_; }  // bit i: code qmin + i

  friend bool operator==(const CodeErrors&, const CodeErrors&) = default;

 private:
  int32_t qmin_ = 0;
  std::vector<uint64_t> covered_;
  uint32_t code_count_ = 0;
  std::map<int32_t, Range> nonzero_;
};

}  // namespace fusediff

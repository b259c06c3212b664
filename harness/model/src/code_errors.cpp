#include "fusediff/model/code_errors.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace fusediff {

namespace {
void Widen(CodeErrors::Range& range, int64_t error) {
  range.min = std::min(range.min, error);
  range.max = std::max(range.max, error);
}
}  // namespace

void CodeErrors::add(int32_t code, int64_t error) {
  auto it = nonzero_.find(code);
  if (it != nonzero_.end()) {
    Widen(it->second, error);
  } else if (error != 0) {
    // A code already covered without an entry had only exact samples: its range includes 0.
    Range range{error, error};
    if (covered(code)) Widen(range, 0);
    nonzero_.emplace(code, range);
  }
  mark_covered(code);
}

void CodeErrors::merge(const CodeErrors& other) {
  if (other.code_count_ == 0) return;
  if (code_count_ == 0) {
    *this = other;
    return;
  }
  if (qmin_ != other.qmin_ || code_count_ != other.code_count_) {
    throw std::logic_error("CodeErrors::merge: different code ranges");
  }
  // Codes exact on one side (covered, no entry) and wrong on the other have 0 inside their merged range.
  for (auto& [code, range] : nonzero_) {
    if (other.covered(code) && other.nonzero_.count(code) == 0) Widen(range, 0);
  }
  for (const auto& [code, range] : other.nonzero_) {
    auto it = nonzero_.find(code);
    if (it != nonzero_.end()) {
      Widen(it->second, range.min);
      Widen(it->second, range.max);
    } else {
      Range merged = range;
      if (covered(code)) Widen(merged, 0);
      nonzero_.emplace(code, merged);
    }
  }
  for (size_t i = 0; i < covered_.size(); ++i) covered_[i] |= other.covered_[i];
}

uint64_t CodeErrors::covered_count() const {
  uint64_t n = 0;
  for (uint64_t w : covered_) n += static_cast<uint64_t>(std::popcount(w));
  return n;
}

}  // namespace fusediff
